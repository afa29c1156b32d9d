// Runs work(t) for t in [0, threads) on up to `threads` std::threads (the
// calling one included) and joins them. If no thread can be started, the
// calling thread runs the rest: the result never depends on how many ran.
// An exception out of work (std::bad_alloc from a worker's buffers) is
// caught in its thread; every thread is joined, then false is returned, so a
// kernel can report TC_ERR_INTERNAL instead of the process terminating.
#pragma once
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

inline int64_t cpu_cores() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

// Work under ~4M multiply-adds stays on the calling thread: starting one
// costs ~20 us, more than such a problem gains from a second core.
inline bool serial_work(int64_t madds) { return madds < (int64_t(1) << 22); }

// Threads for `items` work items of `madds` multiply-adds in all: one per
// core, no more than the items, one for serial work.
inline int64_t threads_for(int64_t items, int64_t madds) {
  return serial_work(madds) ? 1 : std::min(cpu_cores(), std::max<int64_t>(items, 1));
}

template <class F>
[[nodiscard]] bool run_threads(int64_t threads, F&& work) {
  std::atomic<bool> failed{false};
  auto guarded = [&](int64_t t) {
    try {
      work(t);
    } catch (...) {
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  int64_t started = 1;
  try {
    pool.reserve(size_t(std::max<int64_t>(threads, 1)));
    for (; started < threads; ++started) pool.emplace_back(guarded, started);
  } catch (const std::exception&) {  // no thread (or room for one) to be had: this one does the rest
  }
  guarded(0);
  for (int64_t t = started; t < threads; ++t) guarded(t);
  for (auto& th : pool) th.join();
  return !failed;
}
