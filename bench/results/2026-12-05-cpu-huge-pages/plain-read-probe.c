#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t n=(size_t)1<<30; int pf=atoi(argv[1]);
  char*b=aligned_alloc(4096,n); memset(b,1,n);
  for(int rep=0;rep<5;rep++){
    double t0=now(); __m512i tot=_mm512_setzero_si512();
    

    long sums[2]={0,0};
    #pragma omp parallel num_threads(2)
    { int id=omp_get_thread_num(); size_t half=n/2; const char*p=b+id*half;
      __m512i a=_mm512_setzero_si512(),c=_mm512_setzero_si512();
      for(size_t i=0;i<half;i+=128){ if(pf) _mm_prefetch(p+i+pf,_MM_HINT_T0);
        a=_mm512_add_epi32(a,_mm512_load_si512(p+i)); c=_mm512_add_epi32(c,_mm512_load_si512(p+i+64)); }
      sums[id]=_mm512_reduce_add_epi32(_mm512_add_epi32(a,c)); }
    double t=now()-t0; printf("pf %d: %.1f GB/s (%ld)\n",pf,n/t/1e9,sums[0]+sums[1]);
  }
}
