//===- ModelCosts.cpp - A model's per-device programs, costed -------------===//
//
// Builds the per-device programs of a model (ModelCosts.h) through the
// importer and the pipeline it is given (--loom-autodiff), and costs them
// op by op (OpCost.h) with the activations they save (MemoryModel.h).
//
//===----------------------------------------------------------------------===//

#include "ModelCosts.h"

#include "loom/CostModel/OpCost.h"
#include "loom/Import/ModelImporter.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace loom::cost;

namespace loom::plan::detail {

double savedBytes(llvm::ArrayRef<std::pair<SavedValue, bool>> saved,
                  Recompute recompute, bool sequenceParallel, int64_t tp) {
  double bytes = 0;
  for (const auto &[value, replicated] : saved) {
    if (recompute == Recompute::Selective && value.attentionCore)
      continue;
    bytes += value.bytes / (sequenceParallel && replicated ? double(tp) : 1);
  }
  return bytes;
}

namespace {

struct Program {
  OwningOpRef<ModuleOp> module;
  func::FuncOp forwardBackward;
};

/// The model's @forward_backward with `layers` layers on `seqLen` tokens.
llvm::Expected<Program>
differentiatedProgram(MLIRContext &context, const ModelConfig &config,
                      int64_t layers, const TrainingSetup &setup,
                      int64_t microBatch, int64_t seqLen,
                      const ProgramBuilder &build) {
  ModelConfig c = config;
  c.numLayers = layers;
  ImportOptions options;
  options.microBatch = microBatch;
  options.seqLen = seqLen;
  options.precision =
      setup.mixedPrecision ? loom::Precision::BF16 : loom::Precision::F32;
  auto module = importModel(context, c, options);
  if (!module)
    return module.takeError();
  if (failed(build(**module, setup.unfusedAttention)))
    return llvm::createStringError(
        "building @forward_backward (--loom-device-program-pipeline) failed");
  Program program;
  program.module = std::move(*module);
  program.forwardBackward =
      program.module->lookupSymbol<func::FuncOp>("forward_backward");
  return program;
}

/// Costs of one per-device program, split into the embedding (gather and
/// scatter of the token table) and everything else; `global` is the same
/// program at full tensor-parallel widths, op for op.
struct ProgramCost {
  PartCost embedding, rest;
  double temporaries = 0;
};

ProgramCost costProgram(func::FuncOp localFn, func::FuncOp globalFn,
                        const DeviceSpec &device,
                        const ActivationOptions &activations, bool tpSplit) {
  llvm::SmallVector<Operation *> localOps, globalOps;
  for (Operation &op : localFn.getBody().front())
    localOps.push_back(&op);
  for (Operation &op : globalFn.getBody().front())
    globalOps.push_back(&op);
  bool aligned = localOps.size() == globalOps.size();
  llvm::DenseMap<Operation *, bool> replicated;
  for (size_t i = 0; i < localOps.size(); ++i) {
    bool same = !tpSplit;
    if (tpSplit && aligned &&
        localOps[i]->getName() == globalOps[i]->getName()) {
      // Same operand and result shapes: the op does the same work on
      // every rank (a row-parallel matmul has the full result but half
      // the operands).
      same = llvm::equal(localOps[i]->getOperandTypes(),
                         globalOps[i]->getOperandTypes()) &&
             llvm::equal(localOps[i]->getResultTypes(),
                         globalOps[i]->getResultTypes());
    }
    replicated[localOps[i]] = same;
  }

  ProgramCost cost;
  llvm::DenseSet<Operation *> forward = forwardOps(localFn);
  llvm::DenseSet<Value> batchDependent = batchDependentValues(localFn);
  auto partOf = [&](Operation *op) -> PartCost & {
    return isa<EmbeddingOp, EmbeddingGradOp>(op) ? cost.embedding : cost.rest;
  };
  for (Operation *op : localOps) {
    OpWork work = getOpWork(op);
    double seconds = opTime(work, device);
    PartCost &part = partOf(op);
    part.modelFlops += work.modelFlops;
    if (!llvm::any_of(op->getResults(), [&](Value result) {
          return batchDependent.contains(result);
        })) {
      part.perStep += seconds;
      continue;
    }
    bool isForward = forward.contains(op), isReplicated = replicated[op];
    (isForward ? part.forward : part.backward) += seconds;
    if (isReplicated)
      (isForward ? part.forwardReplicated : part.backwardReplicated) += seconds;
    if (isForward && op->hasAttr(kAttentionCoreAttr))
      part.coreForward += seconds;
    if (isa<AttentionOp>(op))
      part.attentionForward += seconds;
    if (isa<AttentionGradOp>(op))
      part.attentionBackward += seconds;
  }
  llvm::SmallVector<SavedValue> saved =
      findSavedActivations(localFn, activations);
  for (const SavedValue &value : saved) {
    Operation *producer = value.value.getDefiningOp();
    // Megatron's vocabulary-parallel embedding ends in an all-reduce of its
    // output, a reduce-scatter along the sequence under sequence
    // parallelism (Korthikanti et al. 2023 §4.2.2): what the first layer
    // keeps of it is the hidden state, split as a replicated op's output is.
    bool split =
        replicated[producer] || (tpSplit && isa<EmbeddingOp>(producer));
    partOf(producer).saved.push_back({value, split});
  }
  cost.temporaries = peakTemporaryBytes(localFn, saved);
  return cost;
}

/// Megatron's split of `config` over `tp` ranks: heads, key/value heads, MLP
/// width and (padded) vocabulary divided, head dimension and hidden kept.
ModelConfig tensorParallelShard(const ModelConfig &config, int64_t tp) {
  ModelConfig local = config;
  local.numHeads /= tp;
  local.numKVHeads /= tp;
  local.intermediate /= tp;
  local.vocab = (config.vocab + tp - 1) / tp;
  return local;
}

} // namespace

ParamCounts countParams(const ModelConfig &config, bool tiedCopy) {
  ParamCounts counts;
  for (const ParamSpec &param : listParameters(config)) {
    double n = double(param.numElements());
    llvm::StringRef name = param.name;
    counts.total += n;
    if (name.contains(".h.0.") || name.contains(".layers.0."))
      counts.layer += n;
    else if (name.contains(".h.") || name.contains(".layers."))
      continue;
    else if (name.contains("wte") || name.contains("wpe") ||
             name.contains("embed_tokens")) {
      counts.embedding += n;
      if (tiedCopy && !name.contains("wpe"))
        counts.head += n;
    } else
      counts.head += n;
  }
  return counts;
}

/// Costs the per-device programs without layers and with one, and their
/// full-width twins (for the replicated ops and the model FLOPs), on the
/// 1/cp of each sequence a context-parallel device holds.
llvm::Expected<std::unique_ptr<ModelCosts>>
costModel(MLIRContext &context, const ModelConfig &config,
          const DeviceSpec &device, int64_t tp, int64_t microBatch, int64_t cp,
          const TrainingSetup &setup, const ProgramBuilder &build) {
  ModelConfig local = tensorParallelShard(config, tp);
  int64_t seq = setup.seqLen ? setup.seqLen : config.maxPositions;
  ProgramCost costs[2];
  double fullFlops[2];
  for (int64_t layers : {0, 1}) {
    auto localProgram = differentiatedProgram(context, local, layers, setup,
                                              microBatch, seq / cp, build);
    if (!localProgram)
      return localProgram.takeError();
    auto globalProgram = differentiatedProgram(context, config, layers, setup,
                                               microBatch, seq / cp, build);
    if (!globalProgram)
      return globalProgram.takeError();
    costs[layers] = costProgram(localProgram->forwardBackward,
                                globalProgram->forwardBackward, device,
                                setup.activations, tp > 1);
    // The whole sequence's model FLOPs: cp times the work per token of its
    // 1/cp, cp² times attention's (per pair of tokens): cp to the op's
    // sequence exponent.
    fullFlops[layers] = 0;
    for (Operation &op : globalProgram->forwardBackward.getBody().front()) {
      auto costed = dyn_cast<OpCostInterface>(&op);
      double flops = getOpWork(&op).modelFlops * double(cp);
      for (int e = 1; e < (costed ? costed.getSequenceExponent() : 1); ++e)
        flops *= double(cp);
      fullFlops[layers] += flops;
    }
  }
  auto result = std::make_unique<ModelCosts>();
  ModelCosts &model = *result;
  model.embedding = costs[0].embedding;
  model.head = costs[0].rest;
  model.layer = costs[1].embedding;
  model.layer.add(costs[1].rest);
  model.layer.subtract(model.embedding);
  model.layer.subtract(model.head);
  model.oneLayerSaved = costs[1].rest.saved;
  llvm::append_range(model.oneLayerSaved, costs[1].embedding.saved);
  model.temporaries = costs[1].temporaries;
  model.modelFlops =
      fullFlops[0] + double(config.numLayers) * (fullFlops[1] - fullFlops[0]);
  model.params = countParams(local, /*tiedCopy=*/false);
  model.paramsTiedCopy = countParams(local, config.tieEmbeddings);
  model.totalParams = countParams(config, false).total;
  return std::move(result);
}

} // namespace loom::plan::detail
