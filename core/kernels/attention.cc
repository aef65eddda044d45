// Fused causal attention for MindSpore's CPU: the forward and backward of
//     out = softmax(q·kᵀ/√d + mask) · v        (keys after a query's position never seen)
// as two "aot" kernels of `mindspore.ops.Custom` (see core/fused.py, which builds this file with
// g++ and links it against the oneDNN library MindSpore ships).
//
// Why: composed of MindSpore ops, attention makes (B, heads, T, S) score tensors and runs about ten
// passes over them per layer (mask add, softmax, its backward), and computes the masked half of a
// causal score matrix. Here every (batch, kv head) is one task: its score rows stay in the cache,
// blocks of 64 query rows only meet the keys they can see, and the matrix products are oneDNN's
// sgemm. The backward recomputes the probabilities from the saved log-sum-exp (FlashAttention's
// trick, so nothing of size T×S is kept between forward and backward) and takes the softmax's row
// sums from the outputs: Σ_j P_ij·dP_ij = dO_i·O_i.
//
// Rotary position embedding is applied here too (x·cos + rotate_half(x)·sin to q and k, its
// transpose to their gradients): composed, it cost a broadcast of the tables, slices, a concat and
// their gradients per layer. The rotated keys are an output (the KV cache stores them).
//
// Layouts (row-major float32): q (B, T, H, D); k, v (B, T, KV, D), as the projections produce
// them (a head's rows are strided: no transposes to (B, heads, T, D) in the graph, which cost time
// and MindSpore's Transpose kernel keeps 8 bytes of indices per element), with H a multiple of KV
// (query head h uses kv head h / (H/KV), as Hugging Face's repeat_kv); mask (MB, MH, T, T)
// additive, MB in {1, B}, MH in {1, H}; cos, sin (CB, 1, T, D), CB in {1, B}. A row whose visible
// keys are all masked (left padding) gets a uniform average of them; nothing downstream reads it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc);

namespace {
using mindtune::is_f32;
using mindtune::parallel_for;
constexpr int64_t kRowBlock = 64;

struct Dims {
  int64_t B, H, KV, T, S, D, MB, MH, CB;
};

// Checks the six inputs' ranks, shapes and dtypes; 0 when they fit the layout above.
int read_dims(int *ndims, int64_t **shapes, const char **dtypes, Dims *d) {
  for (int i = 0; i < 6; ++i)
    if (ndims[i] != 4) return 10 + i;
  for (int i = 0; i < 6; ++i)
    if (!is_f32(dtypes[i])) return 20 + i;
  d->B = shapes[0][0]; d->T = shapes[0][1]; d->H = shapes[0][2]; d->D = shapes[0][3];
  d->S = shapes[1][1]; d->KV = shapes[1][2]; d->MB = shapes[3][0]; d->MH = shapes[3][1];
  d->CB = shapes[4][0];
  if (d->KV <= 0 || d->H % d->KV != 0 || d->S != d->T || d->D % 2 != 0) return 30;
  for (int i = 1; i < 3; ++i)
    if (shapes[i][0] != d->B || shapes[i][1] != d->S || shapes[i][2] != d->KV || shapes[i][3] != d->D) return 31;
  if ((d->MB != 1 && d->MB != d->B) || (d->MH != 1 && d->MH != d->H) || shapes[3][2] != d->T || shapes[3][3] != d->S)
    return 32;
  for (int i = 4; i < 6; ++i)
    if ((shapes[i][0] != 1 && shapes[i][0] != d->B) || shapes[i][0] != d->CB || shapes[i][1] != 1 ||
        shapes[i][2] != d->T || shapes[i][3] != d->D)
      return 33;
  return 0;
}

// y = x·cos + rotate_half(x)·sin for `rows` rows of width d, rotate_half(x) = (−x₂, x₁); x's rows
// are xs floats apart, y's ys (a head's rows inside (B, T, heads, D) are heads·D apart).
void rotate(const float *x, int64_t xs, const float *cos, const float *sin, float *y, int64_t ys, int64_t rows,
            int64_t d) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < rows; ++i, x += xs, cos += d, sin += d, y += ys) {
    for (int64_t j = 0; j < half; ++j) y[j] = x[j] * cos[j] - x[j + half] * sin[j];
    for (int64_t j = half; j < d; ++j) y[j] = x[j] * cos[j] + x[j - half] * sin[j];
  }
}

// `rows` rows of width d between a strided head inside (B, T, heads, D) (rows `stride` floats apart)
// and a contiguous buffer
void gather_rows(const float *x, int64_t stride, float *y, int64_t rows, int64_t d) {
  for (int64_t i = 0; i < rows; ++i) std::memcpy(y + i * d, x + i * stride, sizeof(float) * d);
}

void scatter_rows(const float *x, float *y, int64_t stride, int64_t rows, int64_t d) {
  for (int64_t i = 0; i < rows; ++i) std::memcpy(y + i * stride, x + i * d, sizeof(float) * d);
}

