// Grouped matrix products for the sparse mixture-of-experts layers (core/moe.py) on MindSpore's
// CPU, as "aot" kernels of `mindspore.ops.Custom` with hand-written backwards (core/fused.py):
//     y[i] = x[i] · W[ids[i]]ᵀ        x (M, K), W (E, N, K), ids (M,) sorted by expert, y (M, N)
//     dx[i] = dy[i] · W[ids[i]],      dW[e] = Σ_{i: ids[i]=e} dy[i]ᵀ · x[i]
// and the gate of the experts' SwiGLU on their fused gate/up output:
//     a = silu(g) · u,   (g, u) = the two halves of h (M, 2I) along the last axis
//
// Why: a router sends each token to k of E experts. Sorted by expert, the token copies form E
// contiguous groups of rows, and each group is one matrix product with its expert's weights; the
// composed alternative without Python loops runs every expert on every token (E/k times the
// work). Each group is cut into blocks of rows (output columns for dW), every block one oneDNN
// sgemm (single-threaded here, like attention.cc's), the blocks spread over the threads; the split
// depends only on the group sizes, so results do not depend on the thread count.
//
// The same product serves LoRA on the experts: x·Aᵀ with A (E, r, K), then ·Bᵀ with B (E, N, r).
//
// Layouts: row-major float32; ids int32, nondecreasing, each in [0, E) (checked: error 40/41).
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
using mindtune::is_i32;
using mindtune::parallel_blocks;
using mindtune::parallel_for;
constexpr int64_t kRowBlock = 128;  // rows of a group per task (forward, dx)
constexpr int64_t kColBlock = 128;  // output columns of an expert's dW per task
constexpr int64_t kChunk = 16384;   // elements per task of the gate

struct Groups {
  int64_t M, K, N, E;
  std::vector<int64_t> begin;  // E + 1 row offsets: expert e owns rows [begin[e], begin[e + 1])
};

// x (M, K), w (E, N, K), ids (M,): shapes, dtypes and the groups; 0 when they fit
int read_groups(int *ndims, int64_t **shapes, const char **dtypes, const void *ids_ptr, Groups *g) {
  if (ndims[0] != 2 || ndims[1] != 3 || ndims[2] != 1) return 10;
  if (!is_f32(dtypes[0]) || !is_f32(dtypes[1])) return 20;
  if (!is_i32(dtypes[2])) return 22;
  g->M = shapes[0][0]; g->K = shapes[0][1];
  g->E = shapes[1][0]; g->N = shapes[1][1];
  if (shapes[1][2] != g->K || shapes[2][0] != g->M || g->E <= 0) return 30;
  const auto *ids = static_cast<const int32_t *>(ids_ptr);
  g->begin.assign(g->E + 1, g->M);
  int64_t e = 0;  // the next expert whose first row is not found yet
  for (int64_t i = 0; i < g->M; ++i) {
    if (ids[i] < 0 || ids[i] >= g->E) return 40;
    if (i > 0 && ids[i] < ids[i - 1]) return 41;  // not sorted
    while (e <= ids[i]) g->begin[e++] = i;
  }
  return 0;
}

struct Block {
  int64_t e, r0, r1;
};

// every group's rows in blocks of kRowBlock, experts in order
std::vector<Block> row_blocks(const Groups &g) {
  std::vector<Block> blocks;
  for (int64_t e = 0; e < g.E; ++e)
    for (int64_t r = g.begin[e]; r < g.begin[e + 1]; r += kRowBlock)
      blocks.push_back({e, r, std::min(g.begin[e + 1], r + kRowBlock)});
  return blocks;
}

// y rows of each block: (rows, N) = x (rows, K) · W[e]ᵀ
void forward(const Groups &g, const float *x, const float *w, float *y) {
  const std::vector<Block> blocks = row_blocks(g);
  parallel_for(static_cast<int64_t>(blocks.size()), [&](int64_t t) {
    const Block &b = blocks[t];
    dnnl_sgemm('N', 'T', b.r1 - b.r0, g.N, g.K, 1.f, x + b.r0 * g.K, g.K, w + b.e * g.N * g.K, g.K, 0.f,
               y + b.r0 * g.N, g.N);
  });
}

// dx rows of each block: (rows, K) = dy (rows, N) · W[e]
void input_grad(const Groups &g, const float *dy, const float *w, float *dx) {
  const std::vector<Block> blocks = row_blocks(g);
  parallel_for(static_cast<int64_t>(blocks.size()), [&](int64_t t) {
    const Block &b = blocks[t];
    dnnl_sgemm('N', 'N', b.r1 - b.r0, g.K, g.N, 1.f, dy + b.r0 * g.N, g.N, w + b.e * g.N * g.K, g.K, 0.f,
               dx + b.r0 * g.K, g.K);
  });
}

// dW[e] rows [o0, o1): (o1 − o0, K) = dy[group, o0:o1]ᵀ · x[group]; zero for an expert no row chose
void weight_grad(const Groups &g, const float *x, const float *dy, float *dw) {
  const int64_t col_blocks = mindtune::block_count(g.N, kColBlock);
  parallel_for(g.E * col_blocks, [&](int64_t t) {
    const int64_t e = t / col_blocks, o0 = (t % col_blocks) * kColBlock, o1 = std::min(g.N, o0 + kColBlock);
    const int64_t r0 = g.begin[e], rows = g.begin[e + 1] - r0;
    float *out = dw + (e * g.N + o0) * g.K;
    if (rows == 0) {
      std::memset(out, 0, sizeof(float) * (o1 - o0) * g.K);
      return;
    }
    dnnl_sgemm('T', 'N', o1 - o0, g.K, rows, 1.f, dy + r0 * g.N + o0, g.N, x + r0 * g.K, g.K, 0.f, out, g.K);
  });
}
}  // namespace

