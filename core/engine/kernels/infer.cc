// A decoder's whole inference forward in one "aot" kernel of `mindspore.ops.Custom` (core/engine/fused.py,
// FusedInference): the embedding, every layer (RMSNorm, q/k/v projections with their biases, RoPE, the
// key/value cache, causal attention over the valid cache slots, the output projection, RMSNorm and the
// SwiGLU MLP, both residuals), the final norm and the LM head, for the new tokens of each row: float32
// logits. A prompt's prefill runs MindSpore's composed forward and its keys and values are copied in
// (mindtune_infer_cache_fill); decoding steps and the continuations of lm-eval's choices run here.
//
// Why: an evaluation (lm-eval's log-likelihoods, a generation's decoding steps) runs the model op by op
// in PyNative, where each of a layer's ~25 MindSpore ops costs 0.1-0.4 ms to launch on the CPU: a
// decoding step of the 4-layer demo model was ~250 launches (30-50 ms) for ~50 MFLOP of arithmetic.
// Here a forward is one launch; its products are oneDNN's sgemm, as MindSpore's MatMul's are.
//
// Only the plain pre-norm decoder (Llama, Mistral, Qwen2's biases): fused.inference_problem says why
// another model keeps the composed ops. The cache lives here, between calls, in a table of caches made
// and freed through mindtune_infer_cache_new/_free (ctypes; dlopen gives MindSpore and ctypes the same
// library), so a decoding step copies nothing but the new keys and values.
//
// Inputs (row-major): ids (B, T) int32; positions (B, T) int32 (RoPE); valid (B, S) float32, 1 for a
// cache slot that holds a real token (S: the cache's slots, or T without one); meta (2,) int32: the
// cache's handle (0: none, S = T) and the slot of the first new token; inv_freq (D/2) float32;
// scalars (5) float32: RMSNorm's eps, the attention scale, RoPE's attention factor, 1 when the norms
// scale by (1 + w), the final logits' soft cap (0: none); the embedding (V, h), the final norm (h), the
// LM head (V, h) (the embedding again when tied); then per layer 12 tensors: input norm (h), wq (H·D, h),
// wk (KV·D, h), wv (KV·D, h), bq (H·D), bk (KV·D), bv (KV·D) (zeros without biases), wo (h, H·D),
// post-attention norm (h), w_gate (I, h), w_up (I, h), w_down (h, I).
// Output: logits (B, T', V), T' = T, or 1 for each row's last new token.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc);

// the fused attention's forward (attention.cc): a prefill's causal attention and RoPE in one sgemm-based pass
extern "C" int mindtune_attention_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                          void *stream, void *extra);

