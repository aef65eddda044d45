// Fused cross-entropy for MindSpore's CPU: per row of logits, the negative log-likelihood of its
// target token, and its gradient,
//     nll = log Σ_j exp(x_j) − x_target        d nll / d x = softmax(x) − onehot(target)
// as two "aot" kernels of `mindspore.ops.Custom` (built with the other kernels into one library by
// core/fused.py). A target below 0 (the ignore index) gives nll 0 and a zero gradient.
//
// With a third input c (float32 (1,), Gemma 2's final-logit soft cap) the logits are capped first,
// x ← c·tanh(x/c), inside the kernel (no (rows, vocab) temporary), and the gradient is multiplied by
// 1 − tanh²(x/c); the log-sum-exp output is the capped logits'.
//
// Why: composed of MindSpore ops, the loss makes several (rows, vocab) tensors (log-softmax, a
// one-hot, softmax − one-hot, the gradient's broadcast weight) and passes over each; on the 25M
// model (batch 8 × 256, vocabulary 8192) each is 64 MiB. Here the forward reads the logits once
// and keeps one float per row (the log-sum-exp); the backward writes the gradient in one pass.
//
// Layouts: logits (..., V) float32 read as (n, V); targets (...) int32; cap (1) float32; nll, lse
// (...) float32.
//
// mindtune_token_entropy (no gradient: a figure GRPO logs, core/engine/grpo.py): each row's entropy of
// softmax(x), −Σ p·log p = log Σ exp(x − m) − Σ exp(x − m)·(x − m) / Σ exp(x − m), in one pass over the
// row after its maximum; 0 for a row whose target is ignored. The same optional cap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"

namespace {
using mindtune::is_f32;
using mindtune::parallel_blocks;
constexpr int64_t kRows = 16;  // rows per task

// rows n and vocabulary v of the logits (input 0), checked against the targets (input 1) and the
// dtypes of every parameter, and whether a cap (input 2) came: `expected` parameters without it,
// one more with it; 0 when they fit, else an error code
int read_dims(int nparam, int expected, int *ndims, int64_t **shapes, const char **dtypes, int64_t *n, int64_t *v,
              bool *capped) {
  *capped = nparam == expected + 1;
  if (!*capped && nparam != expected) return 1;
  if (*capped && (ndims[2] != 1 || shapes[2][0] != 1)) return 12;
  if (!is_f32(dtypes[0])) return 20;
  if (!mindtune::is_i32(dtypes[1])) return 21;
  for (int i = 2; i < nparam; ++i)
    if (!is_f32(dtypes[i])) return 20 + i;
  if (ndims[0] < 1 || ndims[1] != ndims[0] - 1) return 10;
  *v = shapes[0][ndims[0] - 1];
  *n = 1;
  for (int i = 0; i + 1 < ndims[0]; ++i) {
    if (shapes[1][i] != shapes[0][i]) return 30;
    *n *= shapes[0][i];
  }
  return *v > 0 ? 0 : 31;
}

// c·tanh(x/c) for a row of logits into `out` (the capped path's one row of scratch)
void cap_row(const float *x, int64_t v, float cap, float *out) {
  const float inv = 1.f / cap;
  for (int64_t j = 0; j < v; ++j) out[j] = cap * std::tanh(x[j] * inv);
}

// a row's log-sum-exp and its target's negative log-likelihood (0 for an ignored target)
void row_nll(const float *row, int64_t v, int32_t t, float *nll, float *lse) {
  float mx = row[0];
  for (int64_t j = 1; j < v; ++j) mx = std::max(mx, row[j]);
  float sum = 0.f;
  for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
  const float log_sum = std::log(sum);
  *lse = mx + log_sum;
  *nll = (t >= 0 && t < v) ? log_sum - (row[t] - mx) : 0.f;
}

// a row's entropy of softmax(row)
float row_entropy(const float *row, int64_t v) {
  float mx = row[0];
  for (int64_t j = 1; j < v; ++j) mx = std::max(mx, row[j]);
  float sum = 0.f, weighted = 0.f;
  for (int64_t j = 0; j < v; ++j) {
    const float y = row[j] - mx, e = std::exp(y);
    sum += e;
    weighted += e * y;
  }
  return std::log(sum) - weighted / sum;
}
}  // namespace

