//===- CudnnAttention.cpp - Attention on cuDNN's fused SDPA ---------------===//
//
// The graphs are the ones cuDNN's runtime-fusion flash attention engines
// recognize (cudnn-frontend's composite scaled-dot-product-attention
// nodes build the same): bf16 tensors in memory, f32 virtual
// intermediates, by-value f32 scalars.
//
//   forward   S = Q K^T (K seen transposed through its strides), S * scale,
//             causal: GEN_INDEX of rows and columns, CMP_GE, BINARY_SELECT
//             of -FLT_MAX where a key is after the query; the softmax as
//             MAX, SUB, EXP, ADD-reduction, DIV, with lse = max + log(sum)
//             written (f32 [B, Hq, S, 1]); O = P V with P in bf16.
//   backward  rowDot = sum(dO * O) (times 1, by value, as cuDNN's pattern
//             has it) into an f32 [B, Hq, S, 1] tensor in the workspace;
//             P = exp(S - lse) from the same scores as the forward;
//             dV = P^T dO and, with dS = P * (dO V^T - rowDot) * scale,
//             dK = dS^T Q (P and dS transposed by RESHAPE, in bf16), summed
//             over each key head's group of query heads by an ADD-reduction
//             when Hkv < Hq; dQ = dS K into an f32 [B, Hq, S, D]
//             accumulator in the workspace, then IDENTITY into dQ.
//
// Loom's lse and cuDNN's softmax statistics are the same numbers: the
// natural-log log-sum-exp of each row of the scaled, masked scores, f32,
// [B, Hq, S] dense. So the paths mix: a cuDNN forward's lse feeds Loom's
// backward kernels and the reverse, and each call picks its path alone.
//
// A call's scratch: the plan's workspace; the backward's rowDot
// (4 B Hq S bytes) and dQ accumulator (4 B Hq S D bytes) before it, each
// at a 256-byte boundary. cuDNN before 9.6 needs the accumulator zeroed,
// which a memset on the stream does.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

#ifdef LOOM_HAVE_CUDNN
#include "CudnnGraph.h"

#include <cfloat>
#include <cstdint>
#include <map>
#endif

namespace loom::cuda::cudnn {

#ifndef LOOM_HAVE_CUDNN

struct State {};

Outcome forward(loom_cuda_context *, const Forward &) {
  return {false, -1, "Loom was built without cuDNN"};
}

Outcome backward(loom_cuda_context *, const Backward &) {
  return {false, -1, "Loom was built without cuDNN"};
}

void destroy(State *) {}

#else

namespace {

/// The unique ids of the tensors a variant pack gives; virtual tensors
/// take theirs from Graph (1000 up).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kOut,
  kLse,
  kDout,
  kDq,
  kDk,
  kDv,
  kScale,
  kNegInf,
  kOne,
  kRowDot,
  kDqAccum,
};

/// The first cuDNN with these engines as the graphs above have them, and
/// the first that zeroes the dQ accumulator itself.
constexpr size_t kMinVersion = 90000, kSelfZeroingVersion = 90600;

constexpr int64_t kPieceAlignment = 256;

int64_t aligned(int64_t bytes) {
  return (bytes + kPieceAlignment - 1) / kPieceAlignment * kPieceAlignment;
}

/// A plan of the cache, or why cuDNN refused its graph.
struct Entry {
  bool ok = false;
  std::string refusal;
  Plan plan;
};

std::vector<int64_t> stridesOf(const Strided &t) {
  return {t.batch, t.head, t.seq, 1};
}

/// `t` seen as [B, H, D, S]: its last two dimensions swapped.
std::vector<int64_t> transposedStrides(const Strided &t) {
  return {t.batch, t.head, 1, t.seq};
}

/// A graph's by-value f32 scalars, each one tensor (one uid) however many
/// operations read it; null where the graph has none.
struct Scalars {
  const Tensor *scale = nullptr, *negInf = nullptr, *one = nullptr;
};

/// scale * Q K^T with the causal mask: the scores both graphs start from.
const Tensor *scores(Graph &g, const Problem &p, const Tensor *q,
                     const Tensor *kT, const Scalars &scalars) {
  std::vector<int64_t> dims = {p.batch, p.heads, p.seq, p.kvSeq};
  const Tensor *product = g.intermediate(dims);
  g.matmul(q, kT, product);
  const Tensor *scaled = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_MUL, product, scaled, scalars.scale);
  if (!p.causal)
    return scaled;
  const Tensor *row = g.intermediate(dims, CUDNN_DATA_INT32);
  const Tensor *column = g.intermediate(dims, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, row, nullptr, nullptr,
              CUDNN_DATA_INT32, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, column, nullptr, nullptr,
              CUDNN_DATA_INT32, 3);
  const Tensor *keep = g.intermediate(dims, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, keep, column, nullptr,
              CUDNN_DATA_BOOLEAN);
  const Tensor *masked = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, masked, scalars.negInf,
              keep);
  return masked;
}