namespace {
using mindtune::is_f32;
using mindtune::is_i32;
using mindtune::parallel_for;

constexpr int kFixed = 9;     // inputs before the layers'
constexpr int kPerLayer = 12;

struct Cache {
  int64_t layers, batch, kv_heads, slots, dim;
  std::vector<float> k, v;  // (L, B, KV, S, D)
};

std::mutex g_lock;
std::map<int32_t, std::unique_ptr<Cache>> g_caches;
int32_t g_next = 1;

Cache *find_cache(int32_t handle) {
  std::lock_guard<std::mutex> guard(g_lock);
  auto it = g_caches.find(handle);
  return it == g_caches.end() ? nullptr : it->second.get();
}

// y (n, out) = x (n, in) · wᵀ (w: (out, in)) + bias. oneDNN's sgemm as MindSpore ships it runs on the
// calling thread: a large product is split into blocks of kRowBlock rows of x, one sgemm each, in
// parallel (a row's sums do not depend on the blocks, nor on the thread count)
constexpr int64_t kRowBlock = 128;
// up to this many rows (a decoding step's batch) a product is dot products over the weight's rows: the
// sgemm packs the whole weight for each call, which cost more than the arithmetic (a demo decoding step
// 3.5 ms in the kernel)
constexpr int64_t kFewRows = 16;
constexpr int64_t kColumnBlock = 256;  // weight rows per task of such a product
constexpr int64_t kSgemmColumns = 128;  // weight rows per sgemm of a product of kFewRows..kRowBlock rows
// fewer query rows than this per (row, kv head): attention by dot products, not two sgemm calls
constexpr int64_t kFewQueries = 4;
void linear(const float *x, const float *w, const float *bias, int64_t n, int64_t in, int64_t out, float *y) {
  if (n <= kFewRows) {  // a decoding step: each weight row read once for every x row, no packing
    auto columns = [&](int64_t, int64_t c0, int64_t c1) {
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4) {  // four weight rows at a time share each load of x
        const float *w0 = w + c * in, *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
        for (int64_t r = 0; r < n; ++r) {
          const float *xr = x + r * in;
          float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
          for (int64_t k = 0; k < in; ++k) {
            const float xv = xr[k];
            s0 += xv * w0[k];
            s1 += xv * w1[k];
            s2 += xv * w2[k];
            s3 += xv * w3[k];
          }
          float *yr = y + r * out + c;
          yr[0] = s0, yr[1] = s1, yr[2] = s2, yr[3] = s3;
        }
      }
      for (; c < c1; ++c) {
        const float *wc = w + c * in;
        for (int64_t r = 0; r < n; ++r) {
          const float *xr = x + r * in;
          float sum = 0.f;
          for (int64_t k = 0; k < in; ++k) sum += xr[k] * wc[k];
          y[r * out + c] = sum;
        }
      }
      if (bias != nullptr)
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = c0; j < c1; ++j) y[r * out + j] += bias[j];
    };
    // a large model's weights in column blocks across threads (its step streams them all); a small
    // one's on the calling thread
    mindtune::blocks_maybe_parallel(n * in * out > (int64_t(1) << 23), out, kColumnBlock, columns);
    return;
  }
  if (n <= kRowBlock && n * in * out > (int64_t(1) << 23)) {
    // one row block (a decoding step of GRPO's many rows): one sgemm would run it on the calling thread
    // alone; blocks of the weight's rows instead, one sgemm each, across the threads (each output's sum
    // does not depend on the blocks, nor on the thread count)
    auto columns = [&](int64_t, int64_t c0, int64_t c1) {
      dnnl_sgemm('N', 'T', n, c1 - c0, in, 1.f, x, in, w + c0 * in, in, 0.f, y + c0, out);
      if (bias != nullptr)
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = c0; c < c1; ++c) y[r * out + c] += bias[c];
    };
    mindtune::parallel_blocks(out, kSgemmColumns, columns);
    return;
  }
  auto rows = [&](int64_t, int64_t r0, int64_t r1) {
    dnnl_sgemm('N', 'T', r1 - r0, out, in, 1.f, x + r0 * in, in, w, in, 0.f, y + r0 * out, out);
    if (bias != nullptr)
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < out; ++c) y[r * out + c] += bias[c];
  };
  mindtune::blocks_maybe_parallel(n > kRowBlock, n, kRowBlock, rows);
}

void rmsnorm(const float *x, const float *w, int64_t n, int64_t h, float eps, bool offset, float *y) {
  for (int64_t r = 0; r < n; ++r) {
    const float *row = x + r * h;
    float sum = 0.f;
    for (int64_t c = 0; c < h; ++c) sum += row[c] * row[c];
    const float scale = 1.f / std::sqrt(sum / float(h) + eps);
    for (int64_t c = 0; c < h; ++c) y[r * h + c] = row[c] * scale * (offset ? 1.f + w[c] : w[c]);
  }
}

// half-style RoPE of `heads` heads of width d in row `x`, at position `pos`
void rotate(float *x, int64_t heads, int64_t d, const float *inv_freq, int32_t pos, float factor) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = float(pos) * inv_freq[i];
    const float c = std::cos(angle) * factor, s = std::sin(angle) * factor;
    for (int64_t hd = 0; hd < heads; ++hd) {
      float *q = x + hd * d;
      const float a = q[i], b = q[i + half];
      q[i] = a * c - b * s;
      q[i + half] = b * c + a * s;
    }
  }
}