// inputs x, w, ids; output y (M, N)
extern "C" int mindtune_grouped_matmul_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                               const char **dtypes, void *stream, void *extra) {
  if (nparam != 4) return 1;
  Groups g;
  if (int err = read_groups(ndims, shapes, dtypes, params[2], &g)) return err;
  forward(g, static_cast<const float *>(params[0]), static_cast<const float *>(params[1]),
          static_cast<float *>(params[3]));
  return 0;
}

// The same forward under a second name, for frozen weights: MindSpore keys a Custom op's backward
// by its function, so the two backwards below need two forward names.
extern "C" int mindtune_grouped_matmul_forward_frozen(int nparam, void **params, int *ndims, int64_t **shapes,
                                                      const char **dtypes, void *stream, void *extra) {
  return mindtune_grouped_matmul_forward(nparam, params, ndims, shapes, dtypes, stream, extra);
}

// inputs x, w, ids, dy; outputs dx (M, K), dw (E, N, K)
extern "C" int mindtune_grouped_matmul_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                                const char **dtypes, void *stream, void *extra) {
  if (nparam != 6) return 1;
  Groups g;
  if (int err = read_groups(ndims, shapes, dtypes, params[2], &g)) return err;
  const auto *x = static_cast<const float *>(params[0]);
  const auto *w = static_cast<const float *>(params[1]);
  const auto *dy = static_cast<const float *>(params[3]);
  input_grad(g, dy, w, static_cast<float *>(params[4]));
  weight_grad(g, x, dy, static_cast<float *>(params[5]));
  return 0;
}

// inputs dy (M, N), w (E, N, K), ids (M); output dx (M, K): the backward for frozen expert weights
// (LoRA), which skips dW, a third of the products. x is not an input: MindSpore holds a backward's
// inputs from the forward on, and a frozen expert's input rows are needed by nothing else.
extern "C" int mindtune_grouped_matmul_backward_input(int nparam, void **params, int *ndims, int64_t **shapes,
                                                      const char **dtypes, void *stream, void *extra) {
  if (nparam != 4) return 1;
  if (ndims[0] != 2 || ndims[1] != 3) return 10;
  if (shapes[0][1] != shapes[1][1]) return 30;
  // the shapes as the forward saw them: x (M, K), w, ids
  int64_t x_shape[2] = {shapes[0][0], shapes[1][2]};
  int x_ndims[3] = {2, ndims[1], ndims[2]};
  int64_t *x_shapes[3] = {x_shape, shapes[1], shapes[2]};
  const char *x_dtypes[3] = {dtypes[0], dtypes[1], dtypes[2]};
  Groups g;
  if (int err = read_groups(x_ndims, x_shapes, x_dtypes, params[2], &g)) return err;
  input_grad(g, static_cast<const float *>(params[0]), static_cast<const float *>(params[1]),
             static_cast<float *>(params[3]));
  return 0;
}

namespace {
// h (rows, 2I) float32 -> rows and I; 0 when it fits
int read_halves(int nparam, int expected, int *ndims, int64_t **shapes, const char **dtypes, int64_t *rows,
                int64_t *half) {
  if (nparam != expected) return 1;
  if (ndims[0] != 2) return 10;
  for (int i = 0; i < expected; ++i)
    if (!is_f32(dtypes[i])) return 20 + i;
  if (shapes[0][1] % 2 != 0) return 30;
  *rows = shapes[0][0];
  *half = shapes[0][1] / 2;
  return 0;
}
}  // namespace

// input h (M, 2I) = [gate | up]; output a (M, I) = silu(gate) · up
extern "C" int mindtune_glu_halves_forward(int nparam, void **params, int *ndims, int64_t **shapes,
                                           const char **dtypes, void *stream, void *extra) {
  int64_t rows, half;
  if (int err = read_halves(nparam, 2, ndims, shapes, dtypes, &rows, &half)) return err;
  const auto *h = static_cast<const float *>(params[0]);
  auto *a = static_cast<float *>(params[1]);
  parallel_blocks(rows * half, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t i = e / half, j = e % half;
      const float gate = h[i * 2 * half + j], up = h[i * 2 * half + half + j];
      const float s = 1.f / (1.f + std::exp(-gate));
      a[e] = (gate * s) * up;
    }
  });
  return 0;
}

// inputs h (M, 2I), da (M, I); output dh (M, 2I) = [da · up · silu'(gate) | da · silu(gate)]
extern "C" int mindtune_glu_halves_backward(int nparam, void **params, int *ndims, int64_t **shapes,
                                            const char **dtypes, void *stream, void *extra) {
  int64_t rows, half;
  if (int err = read_halves(nparam, 3, ndims, shapes, dtypes, &rows, &half)) return err;
  const auto *h = static_cast<const float *>(params[0]);
  const auto *da = static_cast<const float *>(params[1]);
  auto *dh = static_cast<float *>(params[2]);
  parallel_blocks(rows * half, kChunk, [&](int64_t, int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t i = e / half, j = e % half, gi = i * 2 * half + j, ui = gi + half;
      const float gate = h[gi], up = h[ui];
      const float s = 1.f / (1.f + std::exp(-gate));
      dh[ui] = da[e] * (gate * s);
      dh[gi] = da[e] * up * (s * (1.f + gate * (1.f - s)));
    }
  });
  return 0;
}
