// What the kernels in this folder share: the thread count (set from Python through
// `mindtune_set_threads`, core/fused.py), a static parallel loop and the dtype check.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace mindtune {

extern int g_threads;  // 0: the CPUs this process may run on (common.cc)

inline int thread_count() {
  if (g_threads > 0) return g_threads;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// fn(task) for every task in [0, tasks), task t on thread t mod n: the split depends only on the
// thread count, so a kernel that sums per task and then over tasks in order is deterministic
template <typename F>
void parallel_for(int64_t tasks, F fn) {
  const int64_t n = std::min<int64_t>(thread_count(), tasks);
  if (n <= 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < n; ++w)
    pool.emplace_back([&fn, w, n, tasks] { for (int64_t t = w; t < tasks; t += n) fn(t); });
  for (int64_t t = 0; t < tasks; t += n) fn(t);
  for (auto &th : pool) th.join();
}

// fn(block, begin, end) for the blocks [begin, end) of `size` items `block` at a time, in parallel;
// the blocks, like the tasks of parallel_for, do not depend on the thread count
inline int64_t block_count(int64_t size, int64_t block) { return (size + block - 1) / block; }

template <typename F>
void parallel_blocks(int64_t size, int64_t block, F fn) {
  parallel_for(block_count(size, block),
               [&](int64_t b) { fn(b, b * block, std::min(size, (b + 1) * block)); });
}

// The same blocks as parallel_blocks, on the calling thread when `parallel` is false: a kernel of
// a few hundred microseconds loses more waiting for a new thread to be scheduled (each call starts
// its threads; on a loaded machine that wait is milliseconds) than a second core saves.
template <typename F>
void blocks_maybe_parallel(bool parallel, int64_t size, int64_t block, F fn) {
  if (parallel) return parallel_blocks(size, block, fn);
  for (int64_t b = 0; b < block_count(size, block); ++b) fn(b, b * block, std::min(size, (b + 1) * block));
}

inline bool is_f32(const char *dtype) { return std::strcmp(dtype, "float32") == 0 || std::strcmp(dtype, "float") == 0; }
inline bool is_i32(const char *dtype) { return std::strcmp(dtype, "int32") == 0 || std::strcmp(dtype, "int") == 0; }

}  // namespace mindtune
