// Fused SwiGLU gate for MindSpore's CPU: the forward and backward of
//     y = silu(g) · u = g · σ(g) · u,   σ(g) = 1 / (1 + exp(−g))
//     dg = dy · u · σ(g) · (1 + g · (1 − σ(g))),   du = dy · silu(g)
// as two "aot" kernels of `mindspore.ops.Custom` (built with attention.cc into one library by
// core/fused.py). The MLP's three projections stay MindSpore MatMuls around it.
//
// Why: composed, the gate is a Sigmoid, two Muls forward and a SigmoidGrad and four Muls
// backward, each a pass over a (rows, intermediate) tensor, and the forward keeps σ(g) and
// silu(g) for the backward. Here it is one pass each way; σ is recomputed from g.
//
// Layouts: g, u, y, dy, dg, du of one shape (..., intermediate), float32, read as flat arrays.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common.h"

namespace {
using mindtune::is_f32;
using mindtune::parallel_blocks;
constexpr int64_t kChunk = 16384;  // elements per task

// the element count shared by every parameter; 0 when they all match, else an error code
int read_size(int nparam, int expected, int *ndims, int64_t **shapes, const char **dtypes, int64_t *size) {
  if (nparam != expected) return 1;
  for (int i = 0; i < expected; ++i) {
    if (!is_f32(dtypes[i])) return 20 + i;
    if (ndims[i] != ndims[0]) return 10 + i;
    for (int a = 0; a < ndims[0]; ++a)
      if (shapes[i][a] != shapes[0][a]) return 30 + i;
  }
  *size = 1;
  for (int a = 0; a < ndims[0]; ++a) *size *= shapes[0][a];
  return 0;
}
}  // namespace

// inputs g, u; output y
extern "C" int mindtune_swiglu_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                       const char **dtypes, void *stream, void *extra) {
  int64_t size;
  if (int err = read_size(nparam, 3, ndims, shapes, dtypes, &size)) return err;
  const auto *g = static_cast<const float *>(params[0]);
  const auto *u = static_cast<const float *>(params[1]);
  auto *y = static_cast<float *>(params[2]);
  parallel_blocks(size, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const float s = 1.f / (1.f + std::exp(-g[e]));
      y[e] = (g[e] * s) * u[e];
    }
  });
  return 0;
}

// inputs g, u, dy; outputs dg, du
extern "C" int mindtune_swiglu_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                        const char **dtypes, void *stream, void *extra) {
  int64_t size;
  if (int err = read_size(nparam, 5, ndims, shapes, dtypes, &size)) return err;
  const auto *g = static_cast<const float *>(params[0]);
  const auto *u = static_cast<const float *>(params[1]);
  const auto *dy = static_cast<const float *>(params[2]);
  auto *dg = static_cast<float *>(params[3]);
  auto *du = static_cast<float *>(params[4]);
  parallel_blocks(size, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const float s = 1.f / (1.f + std::exp(-g[e]));
      const float silu = g[e] * s;
      du[e] = dy[e] * silu;
      dg[e] = dy[e] * u[e] * (s * (1.f + g[e] * (1.f - s)));
    }
  });
  return 0;
}
