// Fused LoRA update for MindSpore's CPU: the forward and backward of
//     y = base + h·(s·B)ᵀ,   h = x·Aᵀ                     (base = x·Wᵀ + b, MindSpore's own MatMul)
//     g = dy·(s·B);  dx = g·A;  dA = gᵀ·x;  dB = s·dyᵀ·h;  dbase = dy
// as two "aot" kernels of `mindspore.ops.Custom` (built with the other kernels into one library by
// core/fused.py; core/lora.py's LoRADense calls it when core.fused.enable set it, dropout 0).
//
// Why: composed, a LoRA projection is two skinny MatMuls, a Mul (the scaling folded into B) and an
// Add forward, and four skinny MatMuls, the Mul's gradient and an AddN backward: eight to ten
// kernels of a few microseconds' work each, and oneDNN's MatMul primitive runs shapes with a side
// of `rank` (8) at a few GFLOP/s (profiled in the 25M LoRA step: 2048×8·8×512 at 3–7 GFLOP/s,
// 25% of the step's oneDNN time under load). Here each direction is one kernel: blocks of 128 rows
// run oneDNN's sgemm on the rows' x, h, dy; the weights' gradients are summed per block and the
// blocks in order, so they do not depend on the thread count. A call of the usual sizes (up to
// ~1 ms of work) runs on the calling thread: measured in the demo LoRA step on the loaded 2-core
// machine, starting a second thread per call cost more (CPU 0.26 -> 0.33 s per step) than it saved.
//
// Layouts (row-major float32): base, y, dy (N, out); x, dx (N, in); A, dA (r, in); B, dB (out, r);
// s (1); h (N, r), saved by the forward for the backward (which does not take base).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc);

namespace {
using mindtune::is_f32;
constexpr int64_t kRows = 128;  // rows per task
// below this many multiply-adds of x·Aᵀ and h·Bᵀ (~1 ms on one core) a call runs on one thread
constexpr int64_t kParallelMacs = int64_t{1} << 26;

struct Dims {
  int64_t n, in, out, r;
  bool parallel() const { return n * (in + out) * r >= kParallelMacs; }
};

// The shapes of x, A, B and s (the parameters from `first`) and every parameter float32; the
// forward's base (N, out) and the backward's dy (N, out) are checked by the caller.
int read_dims(int nparam, int expected, int first, int *ndims, int64_t **shapes, const char **dtypes, Dims *d) {
  if (nparam != expected) return 1;
  for (int i = 0; i < expected; ++i)
    if (!is_f32(dtypes[i])) return 20 + i;
  const int x = first, a = first + 1, b = first + 2, s = first + 3;
  if (ndims[x] != 2 || ndims[a] != 2 || ndims[b] != 2) return 10;
  if (ndims[s] != 1 || shapes[s][0] != 1) return 14;
  d->n = shapes[x][0]; d->in = shapes[x][1]; d->r = shapes[a][0]; d->out = shapes[b][0];
  if (shapes[a][1] != d->in || shapes[b][1] != d->r) return 30;
  return 0;
}

// an (N, out) parameter of this call's dims
bool rows_by_out(int i, int *ndims, int64_t **shapes, const Dims &d) {
  return ndims[i] == 2 && shapes[i][0] == d.n && shapes[i][1] == d.out;
}

// s·B (out, r), rounded once as the composed Mul does
std::vector<float> scaled(const float *b, int64_t size, float s) {
  std::vector<float> out(b, b + size);
  for (auto &v : out) v *= s;
  return out;
}
}  // namespace

