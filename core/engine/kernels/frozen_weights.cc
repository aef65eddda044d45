// Frozen base weights stored in 16 bits (bfloat16 or float16), computed in float32 on the CPU
// (core/model.py FrozenMatmul and Embedding, LoRA runs with model.dtype bfloat16 | float16):
//   mindtune_frozen_matmul_forward(x, w) -> y = x · wᵀ        x (N, I), w (O, I), y (N, O)
//   mindtune_frozen_matmul_backward(dy, w) -> dx = dy · w     dy (N, O), dx (N, I)
//   mindtune_head_loss_forward(h, w, targets) -> nll, lse   the LM head and its cross-entropy
//   mindtune_head_loss_backward(h, w, targets, lse, dnll) -> dh
//   mindtune_gather_upcast(table, ids) -> float32 rows table[ids]
// as "aot" kernels of `mindspore.ops.Custom` (built with the other kernels by core/fused.py).
//
// The matmuls convert w a block of rows (or columns) at a time into a per-task float32 buffer and
// multiply it with oneDNN's sgemm, so no float32 copy of a whole weight ever exists: for a tied
// embedding used as the LM head (Qwen2.5-0.5B: 151,936 × 896) an upcast copy is 545 MB.
//
// The head loss goes further: logits = h · wᵀ (rows, vocabulary) never exist. The forward runs over
// blocks of the vocabulary (a block of w converted, its logits computed with sgemm, folded into each
// row's running log-sum-exp, the target's logit picked); the backward recomputes each block's
// logits and adds (softmax − onehot)·dnll · w_block into dh. A (rows, vocabulary) float32 tensor is
// 155 MB at 2 × 128 tokens and a 152k vocabulary, and the composed path (head MatMul, loss kernel,
// gradient) held about 2.3 of them; here the cost is one more pass of the head's matmul.
// The head weight may be float32 too (w's dtype: float32, bfloat16 or float16).
//
// Why not MindSpore's Cast: a Cast of a weight depends on nothing but the weight, so the CPU
// runtime runs every layer's Cast as soon as the step starts and holds all the float32 copies at
// once (measured: 16 casts of 2048² bf16 weights, +268 MB, the same as storing them in float32).
// MindSpore's CPU Gather has no bf16 kernel, and gathering from an upcast table would copy the
// whole vocabulary to float32 for a few rows.
//
// bf16 -> f32 is exact (the 16 high bits of the float); f16 -> f32 is exact too (F16C where the
// CPU has it, else the same conversion in integer arithmetic, subnormals included).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "common.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc);

