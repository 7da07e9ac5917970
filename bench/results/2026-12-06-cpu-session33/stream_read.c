// How fast this VM's cores read memory: 640 MB (about a Q4_0 TinyLlama's weights), split between the OpenMP
// threads, read with 64-byte AVX-512 loads into four accumulators, 6 passes; GB/s per pass. The first pass also
// faults the pages' TLB entries in: read the later ones.
//   gcc -O2 -mavx512f -fopenmp stream_read.c -o stream_read && OMP_NUM_THREADS=2 ./stream_read
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  const size_t n = (size_t)640 << 20;
  char* p = aligned_alloc(2 << 20, n);
  memset(p, 1, n);
  for (int pass = 0; pass < 6; ++pass) {
    const double t0 = now();
    double sum = 0;  // printed, so that the loads are not optimised away
#pragma omp parallel reduction(+ : sum)
    {
      const size_t per = n / omp_get_num_threads();
      const char* q = p + per * omp_get_thread_num();
      __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
      for (size_t i = 0; i < per; i += 256) {
        a = _mm512_add_epi32(a, _mm512_load_si512(q + i));
        b = _mm512_add_epi32(b, _mm512_load_si512(q + i + 64));
        c = _mm512_add_epi32(c, _mm512_load_si512(q + i + 128));
        d = _mm512_add_epi32(d, _mm512_load_si512(q + i + 192));
      }
      sum += _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d)));
    }
    printf("%.1f GB/s (%g)\n", n / (now() - t0) / 1e9, sum);
  }
  free(p);
  return 0;
}