// inputs logits (..., V), targets (...) [, cap (1)]; output entropy (...)
extern "C" int mindtune_token_entropy(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                      void *stream, void *extra) {
  int64_t n, v;
  bool capped;
  if (int err = read_dims(nparam, 3, ndims, shapes, dtypes, &n, &v, &capped)) return err;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *target = static_cast<const int32_t *>(params[1]);
  const float cap = capped ? *static_cast<const float *>(params[2]) : 0.f;
  if (capped && !(cap > 0.f)) return 32;
  auto *entropy = static_cast<float *>(params[nparam - 1]);
  parallel_blocks(n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
    std::vector<float> row(capped ? v : 0);
    for (int64_t i = i0; i < i1; ++i) {
      if (target[i] < 0 || target[i] >= v) {
        entropy[i] = 0.f;
        continue;
      }
      if (capped) cap_row(x + i * v, v, cap, row.data());
      entropy[i] = row_entropy(capped ? row.data() : x + i * v, v);
    }
  });
  return 0;
}

// inputs logits (..., V), targets (...) [, cap (1)]; outputs nll (...), lse (...)
extern "C" int mindtune_cross_entropy_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                              const char **dtypes, void *stream, void *extra) {
  int64_t n, v;
  bool capped;
  if (int err = read_dims(nparam, 4, ndims, shapes, dtypes, &n, &v, &capped)) return err;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *target = static_cast<const int32_t *>(params[1]);
  const float cap = capped ? *static_cast<const float *>(params[2]) : 0.f;
  if (capped && !(cap > 0.f)) return 32;
  auto *nll = static_cast<float *>(params[nparam - 2]);
  auto *lse = static_cast<float *>(params[nparam - 1]);
  if (capped) {
    parallel_blocks(n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
      std::vector<float> row(v);
      for (int64_t i = i0; i < i1; ++i) {
        cap_row(x + i * v, v, cap, row.data());
        row_nll(row.data(), v, target[i], nll + i, lse + i);
      }
    });
    return 0;
  }
  parallel_blocks(n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) row_nll(x + i * v, v, target[i], nll + i, lse + i);
  });
  return 0;
}

// inputs logits, targets [, cap], lse, dnll; output dlogits (..., V)
extern "C" int mindtune_cross_entropy_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                               const char **dtypes, void *stream, void *extra) {
  int64_t n, v;
  bool capped;
  if (int err = read_dims(nparam, 5, ndims, shapes, dtypes, &n, &v, &capped)) return err;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *target = static_cast<const int32_t *>(params[1]);
  const float cap = capped ? *static_cast<const float *>(params[2]) : 0.f;
  if (capped && !(cap > 0.f)) return 32;
  const auto *lse = static_cast<const float *>(params[nparam - 3]);
  const auto *dnll = static_cast<const float *>(params[nparam - 2]);
  auto *dx = static_cast<float *>(params[nparam - 1]);
  parallel_blocks(n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float *row = x + i * v;
      float *drow = dx + i * v;
      const int32_t t = target[i];
      if (t < 0 || t >= v) {
        std::memset(drow, 0, sizeof(float) * v);
        continue;
      }
      const float g = dnll[i], l = lse[i];
      if (capped) {  // d/dx of c·tanh(x/c) = 1 − tanh²(x/c)
        const float inv = 1.f / cap;
        for (int64_t j = 0; j < v; ++j) drow[j] = std::tanh(row[j] * inv);  // two passes: both vectorise
        const float th_t = drow[t];
        for (int64_t j = 0; j < v; ++j) {
          const float th = drow[j];
          drow[j] = (std::exp(cap * th - l) * g) * (1.f - th * th);
        }
        drow[t] -= g * (1.f - th_t * th_t);
        continue;
      }
      for (int64_t j = 0; j < v; ++j) drow[j] = std::exp(row[j] - l) * g;
      drow[t] -= g;
    }
  });
  return 0;
}