template <typename F>
void run_tasks(bool parallel, int64_t tasks, F fn) {
  if (parallel) return parallel_for(tasks, fn);
  for (int64_t t = 0; t < tasks; ++t) fn(t);
}

// exp(x) for x <= 88 in straight-line arithmetic that the compiler vectorises (the C library's expf is
// called one value at a time): e^x = 2^n · e^r, r = x − n·ln 2 in [−ln 2/2, ln 2/2], e^r by Cephes' expf
// polynomial; relative error < 3e-7 over [−87, 88] (measured against double exp). Below −87 it is
// clamped (a sigmoid's 1 / (1 + e^87) is 0 in float32 either way).
inline float fast_exp(float x) {
  x = std::max(x, -87.f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // x - n·ln 2, ln 2 in two parts (Cephes)
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += static_cast<int32_t>(n) << 23;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// fn(begin, end) over [0, size) in blocks of 16384, in parallel when there are several
template <typename F>
void elementwise(int64_t size, F fn) {
  mindtune::blocks_maybe_parallel(size > 32768, size, 16384, [&](int64_t, int64_t i0, int64_t i1) { fn(i0, i1); });
}

bool any_bias(const float *b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (b[i] != 0.f) return true;
  return false;
}
}  // namespace

namespace {
int infer_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes);
}  // namespace

extern "C" int32_t mindtune_infer_cache_new(int64_t layers, int64_t batch, int64_t kv_heads, int64_t slots,
                                            int64_t dim) {
  auto cache = std::make_unique<Cache>();
  *cache = Cache{layers, batch, kv_heads, slots, dim, {}, {}};
  const int64_t size = layers * batch * kv_heads * slots * dim;
  cache->k.assign(size, 0.f);
  cache->v.assign(size, 0.f);
  std::lock_guard<std::mutex> guard(g_lock);
  const int32_t handle = g_next++;
  g_caches[handle] = std::move(cache);
  return handle;
}

extern "C" void mindtune_infer_cache_free(int32_t handle) {
  std::lock_guard<std::mutex> guard(g_lock);
  g_caches.erase(handle);
}

extern "C" int mindtune_infer_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                      void *stream, void *extra) {
  return infer_forward(nparam, params, ndims, shapes, dtypes);
}

// the same for the op whose output is each row's last token only (a second symbol: MindSpore keeps one
// op per function and input shapes, so the two output shapes need two functions)
extern "C" int mindtune_infer_forward_last(int nparam, void **params, int *ndims, int64_t **shapes,
                                           const char **dtypes, void *stream, void *extra) {
  return infer_forward(nparam, params, ndims, shapes, dtypes);
}

namespace {
int infer_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  if (nparam < kFixed + 1 || (nparam - kFixed - 1) % kPerLayer != 0) return 1;
  const int64_t layers = (nparam - kFixed - 1) / kPerLayer;
  if (!is_i32(dtypes[0]) || !is_i32(dtypes[1]) || !is_i32(dtypes[3])) return 2;
  for (int i = 0; i < nparam; ++i)
    if (i != 0 && i != 1 && i != 3 && !is_f32(dtypes[i])) return 3;
  const int64_t B = shapes[0][0], T = shapes[0][1];
  const int64_t S = shapes[2][1], D = 2 * shapes[4][0], V = shapes[6][0], h = shapes[6][1];
  const int64_t HD = shapes[kFixed + 1][0], KD = shapes[kFixed + 2][0], I = shapes[kFixed + 9][0];
  const int64_t H = HD / D, KV = KD / D, rep = H / KV;
  const int out = nparam - 1;
  const int64_t t_out = shapes[out][1];
  if (shapes[1][0] != B || shapes[1][1] != T || shapes[2][0] != B || shapes[out][0] != B || shapes[out][2] != V ||
      shapes[7][0] != h || shapes[8][0] != V || shapes[8][1] != h ||
      (t_out != T && t_out != 1) || H * D != HD || KV * D != KD || H % KV != 0)
    return 10;
  const auto *ids = static_cast<const int32_t *>(params[0]);
  const auto *positions = static_cast<const int32_t *>(params[1]);
  const auto *valid = static_cast<const float *>(params[2]);
  const auto *meta = static_cast<const int32_t *>(params[3]);
  const auto *inv_freq = static_cast<const float *>(params[4]);
  const auto *scalars = static_cast<const float *>(params[5]);
  const auto *embedding = static_cast<const float *>(params[6]);
  const auto *final_norm = static_cast<const float *>(params[7]);
  const auto *head = static_cast<const float *>(params[8]);
  const float eps = scalars[0], scale = scalars[1], factor = scalars[2], cap = scalars[4];
  const bool offset = scalars[3] != 0.f;
  const int64_t start = meta[1];