/// The f32 [B, Hq, S, 1] statistics tensor of uid `uid` (in memory).
const Tensor *rowTensor(Graph &g, int64_t uid, const Problem &p) {
  return g.tensor(uid, CUDNN_DATA_FLOAT, {p.batch, p.heads, p.seq, 1},
                  {p.heads * p.seq, p.seq, 1, 1}, TensorKind::Memory);
}

const Tensor *qShaped(Graph &g, int64_t uid, const Problem &p,
                      const Strided &t) {
  return g.tensor(uid, CUDNN_DATA_BFLOAT16, {p.batch, p.heads, p.seq, p.dim},
                  stridesOf(t), TensorKind::Memory);
}

const Tensor *kvShaped(Graph &g, int64_t uid, const Problem &p,
                       const Strided &t) {
  return g.tensor(uid, CUDNN_DATA_BFLOAT16,
                  {p.batch, p.kvHeads, p.kvSeq, p.dim}, stridesOf(t),
                  TensorKind::Memory);
}

/// k or v as [B, Hkv, D, Skv] (the B operand of a product with it on the
/// right, transposed).
const Tensor *kvTransposed(Graph &g, int64_t uid, const Problem &p,
                           const Strided &t) {
  return g.tensor(uid, CUDNN_DATA_BFLOAT16,
                  {p.batch, p.kvHeads, p.dim, p.kvSeq}, transposedStrides(t),
                  TensorKind::Memory);
}

void buildForward(Graph &g, const Forward &c) {
  const Problem &p = c.problem;
  const Tensor *q = qShaped(g, kQ, p, c.q);
  const Tensor *kT = kvTransposed(g, kK, p, c.k);
  const Tensor *v = kvShaped(g, kV, p, c.v);
  const Tensor *out = qShaped(g, kOut, p, c.out);
  const Tensor *lse = rowTensor(g, kLse, p);
  Scalars scalars;
  scalars.scale = g.scalar(kScale);
  if (p.causal)
    scalars.negInf = g.scalar(kNegInf);
  const Tensor *x = scores(g, p, q, kT, scalars);

  std::vector<int64_t> dims = {p.batch, p.heads, p.seq, p.kvSeq};
  std::vector<int64_t> rows = {p.batch, p.heads, p.seq, 1};
  const Tensor *max = g.intermediate(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, x, max);
  const Tensor *shifted = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_SUB, x, shifted, max);
  const Tensor *e = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, e);
  const Tensor *sum = g.intermediate(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const Tensor *logSum = g.intermediate(rows);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, logSum);
  g.pointwise(CUDNN_POINTWISE_ADD, max, lse, logSum);
  const Tensor *probabilities = g.intermediate(dims, CUDNN_DATA_BFLOAT16);
  g.pointwise(CUDNN_POINTWISE_DIV, e, probabilities, sum);
  g.matmul(probabilities, v, out);
}

/// result = a b, summed over each key head's group of query heads when
/// the heads are grouped (the product has Hq heads, the result Hkv).
void intoKeyHeads(Graph &g, const Problem &p, const Tensor *a, const Tensor *b,
                  const Tensor *result) {
  if (p.heads == p.kvHeads) {
    g.matmul(a, b, result);
    return;
  }
  const Tensor *full =
      g.intermediate({p.batch, p.heads, p.kvSeq, p.dim}, CUDNN_DATA_BFLOAT16);
  g.matmul(a, b, full);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, result);
}