namespace {
using mindtune::is_i32;
using mindtune::parallel_blocks;
constexpr int64_t kChunk = 1 << 16;  // elements per task

enum class Half { kNone, kBf16, kF16, kF32 };

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
  if (kind == Half::kF32) {  // (the head loss's float32 weight: `in` points at floats)
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
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

namespace {
constexpr int64_t kBlockFloats = 1 << 18;  // a task's float32 weight block: 1 MB, stays in L2
constexpr int64_t kGroups = 8;             // row groups of the backward when O > I (fixed: deterministic)

// (N, K) of a 2-D float32 input and (O, I) of a 16-bit weight; 0 when they fit
int read_matmul(int nparam, int *ndims, int64_t **shapes, const char **dtypes, Half *kind) {
  if (nparam != 3) return 1;
  if (ndims[0] != 2 || ndims[1] != 2 || ndims[2] != 2) return 10;
  if (!mindtune::is_f32(dtypes[0]) || !mindtune::is_f32(dtypes[2])) return 20;
  *kind = half_of(dtypes[1]);
  return *kind == Half::kNone ? 21 : 0;
}

// rows [r0, r1) of w (O, I) as float32 (r1 - r0, I)
void convert_rows(Half kind, const uint16_t *w, int64_t in, int64_t r0, int64_t r1, float *out) {
  convert(kind, w + r0 * in, out, (r1 - r0) * in);
}

// columns [c0, c1) of w (O, I) as float32 (O, c1 - c0)
void convert_columns(Half kind, const uint16_t *w, int64_t rows, int64_t in, int64_t c0, int64_t c1, float *out) {
  const int64_t width = c1 - c0;
  for (int64_t r = 0; r < rows; ++r) convert(kind, w + r * in + c0, out + r * width, width);
}
}  // namespace

// inputs x (N, I) float32, w (O, I) 16-bit; output y (N, O) = x · wᵀ. Tasks own blocks of w's rows
// (= columns of y): each converts its rows and runs one sgemm.
extern "C" int mindtune_frozen_matmul_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                              const char **dtypes, void *stream, void *extra) {
  Half kind;
  if (int err = read_matmul(nparam, ndims, shapes, dtypes, &kind)) return err;
  const int64_t n = shapes[0][0], in = shapes[0][1], out_rows = shapes[1][0];
  if (shapes[1][1] != in || shapes[2][0] != n || shapes[2][1] != out_rows) return 30;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *w = static_cast<const uint16_t *>(params[1]);
  auto *y = static_cast<float *>(params[2]);
  const int64_t block = std::max<int64_t>(16, kBlockFloats / std::max<int64_t>(in, 1));
  parallel_blocks(out_rows, block, [&](int64_t, int64_t r0, int64_t r1) {
    std::vector<float> buffer((r1 - r0) * in);
    convert_rows(kind, w, in, r0, r1, buffer.data());
    dnnl_sgemm('N', 'T', n, r1 - r0, in, 1.f, x, in, buffer.data(), in, 0.f, y + r0, out_rows);
  });
  return 0;
}

// inputs dy (N, O) float32, w (O, I) 16-bit; output dx (N, I) = dy · w. When O <= I, tasks own
// blocks of w's columns (= columns of dx; dy, the smaller, is read by each); when O > I (an LM
// head), kGroups fixed groups of w's rows each sum their blocks' products into a partial dx, and
// the partials are added in group order (the same sums whatever the thread count).
extern "C" int mindtune_frozen_matmul_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                               const char **dtypes, void *stream, void *extra) {
  Half kind;
  if (int err = read_matmul(nparam, ndims, shapes, dtypes, &kind)) return err;
  const int64_t n = shapes[0][0], out_rows = shapes[0][1], in = shapes[1][1];
  if (shapes[1][0] != out_rows || shapes[2][0] != n || shapes[2][1] != in) return 30;
  const auto *dy = static_cast<const float *>(params[0]);
  const auto *w = static_cast<const uint16_t *>(params[1]);
  auto *dx = static_cast<float *>(params[2]);
  if (out_rows <= in) {
    const int64_t width = std::max<int64_t>(16, kBlockFloats / std::max<int64_t>(out_rows, 1));
    parallel_blocks(in, width, [&](int64_t, int64_t c0, int64_t c1) {
      std::vector<float> buffer(out_rows * (c1 - c0));
      convert_columns(kind, w, out_rows, in, c0, c1, buffer.data());
      dnnl_sgemm('N', 'N', n, c1 - c0, out_rows, 1.f, dy, out_rows, buffer.data(), c1 - c0, 0.f, dx + c0, in);
    });
    return 0;
  }
  const int64_t block = std::max<int64_t>(16, kBlockFloats / std::max<int64_t>(in, 1));
  const int64_t blocks = mindtune::block_count(out_rows, block);
  const int64_t groups = std::min(kGroups, blocks);
  std::vector<float> partial(groups * n * in);
  mindtune::parallel_for(groups, [&](int64_t g) {
    std::vector<float> buffer(block * in);
    float *acc = partial.data() + g * n * in;
    for (int64_t b = g * blocks / groups, first = b; b < (g + 1) * blocks / groups; ++b) {
      const int64_t r0 = b * block, r1 = std::min(out_rows, r0 + block);
      convert_rows(kind, w, in, r0, r1, buffer.data());
      dnnl_sgemm('N', 'N', n, in, r1 - r0, 1.f, dy + r0, out_rows, buffer.data(), in, b == first ? 0.f : 1.f, acc, in);
    }
  });
  parallel_blocks(n * in, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      float sum = partial[e];
      for (int64_t g = 1; g < groups; ++g) sum += partial[g * n * in + e];
      dx[e] = sum;
    }
  });
  return 0;
}