// The transpose of `rotate` applied to a gradient: dx = dy·cos + rotate_halfᵀ(dy·sin),
// rotate_halfᵀ(z) = (z₂, −z₁).
void unrotate(const float *dy, int64_t dys, const float *cos, const float *sin, float *dx, int64_t dxs, int64_t rows,
              int64_t d) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < rows; ++i, dy += dys, cos += d, sin += d, dx += dxs) {
    for (int64_t j = 0; j < half; ++j) dx[j] = dy[j] * cos[j] + dy[j + half] * sin[j + half];
    for (int64_t j = half; j < d; ++j) dx[j] = dy[j] * cos[j] - dy[j - half] * sin[j - half];
  }
}

// What both kernels start from: the shapes, the four inputs, the head grouping and the scale.
struct Call {
  Dims d;
  const float *q, *k, *v, *mask, *cos, *sin;
  int64_t rep;  // query heads per kv head
  float scale;
};

int start_call(int nparam, int expected, void **params, int *ndims, int64_t **shapes, const char **dtypes, Call *c) {
  if (nparam != expected) return 1;
  if (int err = read_dims(ndims, shapes, dtypes, &c->d)) return err;
  c->q = static_cast<const float *>(params[0]);
  c->k = static_cast<const float *>(params[1]);
  c->v = static_cast<const float *>(params[2]);
  c->mask = static_cast<const float *>(params[3]);
  c->cos = static_cast<const float *>(params[4]);
  c->sin = static_cast<const float *>(params[5]);
  c->rep = c->d.H / c->d.KV;
  c->scale = 1.f / std::sqrt(static_cast<float>(c->d.D));
  return 0;
}

const float *mask_of(const Dims &d, const float *mask, int64_t b, int64_t h) {
  return mask + ((d.MB == 1 ? 0 : b) * d.MH + (d.MH == 1 ? 0 : h)) * d.T * d.S;
}

// Query rows [r0, r1) of one head against keys [0, c1), c1 = the block's causal limit: scaled,
// masked scores turned into probabilities in place (keys a row cannot see get 0). With
// `lse_in` the rows are normalised by the saved log-sum-exp; otherwise it is computed into `lse`.
void probabilities(const Dims &d, const float *q, const float *k, const float *mask, float *p,
                   const float *lse_in, float *lse, int64_t r0, int64_t r1, int64_t c1, float scale) {
  dnnl_sgemm('N', 'T', r1 - r0, c1, d.D, scale, q + r0 * d.D, d.D, k, d.D, 0.f, p + r0 * d.S, d.S);
  for (int64_t i = r0; i < r1; ++i) {
    float *row = p + i * d.S;
    const float *m = mask + i * d.S;
    const int64_t last = i + d.S - d.T;  // keys 0..last are visible to row i
    for (int64_t j = 0; j <= last; ++j) row[j] += m[j];
    if (lse_in != nullptr) {
      const float l = lse_in[i];
      for (int64_t j = 0; j <= last; ++j) row[j] = std::exp(row[j] - l);
    } else {
      float mx = row[0];
      for (int64_t j = 1; j <= last; ++j) mx = std::max(mx, row[j]);
      float sum = 0.f;
      for (int64_t j = 0; j <= last; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const float inv = 1.f / sum;
      for (int64_t j = 0; j <= last; ++j) row[j] *= inv;
      lse[i] = mx + std::log(sum);
    }
    for (int64_t j = last + 1; j < c1; ++j) row[j] = 0.f;
  }
}
}  // namespace

// inputs q, k, v, mask, cos, sin; outputs out (B, T, H, D), lse (B, H, T), rotated k (B, T, KV, D)
extern "C" int mindtune_attention_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                          const char **dtypes, void *stream, void *extra) {
  Call c;
  if (int err = start_call(nparam, 9, params, ndims, shapes, dtypes, &c)) return err;
  const Dims &d = c.d;
  auto *O = static_cast<float *>(params[6]);
  auto *L = static_cast<float *>(params[7]);
  auto *KR = static_cast<float *>(params[8]);
  const int64_t qs = d.H * d.D, ks = d.KV * d.D;  // row strides of q / out and of k / v
  parallel_for(d.B * d.KV, [&](int64_t task) {
    const int64_t b = task / d.KV, g = task % d.KV;
    std::vector<float> p(d.T * d.S), q(d.T * d.D), k(d.S * d.D), v(d.S * d.D), o(kRowBlock * d.D);
    const int64_t kv = b * d.S * ks + g * d.D, rope = (d.CB == 1 ? 0 : b) * d.T * d.D;
    rotate(c.k + kv, ks, c.cos + rope, c.sin + rope, k.data(), d.D, d.S, d.D);
    gather_rows(c.v + kv, ks, v.data(), d.S, d.D);  // the strided head made contiguous for sgemm
    scatter_rows(k.data(), KR + kv, ks, d.S, d.D);
    for (int64_t r = 0; r < c.rep; ++r) {
      const int64_t h = g * c.rep + r, qo = b * d.T * qs + h * d.D;
      float *lse = L + (b * d.H + h) * d.T;
      rotate(c.q + qo, qs, c.cos + rope, c.sin + rope, q.data(), d.D, d.T, d.D);
      for (int64_t r0 = 0; r0 < d.T; r0 += kRowBlock) {
        const int64_t r1 = std::min(d.T, r0 + kRowBlock), c1 = r1 + d.S - d.T;
        probabilities(d, q.data(), k.data(), mask_of(d, c.mask, b, h), p.data(), nullptr, lse, r0, r1, c1, c.scale);
        dnnl_sgemm('N', 'N', r1 - r0, d.D, c1, 1.f, p.data() + r0 * d.S, d.S, v.data(), d.D, 0.f, o.data(), d.D);
        scatter_rows(o.data(), O + qo + r0 * qs, qs, r1 - r0, d.D);
      }
    }
  });
  return 0;
}