// inputs base (N, out), x (N, in), A (r, in), B (out, r), s (1); outputs y (N, out), h (N, r)
extern "C" int mindtune_lora_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                     void *stream, void *extra) {
  Dims d;
  if (int err = read_dims(nparam, 7, 1, ndims, shapes, dtypes, &d)) return err;
  if (!rows_by_out(0, ndims, shapes, d)) return 30;
  const auto *base = static_cast<const float *>(params[0]);
  const auto *x = static_cast<const float *>(params[1]);
  const auto *a = static_cast<const float *>(params[2]);
  const std::vector<float> bs = scaled(static_cast<const float *>(params[3]), d.out * d.r,
                                       *static_cast<const float *>(params[4]));
  auto *y = static_cast<float *>(params[5]);
  auto *h = static_cast<float *>(params[6]);
  mindtune::blocks_maybe_parallel(d.parallel(), d.n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
    const int64_t rows = i1 - i0;
    dnnl_sgemm('N', 'T', rows, d.r, d.in, 1.f, x + i0 * d.in, d.in, a, d.in, 0.f, h + i0 * d.r, d.r);  // h = x·Aᵀ
    std::memcpy(y + i0 * d.out, base + i0 * d.out, sizeof(float) * rows * d.out);
    dnnl_sgemm('N', 'T', rows, d.out, d.r, 1.f, h + i0 * d.r, d.r, bs.data(), d.r, 1.f, y + i0 * d.out, d.out);
  });
  return 0;
}

// inputs x, A, B, s, h, dy; outputs dx (N, in), dA (r, in), dB (out, r) (dbase = dy: not computed
// here). The base output is not an input: MindSpore keeps a backward's inputs alive from the
// forward on, and the base (N, out) is needed by nothing else (0.5B LoRA, 24 layers of 7
// projections: ~300 MB of a 2 × 128 step).
extern "C" int mindtune_lora_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                      void *stream, void *extra) {
  Dims d;
  if (int err = read_dims(nparam, 9, 0, ndims, shapes, dtypes, &d)) return err;
  if (ndims[4] != 2 || shapes[4][0] != d.n || shapes[4][1] != d.r || !rows_by_out(5, ndims, shapes, d)) return 30;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *a = static_cast<const float *>(params[1]);
  const float s = *static_cast<const float *>(params[3]);
  const std::vector<float> bs = scaled(static_cast<const float *>(params[2]), d.out * d.r, s);
  const auto *h = static_cast<const float *>(params[4]);
  const auto *dy = static_cast<const float *>(params[5]);
  auto *dx = static_cast<float *>(params[6]);
  auto *da = static_cast<float *>(params[7]);
  auto *db = static_cast<float *>(params[8]);
  const int64_t blocks = mindtune::block_count(d.n, kRows), a_size = d.r * d.in, b_size = d.out * d.r;
  std::vector<float> partial_a(blocks * a_size), partial_b(blocks * b_size);
  mindtune::blocks_maybe_parallel(d.parallel(), d.n, kRows, [&](int64_t block, int64_t i0, int64_t i1) {
    const int64_t rows = i1 - i0;
    std::vector<float> g(rows * d.r);
    const float *dyb = dy + i0 * d.out;
    dnnl_sgemm('N', 'N', rows, d.r, d.out, 1.f, dyb, d.out, bs.data(), d.r, 0.f, g.data(), d.r);  // g = dy·(s·B)
    dnnl_sgemm('N', 'N', rows, d.in, d.r, 1.f, g.data(), d.r, a, d.in, 0.f, dx + i0 * d.in, d.in);  // dx = g·A
    dnnl_sgemm('T', 'N', d.r, d.in, rows, 1.f, g.data(), d.r, x + i0 * d.in, d.in, 0.f,
               partial_a.data() + block * a_size, d.in);  // gᵀ·x
    dnnl_sgemm('T', 'N', d.out, d.r, rows, s, dyb, d.out, h + i0 * d.r, d.r, 0.f, partial_b.data() + block * b_size,
               d.r);  // s·dyᵀ·h
  });
  std::memcpy(da, partial_a.data(), sizeof(float) * a_size);
  std::memcpy(db, partial_b.data(), sizeof(float) * b_size);
  for (int64_t t = 1; t < blocks; ++t) {
    const float *pa = partial_a.data() + t * a_size, *pb = partial_b.data() + t * b_size;
    for (int64_t j = 0; j < a_size; ++j) da[j] += pa[j];
    for (int64_t j = 0; j < b_size; ++j) db[j] += pb[j];
  }
  return 0;
}

