#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
// per 64B line: W dependent-free dpbusd ops
#define WORK(W) _Pragma("GCC unroll 32") for(int w=0;w<W;w++){ __m512i t=_mm512_dpbusd_epi32(v,_mm512_set1_epi32(w),x); acc[w&3]=_mm512_add_epi32(acc[w&3],t); }
int main(int argc,char**argv){
  size_t bufsz=(size_t)6500000; int copies=80; const int W=WW; int pf=atoi(argv[2]);
  char*b=aligned_alloc(1<<21,(bufsz*copies+(1<<21))&~((size_t)(1<<21)-1)); if(getenv("HUGE")) madvise(b,bufsz*copies,MADV_HUGEPAGE); memset(b,1,bufsz*copies);
  __m512i x=_mm512_set1_epi8(3);
  for(int rep=0;rep<3;rep++){
    double t0=now(); long s=0;
    for(int c=0;c<copies;c++){
    #pragma omp parallel num_threads(2) reduction(+:s)
    { int id=omp_get_thread_num(); size_t half=bufsz/2; const char*p=b+c*bufsz+id*half;
      __m512i acc[4]={_mm512_setzero_si512(),_mm512_setzero_si512(),_mm512_setzero_si512(),_mm512_setzero_si512()};
      for(size_t i=0;i+64<=half;i+=64){ if(pf) _mm_prefetch(p+i+pf,_MM_HINT_T0);
        __m512i v=_mm512_loadu_si512(p+i); acc[0]=_mm512_add_epi32(acc[0],v); WORK(W) }
      s+=_mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[0],acc[1]),_mm512_add_epi32(acc[2],acc[3]))); }
    }
    double t=now()-t0; printf("W %d pf %d: %.1f GB/s\n",W,pf,bufsz*(double)copies/t/1e9);
  }
}
