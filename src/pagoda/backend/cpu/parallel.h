// The CPU kernels' OpenMP regions, opened only when they are worth it. libgomp's `#pragma omp parallel if (false)`
// (and any region of one thread) still builds a team of one and ends it at a barrier whose last thread makes a
// futex syscall: a decode step of stories260K opened about 70 such regions, serial every one, and made 70 syscalls
// (strace, 2026-12-07). These helpers run the body on the calling thread instead, with no OpenMP call at all.
#pragma once

#include <omp.h>

#include <cstdint>

namespace pagoda::cpu {

// Whether work judged worth sharing (`worth`) gets a region: only with more than one thread to share it.
inline bool use_threads(bool worth) { return worth && omp_get_max_threads() > 1; }

// body() on every thread of a region when `parallel` (use_threads), else once on the calling thread (where
// omp_get_thread_num() is 0).
template <class Body>
void parallel_region(bool parallel, const Body& body) {
  if (!use_threads(parallel)) {
    body();
    return;
  }
#pragma omp parallel
  body();
}

// fn(i) for i in [0, n): split statically over the threads when `parallel` (use_threads), else in order on the
// calling thread.
template <class Fn>
void parallel_for(int64_t n, bool parallel, const Fn& fn) {
  if (!use_threads(parallel)) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// The same, handing out one i at a time to whichever thread is free (few items of uneven cost).
template <class Fn>
void parallel_for_dynamic(int64_t n, bool parallel, const Fn& fn) {
  if (!use_threads(parallel)) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace pagoda::cpu
