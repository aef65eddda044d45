// Fused causal attention for MindSpore's CPU: the forward and backward of
//     out = softmax(cap(q·kᵀ·scale) + mask) · v      (keys after a query's position never seen)
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
// Rotary position embedding is applied here too (x·cos + rotate(x)·sin to q and k, its transpose
// to their gradients): composed, it cost a broadcast of the tables, slices, a concat and their
// gradients per layer. The rotated keys are an output (the KV cache stores them).
//
// Options (a float32 vector, core/fused.py's FusedAttention writes it; 0 = off / the default):
//   [0] scale      the scores' factor (Gemma: query_pre_attn_scalar^-½); 0: 1/√D
//   [1] softcap    c: scores ← c·tanh(s/c) before the mask (Gemma 2); the backward multiplies by
//                  1 − tanh²
//   [2] window     w: key j visible to query i iff 0 ≤ i − j < w (sliding window: Mistral, Gemma);
//                  a block of queries only meets the keys its rows can see, so the cost is ∝ T·w
//   [3] rotary_dim R: RoPE on the first R dims of each head, the rest passed through (GLM-4,
//                  Phi-3); 0: D. The tables are R wide.
//   [4] style      0: "half", pairs (j, j + R/2) (Llama's rotate_half); 1: "interleaved", pairs
//                  (2i, 2i+1) rotated by the tables' angle i (GLM-4: its cos[..., :R/2]
//                  repeat-interleaved), from the same (…, R) tables [θ₀..θ_{R/2−1}, θ₀..θ_{R/2−1}]
// With a segment-ids input (int32 (B, T), sequence packing) query i sees key j only when
// seg[i] = seg[j]: a block-diagonal causal mask; key blocks that share no segment with a query
// block are skipped. Positions restart per sample through per-row tables (CB = B).
//
// Layouts (row-major float32): q (B, T, H, D); k, v (B, T, KV, D), as the projections produce
// them (a head's rows are strided: no transposes to (B, heads, T, D) in the graph, which cost time
// and MindSpore's Transpose kernel keeps 8 bytes of indices per element), with H a multiple of KV
// (query head h uses kv head h / (H/KV), as Hugging Face's repeat_kv); mask (MB, MH, MT, T)
// additive, MB in {1, B}, MH in {1, H}, MT in {1, T} (1: one row of key offsets for every query,
// e.g. key padding only); cos, sin (CB, 1, T, R), CB in {1, B}. A row whose visible keys are all
// masked (left padding) gets a uniform average of them; nothing downstream reads it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "common.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc);