  Cache local;
  Cache *cache = &local;
  if (meta[0] != 0) {
    cache = find_cache(meta[0]);
    if (cache == nullptr) return 20;
    if (cache->layers != layers || cache->batch != B || cache->kv_heads != KV || cache->slots != S || cache->dim != D)
      return 21;
  } else {
    if (S != T || start != 0) return 22;
    local = Cache{layers, B, KV, S, D, std::vector<float>(layers * B * KV * S * D), std::vector<float>(layers * B * KV * S * D)};
  }
  if (start < 0 || start + T > S) return 23;
  for (int64_t i = 0; i < B * T; ++i)
    if (ids[i] < 0 || ids[i] >= V) return 24;

  // a prefill (no key before the new tokens) runs attention.cc's kernel: per-row RoPE tables and the
  // keys' padding as one additive mask row
  const bool prefill = start == 0 && T > 1;
  std::vector<float> cos_table, sin_table, key_mask, lse, rotated;
  if (prefill) {
    cos_table.resize(B * T * D);
    sin_table.resize(B * T * D);
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t i = 0; i < D / 2; ++i) {
        const float angle = float(positions[r]) * inv_freq[i];
        cos_table[r * D + i] = cos_table[r * D + i + D / 2] = std::cos(angle) * factor;
        sin_table[r * D + i] = sin_table[r * D + i + D / 2] = std::sin(angle) * factor;
      }
    key_mask.resize(B * T);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) key_mask[b * T + t] = valid[b * S + t] != 0.f ? 0.f : -3.4028234663852886e38f;
    lse.resize(B * H * T);
    rotated.resize(B * T * KD);
  }
  const float options[5] = {scale, 0.f, 0.f, 0.f, 0.f};

  const int64_t N = B * T;
  std::vector<float> x(N * h), hn(N * h), q(N * HD), k(N * KD), v(N * KD), att(N * HD), o(N * h), g(N * I), u(N * I);
  for (int64_t r = 0; r < N; ++r) std::memcpy(&x[r * h], embedding + int64_t(ids[r]) * h, h * sizeof(float));

  for (int64_t l = 0; l < layers; ++l) {
    void **p = params + kFixed + l * kPerLayer;
    const auto *in_norm = static_cast<const float *>(p[0]);
    const auto *wq = static_cast<const float *>(p[1]), *wk = static_cast<const float *>(p[2]);
    const auto *wv = static_cast<const float *>(p[3]);
    const auto *bq = static_cast<const float *>(p[4]), *bk = static_cast<const float *>(p[5]);
    const auto *bv = static_cast<const float *>(p[6]);
    const auto *wo = static_cast<const float *>(p[7]), *post_norm = static_cast<const float *>(p[8]);
    const auto *wg = static_cast<const float *>(p[9]), *wu = static_cast<const float *>(p[10]);
    const auto *wd = static_cast<const float *>(p[11]);
    if (shapes[kFixed + l * kPerLayer + 1][0] != HD || shapes[kFixed + l * kPerLayer + 1][1] != h ||
        shapes[kFixed + l * kPerLayer + 11][1] != I)
      return 11;
    // only each row's last token is asked for: the last layer computes its query, attention and MLP for
    // that token alone (every token's keys and values still go into the cache)
    const bool trim = l == layers - 1 && t_out == 1 && T > 1;
    const int64_t Tq = trim ? 1 : T, Nq = B * Tq, first_query = trim ? start + T - 1 : start;
    rmsnorm(x.data(), in_norm, N, h, eps, offset, hn.data());
    linear(hn.data(), wk, any_bias(bk, KD) ? bk : nullptr, N, h, KD, k.data());
    linear(hn.data(), wv, any_bias(bv, KD) ? bv : nullptr, N, h, KD, v.data());
    if (trim) {
      for (int64_t b = 0; b < B; ++b) std::memmove(&hn[b * h], &hn[(b * T + T - 1) * h], h * sizeof(float));
      for (int64_t b = 0; b < B; ++b) std::memmove(&x[b * h], &x[(b * T + T - 1) * h], h * sizeof(float));
    }
    linear(hn.data(), wq, any_bias(bq, HD) ? bq : nullptr, Nq, h, HD, q.data());
    float *ck = cache->k.data() + l * B * KV * S * D, *cv = cache->v.data() + l * B * KV * S * D;
    const bool fused_attention = prefill && !trim;
    if (fused_attention) {
      void *args[10] = {q.data(), k.data(), v.data(), key_mask.data(), cos_table.data(), sin_table.data(),
                        const_cast<float *>(options), att.data(), lse.data(), rotated.data()};
      int64_t s_q[4] = {B, T, H, D}, s_k[4] = {B, T, KV, D}, s_m[4] = {B, 1, 1, T}, s_c[4] = {B, 1, T, D};
      int64_t s_o[1] = {5}, s_l[3] = {B, H, T};
      int64_t *arg_shapes[10] = {s_q, s_k, s_k, s_m, s_c, s_c, s_o, s_q, s_l, s_k};
      int arg_dims[10] = {4, 4, 4, 4, 4, 4, 1, 4, 3, 4};
      const char *arg_types[10] = {"float32", "float32", "float32", "float32", "float32", "float32", "float32",
                                   "float32", "float32", "float32"};
      if (int err = mindtune_attention_forward(10, args, arg_dims, arg_shapes, arg_types, nullptr, nullptr))
        return 100 + err;
      for (int64_t r = 0; r < N; ++r) {
        const int64_t b = r / T, t = r % T;
        for (int64_t kh = 0; kh < KV; ++kh) {
          const int64_t slot = ((b * KV + kh) * S + t) * D;
          std::memcpy(ck + slot, &rotated[r * KD + kh * D], D * sizeof(float));
          std::memcpy(cv + slot, &v[r * KD + kh * D], D * sizeof(float));
        }
      }
    } else {
      for (int64_t r = 0; r < N; ++r) {
        const int64_t b = r / T, t = r % T;
        rotate(&k[r * KD], KV, D, inv_freq, positions[r], factor);
        for (int64_t kh = 0; kh < KV; ++kh) {
          const int64_t slot = ((b * KV + kh) * S + start + t) * D;
          std::memcpy(ck + slot, &k[r * KD + kh * D], D * sizeof(float));
          std::memcpy(cv + slot, &v[r * KD + kh * D], D * sizeof(float));
        }
      }
      for (int64_t r = 0; r < Nq; ++r) rotate(&q[r * HD], H, D, inv_freq, positions[trim ? r * T + T - 1 : r], factor);
    }
    // causal attention of the queries over the valid slots up to each one's own, per (row, kv head): the
    // rep query heads that share a kv head stacked as (rep·Tq, D), scores and the weighted sum by sgemm
    // over the slots in use; on the calling thread when small (a decoding step: starting threads costs
    // more than it saves)
    const int64_t used = start + T;
    const bool parallel = B * H * Tq * used * D > (int64_t(1) << 20);
    run_tasks(parallel, fused_attention ? 0 : B * KV, [&](int64_t task) {
      const int64_t b = task / KV, kh = task % KV, rows_here = rep * Tq;
      const float *keys = ck + (b * KV + kh) * S * D, *values = cv + (b * KV + kh) * S * D;
      const float *seen = valid + b * S;
      std::vector<float> queries(rows_here * D), scores(rows_here * used), out(rows_here * D);
      for (int64_t r = 0; r < rep; ++r)
        for (int64_t t = 0; t < Tq; ++t)
          std::memcpy(&queries[(r * Tq + t) * D], &q[(b * Tq + t) * HD + (kh * rep + r) * D], D * sizeof(float));
      const bool many = rows_here >= kFewQueries;
      if (many) {
        dnnl_sgemm('N', 'T', rows_here, used, D, scale, queries.data(), D, keys, D, 0.f, scores.data(), used);
      } else {  // a decoding step: a few dot products per key, cheaper than an sgemm call's set-up
        for (int64_t row = 0; row < rows_here; ++row)
          for (int64_t j = 0; j < used; ++j) {
            float dot = 0.f;
            for (int64_t c = 0; c < D; ++c) dot += queries[row * D + c] * keys[j * D + c];
            scores[row * used + j] = dot * scale;
          }
      }
      for (int64_t row = 0; row < rows_here; ++row) {
        float *p = &scores[row * used];
        const int64_t last = first_query + row % Tq;  // the query's own slot
        float top = -INFINITY;
        for (int64_t j = 0; j <= last; ++j)
          if (seen[j] != 0.f) top = std::max(top, p[j]);
        if (top == -INFINITY) {  // a padding query with nothing to see
          std::fill(p, p + used, 0.f);
          continue;
        }
        float total = 0.f;
        for (int64_t j = 0; j < used; ++j) {
          const float e = j <= last && seen[j] != 0.f ? fast_exp(p[j] - top) : 0.f;
          p[j] = e;
          total += e;
        }
        const float inverse = 1.f / total;
        for (int64_t j = 0; j < used; ++j) p[j] *= inverse;
      }
      if (many) {
        dnnl_sgemm('N', 'N', rows_here, D, used, 1.f, scores.data(), used, values, D, 0.f, out.data(), D);
      } else {
        std::fill(out.begin(), out.end(), 0.f);
        for (int64_t row = 0; row < rows_here; ++row)
          for (int64_t j = 0; j < used; ++j) {
            const float weight = scores[row * used + j];
            if (weight == 0.f) continue;
            for (int64_t c = 0; c < D; ++c) out[row * D + c] += weight * values[j * D + c];
          }
      }
      for (int64_t r = 0; r < rep; ++r)
        for (int64_t t = 0; t < Tq; ++t)
          std::memcpy(&att[(b * Tq + t) * HD + (kh * rep + r) * D], &out[(r * Tq + t) * D], D * sizeof(float));
    });
    linear(att.data(), wo, nullptr, Nq, HD, h, o.data());
    elementwise(Nq * h, [&](int64_t i0, int64_t i1) { for (int64_t i = i0; i < i1; ++i) x[i] += o[i]; });
    rmsnorm(x.data(), post_norm, Nq, h, eps, offset, hn.data());
    linear(hn.data(), wg, nullptr, Nq, h, I, g.data());
    linear(hn.data(), wu, nullptr, Nq, h, I, u.data());
    elementwise(Nq * I, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) g[i] = g[i] / (1.f + fast_exp(-g[i])) * u[i];
    });
    linear(g.data(), wd, nullptr, Nq, I, h, o.data());
    elementwise(Nq * h, [&](int64_t i0, int64_t i1) { for (int64_t i = i0; i < i1; ++i) x[i] += o[i]; });
  }
  // the rows asked for (every token's, or each row's last: the last layer left those in rows 0..B-1),
  // normed, through the head
  const int64_t rows = B * t_out;
  rmsnorm(x.data(), final_norm, rows, h, eps, offset, hn.data());
  auto *y = static_cast<float *>(params[out]);
  linear(hn.data(), head, nullptr, rows, h, V, y);
  if (cap > 0.f)
    for (int64_t i = 0; i < rows * V; ++i) y[i] = std::tanh(y[i] / cap) * cap;
  return 0;
}
}  // namespace

