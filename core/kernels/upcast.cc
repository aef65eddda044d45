// Frozen base weights stored in 16 bits (bfloat16 or float16), computed in float32 on the CPU
// (core/model.py FrozenMatmul and Embedding, LoRA runs with model.dtype bfloat16 | float16):
//   mindtune_upcast(w, after) -> float32 copy of w
//   mindtune_gather_upcast(table, ids) -> float32 rows table[ids]
// as "aot" kernels of `mindspore.ops.Custom` (built with the other kernels by core/fused.py).
//
// Why not MindSpore's Cast: a Cast of a weight depends on nothing but the weight, so the CPU
// runtime runs every layer's Cast as soon as the step starts and holds all the float32 copies at
// once (measured: 16 casts of 2048² bf16 weights, +268 MB, the same as storing them in float32).
// `after` is any tensor the caller computes first (the layer's input, or the backward's incoming
// gradient): an input of the kernel, so the copy is made when it is needed and freed after its
// MatMul. Its values are not read. MindSpore's CPU Gather has no bf16 kernel, and gathering from
// an upcast table would copy the whole vocabulary to float32 for a few rows.
//
// bf16 -> f32 is exact (the 16 high bits of the float); f16 -> f32 is exact too (F16C where the
// CPU has it, else the same conversion in integer arithmetic, subnormals included).
#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "common.h"

namespace {
using mindtune::is_i32;
using mindtune::parallel_blocks;
constexpr int64_t kChunk = 1 << 16;  // elements per task

enum class Half { kNone, kBf16, kF16 };

Half half_of(const char *dtype) {
  if (std::strcmp(dtype, "bfloat16") == 0) return Half::kBf16;
  if (std::strcmp(dtype, "float16") == 0 || std::strcmp(dtype, "half") == 0) return Half::kF16;
  return Half::kNone;
}

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_float(sign);  // ±0
  int shift = 0;  // subnormal: normalise
  while (!(mantissa & 0x400)) {
    mantissa <<= 1;
    ++shift;
  }
  return bits_to_float(sign | uint32_t(113 - shift) << 23 | ((mantissa & 0x3ff) << 13));
}

void convert(Half kind, const uint16_t *in, float *out, int64_t n) {
  if (kind == Half::kBf16) {
    auto *bits = reinterpret_cast<uint32_t *>(out);
    for (int64_t i = 0; i < n; ++i) bits[i] = uint32_t(in[i]) << 16;
    return;
  }
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i))));
#endif
  for (; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

int64_t element_count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int a = 0; a < ndim; ++a) n *= shape[a];
  return n;
}
}  // namespace

// inputs w (any shape, bf16 or f16), after (any dtype and shape, not read); output float32 w
extern "C" int mindtune_upcast(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                               void *stream, void *extra) {
  if (nparam != 3) return 1;
  const Half kind = half_of(dtypes[0]);
  if (kind == Half::kNone) return 20;
  if (!mindtune::is_f32(dtypes[2])) return 22;
  const int64_t n = element_count(ndims[0], shapes[0]);
  if (element_count(ndims[2], shapes[2]) != n) return 30;
  const auto *in = static_cast<const uint16_t *>(params[0]);
  auto *out = static_cast<float *>(params[2]);
  parallel_blocks(n, kChunk, [&](int64_t, int64_t e0, int64_t e1) { convert(kind, in + e0, out + e0, e1 - e0); });
  return 0;
}

// inputs table (V, h) bf16 or f16, ids int32 (any shape, each in [0, V)); output (ids..., h) float32.
// An id outside the table is an error (code 40), not a read out of bounds.
extern "C" int mindtune_gather_upcast(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                      void *stream, void *extra) {
  if (nparam != 3) return 1;
  const Half kind = half_of(dtypes[0]);
  if (kind == Half::kNone) return 20;
  if (!is_i32(dtypes[1])) return 21;
  if (!mindtune::is_f32(dtypes[2])) return 22;
  if (ndims[0] != 2) return 10;
  const int64_t vocab = shapes[0][0], width = shapes[0][1];
  const int64_t rows = element_count(ndims[1], shapes[1]);
  if (element_count(ndims[2], shapes[2]) != rows * width) return 30;
  const auto *table = static_cast<const uint16_t *>(params[0]);
  const auto *ids = static_cast<const int32_t *>(params[1]);
  auto *out = static_cast<float *>(params[2]);
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] < 0 || ids[r] >= vocab) return 40;
  parallel_blocks(rows, 16, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) convert(kind, table + int64_t(ids[r]) * width, out + r * width, width);
  });
  return 0;
}