namespace {
constexpr int64_t kHeadGroups = 16;  // fixed vocabulary groups of the head-loss backward (deterministic sums)

struct HeadDims {
  int64_t n, h, v, block, blocks;
  Half kind;
};

// hidden (N, h) float32, weight (V, h) float32 | bf16 | f16, targets (N) int32; 0 when they fit
int read_head(int *ndims, int64_t **shapes, const char **dtypes, HeadDims *d) {
  if (ndims[0] != 2 || ndims[1] != 2 || ndims[2] != 1) return 10;
  if (!mindtune::is_f32(dtypes[0])) return 20;
  d->kind = mindtune::is_f32(dtypes[1]) ? Half::kF32 : half_of(dtypes[1]);
  if (d->kind == Half::kNone) return 21;
  if (!is_i32(dtypes[2])) return 22;
  d->n = shapes[0][0];
  d->h = shapes[0][1];
  d->v = shapes[1][0];
  if (shapes[1][1] != d->h || shapes[2][0] != d->n) return 30;
  d->block = std::max<int64_t>(16, kBlockFloats / std::max<int64_t>(d->h, 1));
  d->blocks = mindtune::block_count(d->v, d->block);
  return 0;
}

// the weight's rows [r0, r1) as float32 into `buffer` (float32 weights are read in place)
const float *weight_rows(const HeadDims &d, const void *w, int64_t r0, int64_t r1, std::vector<float> &buffer) {
  if (d.kind == Half::kF32) return static_cast<const float *>(w) + r0 * d.h;
  buffer.resize((r1 - r0) * d.h);
  convert_rows(d.kind, static_cast<const uint16_t *>(w), d.h, r0, r1, buffer.data());
  return buffer.data();
}
}  // namespace

// inputs hidden (N, h), weight (V, h), targets (N) int32 (below 0: ignored); output (N, 2): each
// row's nll (0 where ignored) and the log-sum-exp of its logits = hidden · weightᵀ (one output: a
// second one, unused downstream, broke MindSpore's compile with shared layer graphs). Per vocabulary
// block: its rows' maximum and sum of exponentials, combined per row in block order afterwards.
extern "C" int mindtune_head_loss_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                          const char **dtypes, void *stream, void *extra) {
  if (nparam != 4) return 1;
  HeadDims d;
  if (int err = read_head(ndims, shapes, dtypes, &d)) return err;
  if (!mindtune::is_f32(dtypes[3])) return 23;
  if (ndims[3] != 2 || shapes[3][0] != d.n || shapes[3][1] != 2) return 33;
  const auto *hidden = static_cast<const float *>(params[0]);
  const auto *targets = static_cast<const int32_t *>(params[2]);
  auto *stats = static_cast<float *>(params[3]);  // (N, 2): nll, lse
  for (int64_t r = 0; r < d.n; ++r)
    if (targets[r] >= d.v) return 40;
  std::vector<float> block_max(d.blocks * d.n), block_sum(d.blocks * d.n), picked(d.n, 0.f);
  mindtune::parallel_for(d.blocks, [&](int64_t b) {
    const int64_t r0 = b * d.block, r1 = std::min(d.v, r0 + d.block), width = r1 - r0;
    std::vector<float> buffer, logits(d.n * width);
    const float *w = weight_rows(d, params[1], r0, r1, buffer);
    dnnl_sgemm('N', 'T', d.n, width, d.h, 1.f, hidden, d.h, w, d.h, 0.f, logits.data(), width);
    for (int64_t r = 0; r < d.n; ++r) {
      const float *row = logits.data() + r * width;
      float m = row[0];
      for (int64_t j = 1; j < width; ++j) m = std::max(m, row[j]);
      float sum = 0.f;
      for (int64_t j = 0; j < width; ++j) sum += std::exp(row[j] - m);
      block_max[b * d.n + r] = m;
      block_sum[b * d.n + r] = sum;
      const int32_t t = targets[r];
      if (t >= r0 && t < r1) picked[r] = row[t - r0];
    }
  });
  for (int64_t r = 0; r < d.n; ++r) {
    float m = block_max[r];
    for (int64_t b = 1; b < d.blocks; ++b) m = std::max(m, block_max[b * d.n + r]);
    float sum = 0.f;
    for (int64_t b = 0; b < d.blocks; ++b) sum += block_sum[b * d.n + r] * std::exp(block_max[b * d.n + r] - m);
    const float lse = m + std::log(sum);
    stats[2 * r] = targets[r] < 0 ? 0.f : lse - picked[r];
    stats[2 * r + 1] = lse;
  }
  return 0;
}

