// Runs work(t) for t in [0, threads) on up to `threads` std::threads (the
// calling one included) and joins them. If no thread can be started, the
// calling thread runs the rest: the result never depends on how many ran.
#pragma once
#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

inline int64_t cpu_cores() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

template <class F>
void run_threads(int64_t threads, F&& work) {
  std::vector<std::thread> pool;
  int64_t started = 1;
  try {
    pool.reserve(size_t(std::max<int64_t>(threads, 1)));
    for (; started < threads; ++started) pool.emplace_back(work, started);
  } catch (const std::exception&) {  // no thread (or room for one) to be had: this one does the rest
  }
  work(int64_t(0));
  for (int64_t t = started; t < threads; ++t) work(t);
  for (auto& th : pool) th.join();
}