// rows of one cache into another: every layer's slots [0, slots) of row index[r] of `from` into row r of `to`
// (the continuations of lm-eval's choices each start from their context's cache)
extern "C" int mindtune_infer_cache_gather(int32_t to_handle, int32_t from_handle, const int32_t *index, int64_t slots) {
  Cache *to = find_cache(to_handle), *from = find_cache(from_handle);
  if (to == nullptr || from == nullptr) return 20;
  if (to->layers != from->layers || to->kv_heads != from->kv_heads || to->dim != from->dim || slots > to->slots ||
      slots > from->slots)
    return 21;
  const int64_t KV = to->kv_heads, D = to->dim;
  for (int64_t l = 0; l < to->layers; ++l)
    for (int64_t r = 0; r < to->batch; ++r) {
      if (index[r] < 0 || index[r] >= from->batch) return 22;
      for (int64_t kh = 0; kh < KV; ++kh) {
        const int64_t dst = ((l * to->batch + r) * KV + kh) * to->slots * D;
        const int64_t src = ((l * from->batch + index[r]) * KV + kh) * from->slots * D;
        std::memcpy(to->k.data() + dst, from->k.data() + src, slots * D * sizeof(float));
        std::memcpy(to->v.data() + dst, from->v.data() + src, slots * D * sizeof(float));
      }
    }
  return 0;
}