// ---- the LoRA update with its base product in the same kernel ----------------------------------
// y = x·Wᵀ + h·(s·B)ᵀ for a frozen float32 W (out, in), and dx = dy·W + g·A: no base output to copy
// into y, no second dx to add (MindSpore's AddN). Profiled before (Intel Xeon, 2 CPUs): the demo LoRA
// step's AddN 6 ms and LoRA kernels ~45 ms of 206 ms; the 0.5B shape's AddN 96 ms of 4.1 s, its
// forwards copying ~0.8 GB of base outputs per step. The product is split along the longer of the
// rows and the weight's rows (forward) or columns (dx), so the operand each sgemm packs again is the
// smaller one; each output's sum runs over the same inner dimension whatever the split.
namespace {
constexpr int64_t kProductBlock = 256;  // rows, or weight rows / columns, per task of a product
constexpr int64_t kParallelProductMacs = int64_t{1} << 22;  // below: the calling thread alone

bool product_parallel(const Dims &d) { return d.n * d.in * d.out >= kParallelProductMacs; }
}  // namespace

// inputs w (out, in), x (N, in), A (r, in), B (out, r), s (1); outputs y (N, out), h (N, r)
extern "C" int mindtune_lora_dense_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                           const char **dtypes, void *stream, void *extra) {
  Dims d;
  if (int err = read_dims(nparam, 7, 1, ndims, shapes, dtypes, &d)) return err;
  if (ndims[0] != 2 || shapes[0][0] != d.out || shapes[0][1] != d.in) return 30;
  const auto *w = static_cast<const float *>(params[0]);
  const auto *x = static_cast<const float *>(params[1]);
  const auto *a = static_cast<const float *>(params[2]);
  const std::vector<float> bs = scaled(static_cast<const float *>(params[3]), d.out * d.r,
                                       *static_cast<const float *>(params[4]));
  auto *y = static_cast<float *>(params[5]);
  auto *h = static_cast<float *>(params[6]);
  mindtune::blocks_maybe_parallel(d.parallel(), d.n, kRows, [&](int64_t, int64_t i0, int64_t i1) {
    dnnl_sgemm('N', 'T', i1 - i0, d.r, d.in, 1.f, x + i0 * d.in, d.in, a, d.in, 0.f, h + i0 * d.r, d.r);  // h = x·Aᵀ
  });
  if (d.n >= d.out) {
    mindtune::blocks_maybe_parallel(product_parallel(d), d.n, kProductBlock, [&](int64_t, int64_t i0, int64_t i1) {
      const int64_t rows = i1 - i0;
      dnnl_sgemm('N', 'T', rows, d.out, d.in, 1.f, x + i0 * d.in, d.in, w, d.in, 0.f, y + i0 * d.out, d.out);
      dnnl_sgemm('N', 'T', rows, d.out, d.r, 1.f, h + i0 * d.r, d.r, bs.data(), d.r, 1.f, y + i0 * d.out, d.out);
    });
  } else {
    mindtune::blocks_maybe_parallel(product_parallel(d), d.out, kProductBlock, [&](int64_t, int64_t c0, int64_t c1) {
      const int64_t cols = c1 - c0;
      dnnl_sgemm('N', 'T', d.n, cols, d.in, 1.f, x, d.in, w + c0 * d.in, d.in, 0.f, y + c0, d.out);
      dnnl_sgemm('N', 'T', d.n, cols, d.r, 1.f, h, d.r, bs.data() + c0 * d.r, d.r, 1.f, y + c0, d.out);
    });
  }
  return 0;
}

