// The CPU kernels' parallel regions, on the process's ThreadPool (thread_pool.h), opened only when worth it. The
// number of threads is OpenMP's for the calling thread (`--threads`: CpuOps sets it on the engine's thread), but no
// OpenMP region is opened: libgomp ended every region with a futex syscall, even a region of one thread
// (`#pragma omp parallel if (false)`): a decode step of stories260K opened about 70 serial ones, and a TinyLlama
// token made about 330 such syscalls in all (strace, 2026-12-07).
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>

#include "pagoda/backend/cpu/thread_pool.h"

namespace pagoda::cpu {

// The threads a region would have.
inline int region_threads() { return omp_get_max_threads(); }

// Whether work judged worth sharing (`worth`) gets a region: only with more than one thread to share it.
inline bool use_threads(bool worth) { return worth && region_threads() > 1; }

// body(me, count) on each of `count` threads (me 0 on the caller); count may be less than region_threads() (1
// when the pool is busy with another region: a nested region runs on its caller).
template <class Body>
void on_threads(const Body& body) {
  ThreadPool::instance().run(
      region_threads(), [](void* context, int me, int count) { (*static_cast<const Body*>(context))(me, count); },
      const_cast<Body*>(&body));
}

// body(me) on the threads of a region when `parallel` (use_threads), else once on the calling thread as me 0.
template <class Body>
void parallel_region(bool parallel, const Body& body) {
  if (!use_threads(parallel)) {
    body(0);
    return;
  }
  on_threads([&](int me, int) { body(me); });
}

// fn(i) for i in [0, n): in contiguous ranges, one a thread, when `parallel` (use_threads), else in order on the
// calling thread.
template <class Fn>
void parallel_for(int64_t n, bool parallel, const Fn& fn) {
  if (!use_threads(parallel)) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  on_threads([&](int me, int count) {
    for (int64_t i = n * me / count, end = n * (me + 1) / count; i < end; ++i) fn(i);
  });
}

// The same, handing out one i at a time to whichever thread is free (few items of uneven cost).
template <class Fn>
void parallel_for_dynamic(int64_t n, bool parallel, const Fn& fn) {
  if (!use_threads(parallel)) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  on_threads([&](int, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n; i = next.fetch_add(1, std::memory_order_relaxed)) fn(i);
  });
}

}  // namespace pagoda::cpu