void buildBackward(Graph &g, const Backward &c) {
  const Problem &p = c.problem;
  const Tensor *q = qShaped(g, kQ, p, c.q);
  const Tensor *kT = kvTransposed(g, kK, p, c.k);
  const Tensor *vT = kvTransposed(g, kV, p, c.v);
  const Tensor *out = qShaped(g, kOut, p, c.out);
  const Tensor *dout = qShaped(g, kDout, p, c.dout);
  const Tensor *lse = rowTensor(g, kLse, p);
  const Tensor *dq = qShaped(g, kDq, p, c.dq);
  const Tensor *dk = kvShaped(g, kDk, p, c.dk);
  const Tensor *dv = kvShaped(g, kDv, p, c.dv);
  const Tensor *rowDot = rowTensor(g, kRowDot, p);
  const Tensor *accumulator = g.tensor(
      kDqAccum, CUDNN_DATA_FLOAT, {p.batch, p.heads, p.seq, p.dim},
      {p.heads * p.seq * p.dim, p.seq * p.dim, p.dim, 1}, TensorKind::Memory);
  Scalars scalars;
  scalars.scale = g.scalar(kScale);
  scalars.one = g.scalar(kOne);
  if (p.causal)
    scalars.negInf = g.scalar(kNegInf);

  std::vector<int64_t> dims = {p.batch, p.heads, p.seq, p.kvSeq};
  // Transposes of [B, Hq, S, Skv] tensors, as [B, Hq, Skv, S].
  std::vector<int64_t> transposedDims = {p.batch, p.heads, p.kvSeq, p.seq};
  std::vector<int64_t> transposed = {p.heads * p.seq * p.kvSeq, p.seq * p.kvSeq,
                                     1, p.kvSeq};

  const Tensor *products = g.intermediate({p.batch, p.heads, p.seq, p.dim});
  g.pointwise(CUDNN_POINTWISE_MUL, dout, products, out);
  const Tensor *sums = g.intermediate({p.batch, p.heads, p.seq, 1});
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, products, sums);
  g.pointwise(CUDNN_POINTWISE_MUL, sums, rowDot, scalars.one);

  const Tensor *x = scores(g, p, q, kT, scalars);
  const Tensor *shifted = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_SUB, x, shifted, lse);
  const Tensor *probabilities = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, probabilities);
  const Tensor *probabilitiesT =
      g.intermediate(transposedDims, CUDNN_DATA_BFLOAT16, transposed);
  g.reshape(probabilities, probabilitiesT);
  intoKeyHeads(g, p, probabilitiesT, dout, dv);

  const Tensor *dP = g.intermediate(dims);
  g.matmul(dout, vT, dP);
  const Tensor *centered = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_SUB, dP, centered, rowDot);
  const Tensor *unscaled = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_MUL, centered, unscaled, probabilities);
  const Tensor *dS = g.intermediate(dims);
  g.pointwise(CUDNN_POINTWISE_MUL, unscaled, dS, scalars.scale);
  const Tensor *dST =
      g.intermediate(transposedDims, CUDNN_DATA_BFLOAT16, transposed);
  g.reshape(dS, dST);
  intoKeyHeads(g, p, dST, q, dk);

  const Tensor *k = g.intermediate({p.batch, p.kvHeads, p.kvSeq, p.dim},
                                   CUDNN_DATA_FLOAT, stridesOf(c.k));
  g.reshape(kT, k);
  g.matmul(dS, k, accumulator);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, accumulator, dq);
}

} // namespace

/// A context's cuDNN: the handle on its stream and the plans by call.
struct State {
  cudnnHandle_t handle = nullptr;
  /// Why cuDNN cannot run here ("" when it can).
  std::string unavailable;
  std::map<std::vector<int64_t>, Entry> plans;
};

void destroy(State *state) {
  if (!state)
    return;
  state->plans.clear(); // the descriptors before the handle
  if (state->handle)
    cudnnDestroy(state->handle);
  delete state;
}

namespace {

/// The context's cuDNN, created at its first use; null, with the reason in
/// `refusal`, when cuDNN cannot run.
State *stateOf(loom_cuda_context *context, std::string &refusal) {
  if (!context->cudnn) {
    auto *state = new State;
    context->cudnn = state;
    size_t version = cudnnGetVersion();
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    if (version < kMinVersion)
      state->unavailable =
          "cuDNN " + std::to_string(version) + " is older than 9.0";
    else if ((status = cudnnCreate(&state->handle)) != CUDNN_STATUS_SUCCESS)
      state->unavailable = "cudnnCreate: " + describe(status);
    else if ((status = cudnnSetStream(state->handle, context->stream)) !=
             CUDNN_STATUS_SUCCESS)
      state->unavailable = "cudnnSetStream: " + describe(status);
  }
  State *state = context->cudnn;
  if (!state->unavailable.empty()) {
    refusal = state->unavailable;
    return nullptr;
  }
  return state;
}

/// What identifies a plan: the direction, the problem and every tensor's
/// strides (the scale is passed by value at each call).
std::vector<int64_t> keyOf(int64_t direction, const Problem &p,
                           std::initializer_list<const Strided *> tensors) {
  std::vector<int64_t> key = {direction, p.batch, p.heads, p.kvHeads,
                              p.seq,     p.kvSeq, p.dim,   p.causal};
  for (const Strided *t : tensors)
    key.insert(key.end(), {t->batch, t->head, t->seq});
  return key;
}

/// Whether every tensor in memory is where the graphs promise cuDNN it is:
/// 16-byte aligned, rows too.
bool aligned16(std::initializer_list<const Strided *> tensors,
               std::initializer_list<const void *> others) {
  for (const Strided *t : tensors)
    if (reinterpret_cast<uintptr_t>(t->data) % Graph::kAlignment != 0 ||
        (t->batch | t->head | t->seq) % (Graph::kAlignment / 2) != 0)
      return false;
  for (const void *pointer : others)
    if (reinterpret_cast<uintptr_t>(pointer) % Graph::kAlignment != 0)
      return false;
  return true;
}

/// The cached entry of `key`, its plan built by `build` if new.
template <typename Build>
Entry &entryFor(State &state, std::vector<int64_t> key, Build build) {
  auto [it, isNew] = state.plans.try_emplace(std::move(key));
  Entry &entry = it->second;
  if (isNew) {
    Graph graph;
    build(graph);
    entry.ok = graph.error().empty() && graph.plan(state.handle, entry.plan);
    if (!entry.ok)
      entry.refusal = graph.error();
  }
  return entry;
}

/// Runs `entry`'s plan with its workspace at `workspace`; a failure
/// refuses this call and every later one like it.
Outcome run(State &state, Entry &entry, const std::vector<int64_t> &uids,
            const std::vector<void *> &pointers, void *workspace) {
  std::string error;
  if (execute(state.handle, entry.plan, uids, pointers, workspace, error)) {
    entry.ok = false;
    entry.refusal = error;
    return {false, -1, error};
  }
  return {true, entry.plan.engine, ""};
}

} // namespace