// inputs x, A, B, s, h, dy, w (out, in); outputs dx (N, in) = dy·W + g·A, dA, dB (as lora_backward)
extern "C" int mindtune_lora_dense_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                            const char **dtypes, void *stream, void *extra) {
  Dims d;
  if (int err = read_dims(nparam, 10, 0, ndims, shapes, dtypes, &d)) return err;
  if (ndims[4] != 2 || shapes[4][0] != d.n || shapes[4][1] != d.r || !rows_by_out(5, ndims, shapes, d)) return 30;
  if (ndims[6] != 2 || shapes[6][0] != d.out || shapes[6][1] != d.in) return 31;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *a = static_cast<const float *>(params[1]);
  const float s = *static_cast<const float *>(params[3]);
  const std::vector<float> bs = scaled(static_cast<const float *>(params[2]), d.out * d.r, s);
  const auto *h = static_cast<const float *>(params[4]);
  const auto *dy = static_cast<const float *>(params[5]);
  const auto *w = static_cast<const float *>(params[6]);
  auto *dx = static_cast<float *>(params[7]);
  auto *da = static_cast<float *>(params[8]);
  auto *db = static_cast<float *>(params[9]);
  const int64_t blocks = mindtune::block_count(d.n, kRows), a_size = d.r * d.in, b_size = d.out * d.r;
  std::vector<float> g(d.n * d.r), partial_a(blocks * a_size), partial_b(blocks * b_size);
  mindtune::blocks_maybe_parallel(d.parallel(), d.n, kRows, [&](int64_t block, int64_t i0, int64_t i1) {
    const int64_t rows = i1 - i0;
    const float *dyb = dy + i0 * d.out;
    float *gb = g.data() + i0 * d.r;
    dnnl_sgemm('N', 'N', rows, d.r, d.out, 1.f, dyb, d.out, bs.data(), d.r, 0.f, gb, d.r);  // g = dy·(s·B)
    dnnl_sgemm('T', 'N', d.r, d.in, rows, 1.f, gb, d.r, x + i0 * d.in, d.in, 0.f, partial_a.data() + block * a_size,
               d.in);  // gᵀ·x
    dnnl_sgemm('T', 'N', d.out, d.r, rows, s, dyb, d.out, h + i0 * d.r, d.r, 0.f, partial_b.data() + block * b_size,
               d.r);  // s·dyᵀ·h
  });
  if (d.n >= d.in) {
    mindtune::blocks_maybe_parallel(product_parallel(d), d.n, kProductBlock, [&](int64_t, int64_t i0, int64_t i1) {
      const int64_t rows = i1 - i0;
      dnnl_sgemm('N', 'N', rows, d.in, d.out, 1.f, dy + i0 * d.out, d.out, w, d.in, 0.f, dx + i0 * d.in, d.in);
      dnnl_sgemm('N', 'N', rows, d.in, d.r, 1.f, g.data() + i0 * d.r, d.r, a, d.in, 1.f, dx + i0 * d.in, d.in);
    });
  } else {
    mindtune::blocks_maybe_parallel(product_parallel(d), d.in, kProductBlock, [&](int64_t, int64_t c0, int64_t c1) {
      const int64_t cols = c1 - c0;
      dnnl_sgemm('N', 'N', d.n, cols, d.out, 1.f, dy, d.out, w + c0, d.in, 0.f, dx + c0, d.in);
      dnnl_sgemm('N', 'N', d.n, cols, d.r, 1.f, g.data(), d.r, a + c0, d.in, 1.f, dx + c0, d.in);
    });
  }
  std::memcpy(da, partial_a.data(), sizeof(float) * a_size);
  std::memcpy(db, partial_b.data(), sizeof(float) * b_size);
  for (int64_t t = 1; t < blocks; ++t) {
    const float *pa = partial_a.data() + t * a_size, *pb = partial_b.data() + t * b_size;
    for (int64_t j = 0; j < a_size; ++j) da[j] += pa[j];
    for (int64_t j = 0; j < b_size; ++j) db[j] += pb[j];
  }
  return 0;
}
