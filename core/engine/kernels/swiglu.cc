// Fused MLP gates for MindSpore's CPU: the forward and backward of SwiGLU (Llama, Qwen, Mistral…)
//     y = silu(g) · u = g · σ(g) · u,   σ(g) = 1 / (1 + exp(−g))
//     dg = dy · u · σ(g) · (1 + g · (1 − σ(g))),   du = dy · silu(g)
// and of GeGLU with the tanh-approximated gelu (Gemma's gelu_pytorch_tanh)
//     y = gelu(g) · u,   gelu(g) = ½·g·(1 + tanh(z)),   z = √(2/π)·(g + 0.044715·g³)
//     dg = dy · u · (½·(1 + tanh z) + ½·g·(1 − tanh² z)·√(2/π)·(1 + 3·0.044715·g²)),   du = dy · gelu(g)
// as "aot" kernels of `mindspore.ops.Custom` (built with the other kernels into one library by
// core/fused.py). The MLP's three projections stay MindSpore MatMuls around it.
//
// Why: composed, the gate is a Sigmoid, two Muls forward and a SigmoidGrad and four Muls
// backward, each a pass over a (rows, intermediate) tensor, and the forward keeps σ(g) and
// silu(g) for the backward (GeGLU composed: seven element-wise ops for the gelu alone). Here it is
// one pass each way; σ (tanh) is recomputed from g.
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
constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
constexpr float kGeluCubic = 0.044715f;

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

// The activations: value(g) and, for the backward, the value and its slope d act / d g.
struct Silu {
  static float value(float g) { return g * (1.f / (1.f + std::exp(-g))); }
  static void with_slope(float g, float *act, float *slope) {
    const float s = 1.f / (1.f + std::exp(-g));
    *act = g * s;
    *slope = s * (1.f + g * (1.f - s));
  }
};

struct GeluTanh {
  static float value(float g) { return 0.5f * g * (1.f + std::tanh(kGeluScale * (g + kGeluCubic * g * g * g))); }
  static void with_slope(float g, float *act, float *slope) {
    const float th = std::tanh(kGeluScale * (g + kGeluCubic * g * g * g));
    *act = 0.5f * g * (1.f + th);
    *slope = 0.5f * (1.f + th) + 0.5f * g * (1.f - th * th) * kGeluScale * (1.f + 3.f * kGeluCubic * g * g);
  }
};

// inputs g, u; output y = act(g) · u
template <typename Act>
int gate_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  int64_t size;
  if (int err = read_size(nparam, 3, ndims, shapes, dtypes, &size)) return err;
  const auto *g = static_cast<const float *>(params[0]);
  const auto *u = static_cast<const float *>(params[1]);
  auto *y = static_cast<float *>(params[2]);
  parallel_blocks(size, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) y[e] = Act::value(g[e]) * u[e];
  });
  return 0;
}

// inputs g, u, dy; outputs dg = dy · u · act'(g), du = dy · act(g)
template <typename Act>
int gate_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  int64_t size;
  if (int err = read_size(nparam, 5, ndims, shapes, dtypes, &size)) return err;
  const auto *g = static_cast<const float *>(params[0]);
  const auto *u = static_cast<const float *>(params[1]);
  const auto *dy = static_cast<const float *>(params[2]);
  auto *dg = static_cast<float *>(params[3]);
  auto *du = static_cast<float *>(params[4]);
  parallel_blocks(size, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      float act, slope;
      Act::with_slope(g[e], &act, &slope);
      du[e] = dy[e] * act;
      dg[e] = dy[e] * u[e] * slope;
    }
  });
  return 0;
}
}  // namespace

extern "C" int mindtune_swiglu_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                       const char **dtypes, void *stream, void *extra) {
  return gate_forward<Silu>(nparam, params, ndims, shapes, dtypes);
}

extern "C" int mindtune_swiglu_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                        const char **dtypes, void *stream, void *extra) {
  return gate_backward<Silu>(nparam, params, ndims, shapes, dtypes);
}

extern "C" int mindtune_geglu_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                      const char **dtypes, void *stream, void *extra) {
  return gate_forward<GeluTanh>(nparam, params, ndims, shapes, dtypes);
}

extern "C" int mindtune_geglu_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                       const char **dtypes, void *stream, void *extra) {
  return gate_backward<GeluTanh>(nparam, params, ndims, shapes, dtypes);
}