namespace {
using mindtune::is_f32;
using mindtune::parallel_for;
constexpr int64_t kRowBlock = 64;
constexpr int64_t kOptions = 5;
constexpr float kHidden = -3.4028234663852886e38f;  // float32's minimum: a key another segment owns

struct Dims {
  int64_t B, H, KV, T, S, D, MB, MH, MT, CB, R;
};

struct Options {
  float scale, softcap;
  int64_t window;  // 0: every earlier key
  bool interleaved;
};

// Checks the inputs' ranks, shapes and dtypes (q, k, v, mask, cos, sin, options and, with
// `segments`, the segment ids); 0 when they fit the layout above.
int read_dims(int *ndims, int64_t **shapes, const char **dtypes, void **params, bool segments, Dims *d, Options *o) {
  for (int i = 0; i < 6; ++i)
    if (ndims[i] != 4) return 10 + i;
  if (ndims[6] != 1 || shapes[6][0] < kOptions) return 16;
  for (int i = 0; i < 7; ++i)
    if (!is_f32(dtypes[i])) return 20 + i;
  d->B = shapes[0][0]; d->T = shapes[0][1]; d->H = shapes[0][2]; d->D = shapes[0][3];
  d->S = shapes[1][1]; d->KV = shapes[1][2]; d->MB = shapes[3][0]; d->MH = shapes[3][1]; d->MT = shapes[3][2];
  d->CB = shapes[4][0]; d->R = shapes[4][3];
  const float *opt = static_cast<const float *>(params[6]);
  o->scale = opt[0];
  o->softcap = opt[1];
  o->window = static_cast<int64_t>(opt[2]);
  const int64_t rotary = static_cast<int64_t>(opt[3]);
  o->interleaved = opt[4] != 0.f;
  if (d->KV <= 0 || d->H % d->KV != 0 || d->S != d->T) return 30;
  for (int i = 1; i < 3; ++i)
    if (shapes[i][0] != d->B || shapes[i][1] != d->S || shapes[i][2] != d->KV || shapes[i][3] != d->D) return 31;
  if ((d->MB != 1 && d->MB != d->B) || (d->MH != 1 && d->MH != d->H) || (d->MT != 1 && d->MT != d->T) ||
      shapes[3][3] != d->S)
    return 32;
  for (int i = 4; i < 6; ++i)
    if ((shapes[i][0] != 1 && shapes[i][0] != d->B) || shapes[i][0] != d->CB || shapes[i][1] != 1 ||
        shapes[i][2] != d->T || shapes[i][3] != d->R)
      return 33;
  if (d->R % 2 != 0 || d->R <= 0 || d->R > d->D || d->R != (rotary == 0 ? d->D : rotary)) return 34;
  if (o->window < 0 || o->softcap < 0.f || o->scale < 0.f) return 35;
  if (segments) {
    if (ndims[7] != 2 || shapes[7][0] != d->B || shapes[7][1] != d->T) return 17;
    if (!mindtune::is_i32(dtypes[7])) return 27;
  }
  return 0;
}

// y = x·cos + rotate(x)·sin on the first r dims of `rows` rows of width d, the rest copied; "half":
// rotate(x) = (−x₂, x₁) over the halves of the r dims, "interleaved": (−x_{2i+1}, x_{2i}) per pair,
// with the pair's angle from the table's first r/2 entries. x's rows are xs floats apart, y's ys
// (a head's rows inside (B, T, heads, D) are heads·D apart); the tables' rows are r wide.
void rotate(const float *x, int64_t xs, const float *cos, const float *sin, float *y, int64_t ys, int64_t rows,
            int64_t d, int64_t r, bool interleaved) {
  const int64_t half = r / 2;
  for (int64_t i = 0; i < rows; ++i, x += xs, cos += r, sin += r, y += ys) {
    if (interleaved) {
      for (int64_t j = 0; j < half; ++j) {
        y[2 * j] = x[2 * j] * cos[j] - x[2 * j + 1] * sin[j];
        y[2 * j + 1] = x[2 * j + 1] * cos[j] + x[2 * j] * sin[j];
      }
    } else {
      for (int64_t j = 0; j < half; ++j) y[j] = x[j] * cos[j] - x[j + half] * sin[j];
      for (int64_t j = half; j < r; ++j) y[j] = x[j] * cos[j] + x[j - half] * sin[j];
    }
    for (int64_t j = r; j < d; ++j) y[j] = x[j];
  }
}

// The transpose of `rotate` applied to a gradient: "half" dx = dy·cos + rotate_halfᵀ(dy·sin),
// rotate_halfᵀ(z) = (z₂, −z₁); "interleaved" per pair (dy₀c + dy₁s, dy₁c − dy₀s); the rest copied.
void unrotate(const float *dy, int64_t dys, const float *cos, const float *sin, float *dx, int64_t dxs, int64_t rows,
              int64_t d, int64_t r, bool interleaved) {
  const int64_t half = r / 2;
  for (int64_t i = 0; i < rows; ++i, dy += dys, cos += r, sin += r, dx += dxs) {
    if (interleaved) {
      for (int64_t j = 0; j < half; ++j) {
        dx[2 * j] = dy[2 * j] * cos[j] + dy[2 * j + 1] * sin[j];
        dx[2 * j + 1] = dy[2 * j + 1] * cos[j] - dy[2 * j] * sin[j];
      }
    } else {
      for (int64_t j = 0; j < half; ++j) dx[j] = dy[j] * cos[j] + dy[j + half] * sin[j + half];
      for (int64_t j = half; j < r; ++j) dx[j] = dy[j] * cos[j] - dy[j - half] * sin[j - half];
    }
    for (int64_t j = r; j < d; ++j) dx[j] = dy[j];
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

// What both kernels start from: the shapes, the options, the inputs, the head grouping and scale.
struct Call {
  Dims d;
  Options o;
  const float *q, *k, *v, *mask, *cos, *sin;
  const int32_t *seg;  // nullptr: no packing
  int64_t rep;         // query heads per kv head
  float scale;
};

int start_call(int nparam, int outputs, void **params, int *ndims, int64_t **shapes, const char **dtypes, Call *c) {
  // inputs q, k, v, mask, cos, sin, options [, segment ids], then `outputs` more
  const bool segments = nparam == 8 + outputs;
  if (!segments && nparam != 7 + outputs) return 1;
  if (int err = read_dims(ndims, shapes, dtypes, params, segments, &c->d, &c->o)) return err;
  c->q = static_cast<const float *>(params[0]);
  c->k = static_cast<const float *>(params[1]);
  c->v = static_cast<const float *>(params[2]);
  c->mask = static_cast<const float *>(params[3]);
  c->cos = static_cast<const float *>(params[4]);
  c->sin = static_cast<const float *>(params[5]);
  c->seg = segments ? static_cast<const int32_t *>(params[7]) : nullptr;
  c->rep = c->d.H / c->d.KV;
  c->scale = c->o.scale > 0.f ? c->o.scale : 1.f / std::sqrt(static_cast<float>(c->d.D));
  return 0;
}

const float *mask_of(const Dims &d, const float *mask, int64_t b, int64_t h) {
  return mask + ((d.MB == 1 ? 0 : b) * d.MH + (d.MH == 1 ? 0 : h)) * d.MT * d.S;
}

// Which keys each query row of one batch row can see: keys lo[i]..i (causal, the window, the
// start of the row's segment), and with packing only those of the row's own segment; `spread`:
// the segment is not one contiguous run, so each key in that range is checked.
struct Visible {
  std::vector<int64_t> lo;
  std::vector<char> spread;
  const int32_t *seg = nullptr;

  Visible(const Call &c, int64_t b) : lo(c.d.T, 0), spread(c.d.T, 0) {
    const int64_t t = c.d.T, w = c.o.window;
    if (w > 0)
      for (int64_t i = 0; i < t; ++i) lo[i] = std::max<int64_t>(0, i - w + 1);
    if (c.seg == nullptr) return;
    seg = c.seg + b * t;
    std::unordered_map<int32_t, int64_t> first;  // a segment's first position
    int64_t run = 0;                             // where the current run of equal ids started
    for (int64_t i = 0; i < t; ++i) {
      if (i > 0 && seg[i] != seg[i - 1]) run = i;
      const int64_t start = first.emplace(seg[i], i).first->second;
      spread[i] = start != run && lo[i] < run;
      lo[i] = std::max(lo[i], start);
    }
  }

  int64_t block_start(int64_t r0, int64_t r1) const { return *std::min_element(lo.begin() + r0, lo.begin() + r1); }
};

// Query rows [r0, r1) of one head against keys [c0, c1) (c0: the earliest key a row of the block
// sees, c1: the block's causal limit): scaled, capped, masked scores turned into probabilities in
// place, in p's rows (row i at p + (i − r0)·S, key j at column j); keys a row cannot see get 0.
// With `lse_in` the rows are normalised by the saved log-sum-exp; otherwise it is computed into
// `lse`. With `dcap` (the backward of a soft-capped call) it gets 1 − tanh²(s/c) in the same layout.
void probabilities(const Call &c, const Visible &vis, const float *q, const float *k, const float *mask, float *p,
                   float *dcap, const float *lse_in, float *lse, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const Dims &d = c.d;
  dnnl_sgemm('N', 'T', r1 - r0, c1 - c0, d.D, c.scale, q + r0 * d.D, d.D, k + c0 * d.D, d.D, 0.f, p + c0, d.S);
  const float cap = c.o.softcap, inv_cap = cap > 0.f ? 1.f / cap : 0.f;
  for (int64_t i = r0; i < r1; ++i) {
    float *row = p + (i - r0) * d.S;
    const float *m = mask + (d.MT == 1 ? 0 : i * d.S);
    const int64_t first = vis.lo[i], last = i + d.S - d.T;  // keys first..last are visible to row i
    for (int64_t j = c0; j < first; ++j) row[j] = 0.f;
    if (cap > 0.f) {
      float *dc = dcap == nullptr ? nullptr : dcap + (i - r0) * d.S;
      for (int64_t j = first; j <= last; ++j) {
        const float th = std::tanh(row[j] * inv_cap);
        row[j] = cap * th;
        if (dc != nullptr) dc[j] = 1.f - th * th;
      }
      if (dc != nullptr) {
        for (int64_t j = c0; j < first; ++j) dc[j] = 0.f;
        for (int64_t j = last + 1; j < c1; ++j) dc[j] = 0.f;
      }
    }
    for (int64_t j = first; j <= last; ++j) row[j] += m[j];
    if (vis.spread[i]) {
      const int32_t own = vis.seg[i];
      for (int64_t j = first; j <= last; ++j)
        if (vis.seg[j] != own) row[j] = kHidden;
    }
    if (lse_in != nullptr) {
      const float l = lse_in[i];
      for (int64_t j = first; j <= last; ++j) row[j] = std::exp(row[j] - l);
    } else {
      float mx = row[first];
      for (int64_t j = first + 1; j <= last; ++j) mx = std::max(mx, row[j]);
      float sum = 0.f;
      for (int64_t j = first; j <= last; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const float inv = 1.f / sum;
      for (int64_t j = first; j <= last; ++j) row[j] *= inv;
      lse[i] = mx + std::log(sum);
    }
    for (int64_t j = last + 1; j < c1; ++j) row[j] = 0.f;
  }
}
}  // namespace

// inputs q, k, v, mask, cos, sin, options [, segment ids]; outputs out (B, T, H, D), lse (B, H, T),
// rotated k (B, T, KV, D)
extern "C" int mindtune_attention_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                          const char **dtypes, void *stream, void *extra) {
  Call c;
  if (int err = start_call(nparam, 3, params, ndims, shapes, dtypes, &c)) return err;
  const Dims &d = c.d;
  auto *O = static_cast<float *>(params[nparam - 3]);
  auto *L = static_cast<float *>(params[nparam - 2]);
  auto *KR = static_cast<float *>(params[nparam - 1]);
  const int64_t qs = d.H * d.D, ks = d.KV * d.D;  // row strides of q / out and of k / v
  parallel_for(d.B * d.KV, [&](int64_t task) {
    const int64_t b = task / d.KV, g = task % d.KV;
    const Visible vis(c, b);
    std::vector<float> p(kRowBlock * d.S), q(d.T * d.D), k(d.S * d.D), v(d.S * d.D), o(kRowBlock * d.D);
    const int64_t kv = b * d.S * ks + g * d.D, rope = (d.CB == 1 ? 0 : b) * d.T * d.R;
    rotate(c.k + kv, ks, c.cos + rope, c.sin + rope, k.data(), d.D, d.S, d.D, d.R, c.o.interleaved);
    gather_rows(c.v + kv, ks, v.data(), d.S, d.D);  // the strided head made contiguous for sgemm
    scatter_rows(k.data(), KR + kv, ks, d.S, d.D);
    for (int64_t r = 0; r < c.rep; ++r) {
      const int64_t h = g * c.rep + r, qo = b * d.T * qs + h * d.D;
      float *lse = L + (b * d.H + h) * d.T;
      rotate(c.q + qo, qs, c.cos + rope, c.sin + rope, q.data(), d.D, d.T, d.D, d.R, c.o.interleaved);
      for (int64_t r0 = 0; r0 < d.T; r0 += kRowBlock) {
        const int64_t r1 = std::min(d.T, r0 + kRowBlock), c1 = r1 + d.S - d.T, c0 = vis.block_start(r0, r1);
        probabilities(c, vis, q.data(), k.data(), mask_of(d, c.mask, b, h), p.data(), nullptr, nullptr, lse, r0, r1,
                      c0, c1);
        dnnl_sgemm('N', 'N', r1 - r0, d.D, c1 - c0, 1.f, p.data() + c0, d.S, v.data() + c0 * d.D, d.D, 0.f, o.data(),
                   d.D);
        scatter_rows(o.data(), O + qo + r0 * qs, qs, r1 - r0, d.D);
      }
    }
  });
  return 0;
}

// inputs q, k, v, mask, cos, sin, options [, segment ids], out, lse, dout, drotated_k; outputs
// dq (B, T, H, D), dk, dv (B, T, KV, D), the gradients of the unrotated q and k
extern "C" int mindtune_attention_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                           const char **dtypes, void *stream, void *extra) {
  Call c;
  if (int err = start_call(nparam, 7, params, ndims, shapes, dtypes, &c)) return err;
  const Dims &d = c.d;
  const int at = nparam - 7;  // where out, lse, dout, drotated_k, dq, dk, dv start
  const auto *O = static_cast<const float *>(params[at]);
  const auto *L = static_cast<const float *>(params[at + 1]);
  const auto *DO = static_cast<const float *>(params[at + 2]);
  const auto *DKR = static_cast<const float *>(params[at + 3]);
  auto *DQ = static_cast<float *>(params[at + 4]);
  auto *DK = static_cast<float *>(params[at + 5]);
  auto *DV = static_cast<float *>(params[at + 6]);
  const int64_t qs = d.H * d.D, ks = d.KV * d.D;  // row strides of q / out and of k / v
  const bool capped = c.o.softcap > 0.f;
  parallel_for(d.B * d.KV, [&](int64_t task) {  // a task owns its kv head's dk, dv: no races
    const int64_t b = task / d.KV, g = task % d.KV;
    const Visible vis(c, b);
    std::vector<float> p(kRowBlock * d.S), ds(kRowBlock * d.S), dcap(capped ? kRowBlock * d.S : 0), q(d.T * d.D),
        k(d.S * d.D), v(d.S * d.D), dq(d.T * d.D), dk(d.S * d.D), dv(d.S * d.D, 0.f), dout(d.T * d.D);
    const int64_t kv = b * d.S * ks + g * d.D, rope = (d.CB == 1 ? 0 : b) * d.T * d.R;
    const float *cos = c.cos + rope, *sin = c.sin + rope;
    rotate(c.k + kv, ks, cos, sin, k.data(), d.D, d.S, d.D, d.R, c.o.interleaved);
    gather_rows(c.v + kv, ks, v.data(), d.S, d.D);
    gather_rows(DKR + kv, ks, dk.data(), d.S, d.D);  // the rotated keys' own gradient, if any
    for (int64_t r = 0; r < c.rep; ++r) {
      const int64_t h = g * c.rep + r, qo = b * d.T * qs + h * d.D;
      const float *o = O + qo, *lse = L + (b * d.H + h) * d.T;
      rotate(c.q + qo, qs, cos, sin, q.data(), d.D, d.T, d.D, d.R, c.o.interleaved);
      gather_rows(DO + qo, qs, dout.data(), d.T, d.D);
      for (int64_t r0 = 0; r0 < d.T; r0 += kRowBlock) {
        const int64_t r1 = std::min(d.T, r0 + kRowBlock), c1 = r1 + d.S - d.T, rows = r1 - r0;
        const int64_t c0 = vis.block_start(r0, r1), cols = c1 - c0;
        probabilities(c, vis, q.data(), k.data(), mask_of(d, c.mask, b, h), p.data(), capped ? dcap.data() : nullptr,
                      lse, nullptr, r0, r1, c0, c1);
        float *pb = p.data() + c0, *db = ds.data() + c0;
        const float *kb = k.data() + c0 * d.D, *vb = v.data() + c0 * d.D;
        dnnl_sgemm('T', 'N', cols, d.D, rows, 1.f, pb, d.S, dout.data() + r0 * d.D, d.D, 1.f, dv.data() + c0 * d.D,
                   d.D);                                                                                   // dV += Pᵀ·dO
        dnnl_sgemm('N', 'T', rows, cols, d.D, 1.f, dout.data() + r0 * d.D, d.D, vb, d.D, 0.f, db, d.S);  // dP = dO·Vᵀ
        for (int64_t i = 0; i < rows; ++i) {  // dS = P ∘ (dP − dO_i·O_i), through the cap: ∘ (1 − tanh²)
          const float *oi = o + (r0 + i) * qs, *doi = dout.data() + (r0 + i) * d.D;
          float dot = 0.f;
          for (int64_t x = 0; x < d.D; ++x) dot += oi[x] * doi[x];
          const float *prow = pb + i * d.S;
          float *drow = db + i * d.S;
          for (int64_t j = 0; j < cols; ++j) drow[j] = prow[j] * (drow[j] - dot);
          if (capped) {
            const float *crow = dcap.data() + c0 + i * d.S;
            for (int64_t j = 0; j < cols; ++j) drow[j] *= crow[j];
          }
        }
        dnnl_sgemm('N', 'N', rows, d.D, cols, c.scale, db, d.S, kb, d.D, 0.f, dq.data() + r0 * d.D, d.D);  // dQ = s·dS·K
        dnnl_sgemm('T', 'N', cols, d.D, rows, c.scale, db, d.S, q.data() + r0 * d.D, d.D, 1.f, dk.data() + c0 * d.D,
                   d.D);  // dK += s·dSᵀ·Q
      }
      unrotate(dq.data(), d.D, cos, sin, DQ + qo, qs, d.T, d.D, d.R, c.o.interleaved);
    }
    unrotate(dk.data(), d.D, cos, sin, DK + kv, ks, d.S, d.D, d.R, c.o.interleaved);
    scatter_rows(dv.data(), DV + kv, ks, d.S, d.D);
  });
  return 0;
}