Outcome forward(loom_cuda_context *context, const Forward &c) {
  std::string refusal;
  State *state = stateOf(context, refusal);
  if (!state)
    return {false, -1, refusal};
  if (!aligned16({&c.q, &c.k, &c.v, &c.out}, {c.lse}))
    return {false, -1, "a tensor is not 16-byte aligned"};
  Entry &entry =
      entryFor(*state, keyOf(0, c.problem, {&c.q, &c.k, &c.v, &c.out}),
               [&](Graph &g) { buildForward(g, c); });
  if (!entry.ok)
    return {false, -1, entry.refusal};
  if (growScratch(context, "attention", entry.plan.workspaceBytes))
    return {false, -1, loom_cuda_last_error()};
  float scale = c.problem.scale, negInf = -FLT_MAX;
  std::vector<int64_t> uids = {kQ, kK, kV, kOut, kLse, kScale};
  std::vector<void *> pointers = {c.q.data,   c.k.data, c.v.data,
                                  c.out.data, c.lse,    &scale};
  if (c.problem.causal) {
    uids.push_back(kNegInf);
    pointers.push_back(&negInf);
  }
  return run(*state, entry, uids, pointers, context->scratch);
}

Outcome backward(loom_cuda_context *context, const Backward &c) {
  std::string refusal;
  State *state = stateOf(context, refusal);
  if (!state)
    return {false, -1, refusal};
  if (!aligned16({&c.dout, &c.q, &c.k, &c.v, &c.out, &c.dq, &c.dk, &c.dv},
                 {c.lse}))
    return {false, -1, "a tensor is not 16-byte aligned"};
  const Problem &p = c.problem;
  Entry &entry = entryFor(
      *state,
      keyOf(1, p, {&c.dout, &c.q, &c.k, &c.v, &c.out, &c.dq, &c.dk, &c.dv}),
      [&](Graph &g) { buildBackward(g, c); });
  if (!entry.ok)
    return {false, -1, entry.refusal};
  int64_t rowDotBytes = aligned(4 * p.batch * p.heads * p.seq);
  int64_t accumulatorBytes = aligned(4 * p.batch * p.heads * p.seq * p.dim);
  int64_t before = rowDotBytes + accumulatorBytes;
  if (growScratch(context, "attention_grad",
                  before + entry.plan.workspaceBytes))
    return {false, -1, loom_cuda_last_error()};
  char *scratch = static_cast<char *>(context->scratch);
  if (cudnnGetVersion() < kSelfZeroingVersion &&
      cudaMemsetAsync(scratch + rowDotBytes, 0, accumulatorBytes,
                      context->stream) != cudaSuccess) {
    cudaGetLastError();
    return {false, -1, "cannot zero the dQ accumulator"};
  }
  float scale = p.scale, negInf = -FLT_MAX, one = 1.0f;
  std::vector<int64_t> uids = {kQ,  kK,  kV,     kOut, kDout,   kLse,    kDq,
                               kDk, kDv, kScale, kOne, kRowDot, kDqAccum};
  std::vector<void *> pointers = {c.q.data,
                                  c.k.data,
                                  c.v.data,
                                  c.out.data,
                                  c.dout.data,
                                  const_cast<float *>(c.lse),
                                  c.dq.data,
                                  c.dk.data,
                                  c.dv.data,
                                  &scale,
                                  &one,
                                  scratch,
                                  scratch + rowDotBytes};
  if (p.causal) {
    uids.push_back(kNegInf);
    pointers.push_back(&negInf);
  }
  return run(*state, entry, uids, pointers, scratch + before);
}

#endif // LOOM_HAVE_CUDNN

} // namespace loom::cuda::cudnn