// inputs q, k, v, mask, cos, sin, out, lse, dout, drotated_k; outputs dq (B, T, H, D), dk, dv
// (B, T, KV, D), the gradients of the unrotated q and k
extern "C" int mindtune_attention_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                           const char **dtypes, void *stream, void *extra) {
  Call c;
  if (int err = start_call(nparam, 13, params, ndims, shapes, dtypes, &c)) return err;
  const Dims &d = c.d;
  const auto *O = static_cast<const float *>(params[6]);
  const auto *L = static_cast<const float *>(params[7]);
  const auto *DO = static_cast<const float *>(params[8]);
  const auto *DKR = static_cast<const float *>(params[9]);
  auto *DQ = static_cast<float *>(params[10]);
  auto *DK = static_cast<float *>(params[11]);
  auto *DV = static_cast<float *>(params[12]);
  const int64_t qs = d.H * d.D, ks = d.KV * d.D;  // row strides of q / out and of k / v
  parallel_for(d.B * d.KV, [&](int64_t task) {  // a task owns its kv head's dk, dv: no races
    const int64_t b = task / d.KV, g = task % d.KV;
    std::vector<float> p(d.T * d.S), ds(d.T * d.S), q(d.T * d.D), k(d.S * d.D), v(d.S * d.D), dq(d.T * d.D),
        dk(d.S * d.D), dv(d.S * d.D, 0.f), dout(d.T * d.D);
    const int64_t kv = b * d.S * ks + g * d.D, rope = (d.CB == 1 ? 0 : b) * d.T * d.D;
    const float *cos = c.cos + rope, *sin = c.sin + rope;
    rotate(c.k + kv, ks, cos, sin, k.data(), d.D, d.S, d.D);
    gather_rows(c.v + kv, ks, v.data(), d.S, d.D);
    gather_rows(DKR + kv, ks, dk.data(), d.S, d.D);  // the rotated keys' own gradient, if any
    for (int64_t r = 0; r < c.rep; ++r) {
      const int64_t h = g * c.rep + r, qo = b * d.T * qs + h * d.D;
      const float *o = O + qo, *lse = L + (b * d.H + h) * d.T;
      rotate(c.q + qo, qs, cos, sin, q.data(), d.D, d.T, d.D);
      gather_rows(DO + qo, qs, dout.data(), d.T, d.D);
      for (int64_t r0 = 0; r0 < d.T; r0 += kRowBlock) {
        const int64_t r1 = std::min(d.T, r0 + kRowBlock), c1 = r1 + d.S - d.T, rows = r1 - r0;
        probabilities(d, q.data(), k.data(), mask_of(d, c.mask, b, h), p.data(), lse, nullptr, r0, r1, c1, c.scale);
        float *pb = p.data() + r0 * d.S, *db = ds.data() + r0 * d.S;
        dnnl_sgemm('T', 'N', c1, d.D, rows, 1.f, pb, d.S, dout.data() + r0 * d.D, d.D, 1.f, dv.data(), d.D);  // dV += Pᵀ·dO
        dnnl_sgemm('N', 'T', rows, c1, d.D, 1.f, dout.data() + r0 * d.D, d.D, v.data(), d.D, 0.f, db, d.S);   // dP = dO·Vᵀ
        for (int64_t i = 0; i < rows; ++i) {  // dS = P ∘ (dP − dO_i·O_i)
          const float *oi = o + (r0 + i) * qs, *doi = dout.data() + (r0 + i) * d.D;
          float dot = 0.f;
          for (int64_t x = 0; x < d.D; ++x) dot += oi[x] * doi[x];
          const float *prow = pb + i * d.S;
          float *drow = db + i * d.S;
          for (int64_t j = 0; j < c1; ++j) drow[j] = prow[j] * (drow[j] - dot);
        }
        dnnl_sgemm('N', 'N', rows, d.D, c1, c.scale, db, d.S, k.data(), d.D, 0.f, dq.data() + r0 * d.D, d.D);  // dQ = s·dS·K
        dnnl_sgemm('T', 'N', c1, d.D, rows, c.scale, db, d.S, q.data() + r0 * d.D, d.D, 1.f, dk.data(), d.D);  // dK += s·dSᵀ·Q
      }
      unrotate(dq.data(), d.D, cos, sin, DQ + qo, qs, d.T, d.D);
    }
    unrotate(dk.data(), d.D, cos, sin, DK + kv, ks, d.S, d.D);
    scatter_rows(dv.data(), DV + kv, ks, d.S, d.D);
  });
  return 0;
}