// inputs hidden (N, h), weight (V, h), targets (N), stats (N, 2) (the forward's output), dnll (N, 2)
// (its gradient; the log-sum-exp column's is ignored); output dhidden (N, h) =
// Σ_v (softmax − onehot)[·, v] · dnll · weight[v], the logits recomputed block by block. Fixed groups
// of blocks each sum into a partial dhidden; the partials are added in group order.
extern "C" int mindtune_head_loss_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                           const char **dtypes, void *stream, void *extra) {
  if (nparam != 6) return 1;
  HeadDims d;
  if (int err = read_head(ndims, shapes, dtypes, &d)) return err;
  for (int i = 3; i < 6; ++i)
    if (!mindtune::is_f32(dtypes[i])) return 20 + i;
  for (int i = 3; i < 5; ++i)
    if (ndims[i] != 2 || shapes[i][0] != d.n || shapes[i][1] != 2) return 33 + i;
  const auto *hidden = static_cast<const float *>(params[0]);
  const auto *targets = static_cast<const int32_t *>(params[2]);
  const auto *stats = static_cast<const float *>(params[3]);
  const auto *dstats = static_cast<const float *>(params[4]);
  auto *dhidden = static_cast<float *>(params[5]);
  const int64_t groups = std::min(kHeadGroups, d.blocks), size = d.n * d.h;
  std::vector<float> partial(groups * size);
  mindtune::parallel_for(groups, [&](int64_t g) {
    std::vector<float> buffer, grad;
    float *acc = partial.data() + g * size;
    const int64_t first = g * d.blocks / groups, last = (g + 1) * d.blocks / groups;
    for (int64_t b = first; b < last; ++b) {
      const int64_t r0 = b * d.block, r1 = std::min(d.v, r0 + d.block), width = r1 - r0;
      const float *w = weight_rows(d, params[1], r0, r1, buffer);
      grad.resize(d.n * width);
      dnnl_sgemm('N', 'T', d.n, width, d.h, 1.f, hidden, d.h, w, d.h, 0.f, grad.data(), width);
      for (int64_t r = 0; r < d.n; ++r) {
        float *row = grad.data() + r * width;
        const int32_t t = targets[r];
        if (t < 0) {
          std::fill(row, row + width, 0.f);
          continue;
        }
        const float scale = dstats[2 * r], lse = stats[2 * r + 1];
        for (int64_t j = 0; j < width; ++j) row[j] = std::exp(row[j] - lse) * scale;
        if (t >= r0 && t < r1) row[t - r0] -= scale;
      }
      dnnl_sgemm('N', 'N', d.n, d.h, width, 1.f, grad.data(), width, w, d.h, b == first ? 0.f : 1.f, acc, d.h);
    }
  });
  parallel_blocks(size, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      float sum = partial[e];
      for (int64_t g = 1; g < groups; ++g) sum += partial[g * size + e];
      dhidden[e] = sum;
    }
  });
  return 0;
}
