// Fused RMSNorm for MindSpore's CPU: the forward and backward of
//     y = w · (x · r),   r = 1 / sqrt(mean(x²) + eps)       (over the last axis)
// as two "aot" kernels of `mindspore.ops.Custom` (see core/fused.py, which builds this file with
// the other kernels into one library).
//
// Why: composed of MindSpore ops, a norm is a square, a mean, an rsqrt, two broadcasts of (rows, h)
// and two products forward, and their gradients backward, where each broadcast's gradient is a
// ReduceSum over every row. MindSpore's CPU BroadcastTo and ReduceSum run at ~1 GB/s: on the demo
// model (batch 8 × 256, width 256) the nine norms of a full fine-tuning step cost ~70 ms of
// broadcasts and reductions alone. Here each is one pass forward and two backward.
//
// Layouts (row-major float32): x (..., h) read as (n, h); w (h); r (n) saved by the forward for the
// backward. The weight's gradient is summed in fixed blocks of rows and the blocks in order, so it
// does not depend on the number of threads (a data-parallel worker gets fewer than a single one).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"

namespace {
using mindtune::is_f32;
using mindtune::parallel_blocks;
constexpr int64_t kRows = 64;  // rows per task

// rows n and width h of x (input 0) against w (input 1); 0 when they fit, else an error code
int read_dims(int nparam, int expected, int *ndims, int64_t **shapes, const char **dtypes, int64_t *n, int64_t *h) {
  if (nparam != expected) return 1;
  for (int i = 0; i < expected; ++i)
    if (!is_f32(dtypes[i])) return 20 + i;
  if (ndims[0] < 1 || ndims[1] != 1) return 10;
  *h = shapes[0][ndims[0] - 1];
  *n = 1;
  for (int i = 0; i + 1 < ndims[0]; ++i) *n *= shapes[0][i];
  if (shapes[1][0] != *h || *h <= 0) return 30;
  return 0;
}
}  // namespace

// inputs x (..., h), w (h), eps (1); outputs y (..., h), r (...)
extern "C" int mindtune_rmsnorm_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                        const char **dtypes, void *stream, void *extra) {
  int64_t n, h;
  if (int err = read_dims(nparam, 5, ndims, shapes, dtypes, &n, &h)) return err;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *w = static_cast<const float *>(params[1]);
  const float eps = *static_cast<const float *>(params[2]);
  auto *y = static_cast<float *>(params[3]);
  auto *r = static_cast<float *>(params[4]);
  const float inv_h = 1.f / static_cast<float>(h);
  parallel_blocks(n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float *xi = x + i * h;
      float *yi = y + i * h;
      float sum = 0.f;
      for (int64_t j = 0; j < h; ++j) sum += xi[j] * xi[j];
      const float ri = 1.f / std::sqrt(sum * inv_h + eps);
      r[i] = ri;
      for (int64_t j = 0; j < h; ++j) yi[j] = w[j] * (xi[j] * ri);
    }
  });
  return 0;
}

// inputs x, w, r, dy; outputs dx (..., h), dw (h)
//   t = x·r;  dw = Σ_rows dy·t;  dx = r·(dy·w − t·mean(dy·w·t))
extern "C" int mindtune_rmsnorm_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                         const char **dtypes, void *stream, void *extra) {
  int64_t n, h;
  if (int err = read_dims(nparam, 6, ndims, shapes, dtypes, &n, &h)) return err;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *w = static_cast<const float *>(params[1]);
  const auto *r = static_cast<const float *>(params[2]);
  const auto *dy = static_cast<const float *>(params[3]);
  auto *dx = static_cast<float *>(params[4]);
  auto *dw = static_cast<float *>(params[5]);
  const int64_t blocks = mindtune::block_count(n, kRows);
  std::vector<float> partial(blocks * h, 0.f);
  const float inv_h = 1.f / static_cast<float>(h);
  parallel_blocks(n, kRows, [&](int64_t block, int64_t i0, int64_t i1) {
    float *acc = partial.data() + block * h;
    std::vector<float> g(h);
    for (int64_t i = i0; i < i1; ++i) {
      const float *xi = x + i * h, *dyi = dy + i * h;
      const float ri = r[i];
      float dot = 0.f;
      for (int64_t j = 0; j < h; ++j) {
        const float t = xi[j] * ri;
        acc[j] += dyi[j] * t;
        g[j] = dyi[j] * w[j];
        dot += g[j] * t;
      }
      const float m = dot * inv_h;
      float *dxi = dx + i * h;
      for (int64_t j = 0; j < h; ++j) dxi[j] = ri * (g[j] - xi[j] * ri * m);
    }
  });
  std::memcpy(dw, partial.data(), sizeof(float) * h);
  for (int64_t t = 1; t < blocks; ++t) {
    const float *p = partial.data() + t * h;
    for (int64_t j = 0; j < h; ++j) dw[j] += p[j];
  }
  return 0;
}