// Sampling of a decoding step's next tokens at `temperature` from the whole vocabulary (no top-k, no top-p:
// GRPO's and TRL's default), by inverse CDF over the tokens in order, as core.engine.generate.sample_next
// draws them: row r takes the first token whose cumulative probability passes uniforms[r] (one draw per row,
// from the row's own generator). numpy's version made (B, V) float64 arrays five times a step: at 32 rows of
// a 151,936-token vocabulary ~0.1 s a step on this CPU, ~7 s of a 64-token rollout. Here each row is two
// passes over its logits: the unnormalised probabilities exp((l − max)/T) summed per block of kSampleBlock
// tokens (float within a block, double across blocks), then the block that holds the draw, walked token by
// token. Rows in parallel. Returns 0, or 1 when a row has no finite logit.
namespace {
constexpr int64_t kSampleBlock = 1024;

// a token's unnormalised probability: 0 below e^-87 (where float32's exp is 0 or denormal; -inf logits too)
inline float sample_weight(float logit, float top, float inverse_temperature) {
  const float x = (logit - top) * inverse_temperature;
  return x < -87.f ? 0.f : fast_exp(x);
}
}  // namespace

extern "C" int mindtune_sample_rows(const float *logits, int64_t rows, int64_t vocab, float inverse_temperature,
                                    const double *uniforms, int64_t *out) {
  std::atomic<int> failed{0};
  const int64_t blocks = (vocab + kSampleBlock - 1) / kSampleBlock;
  auto row_task = [&](int64_t r) {
    const float *l = logits + r * vocab;
    float top = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) top = std::max(top, l[j]);
    if (!std::isfinite(top)) {
      failed = 1;
      out[r] = 0;
      return;
    }
    std::vector<double> sums(blocks);
    double total = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t j0 = b * kSampleBlock, j1 = std::min(vocab, j0 + kSampleBlock);
      float sum = 0.f;
      for (int64_t j = j0; j < j1; ++j) sum += sample_weight(l[j], top, inverse_temperature);
      sums[b] = sum;
      total += sum;
    }
    double target = uniforms[r] * total, before = 0.0;
    int64_t b = 0;
    while (b < blocks - 1 && before + sums[b] <= target) before += sums[b++];
    const int64_t j0 = b * kSampleBlock, j1 = std::min(vocab, j0 + kSampleBlock);
    int64_t chosen = -1, last = j0;
    double cumulative = before;
    for (int64_t j = j0; j < j1; ++j) {
      const float e = sample_weight(l[j], top, inverse_temperature);
      if (e <= 0.f) continue;
      last = j;
      cumulative += e;
      if (cumulative > target) {
        chosen = j;
        break;
      }
    }
    out[r] = chosen >= 0 ? chosen : last;  // the draw at the block's very end (rounding): its last kept token
  };
  // rows in parallel only when there is enough to share: a thread started per call waits to be scheduled,
  // milliseconds on a loaded machine, which the demo's 32 rows of 931 logits (30 µs of work) cannot repay
  run_tasks(rows * vocab > (int64_t(1) << 22), rows, row_task);
  return failed.load();
}
