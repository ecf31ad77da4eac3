//===- Estimate.h - Step time and memory of a manual parallel plan -*- C++ -*-//
//
// `loom-plan --estimate`: for a model, a cluster and a plan that fixes the
// data/tensor/pipeline degrees, micro-batch, ZeRO stage, recomputation and
// pipeline schedule, predicts the step time (compute, exposed
// communication, pipeline bubble), throughput, MFU and the per-device
// memory, from the ops of the model's own @forward_backward.
//
// Tensor parallelism is Megatron-LM's (column-parallel QKV and MLP-up,
// row-parallel output projections, vocabulary-parallel embedding): the
// per-device program is the model with heads, key/value heads, MLP width and
// vocabulary divided by T, and its collectives are Megatron's (Shoeybi et
// al. 2019 §3; Korthikanti et al. 2023 §4.2 for sequence parallelism).
// Context parallelism splits every sequence over CP devices, attention's
// keys and values passed around their ring (Megatron-Core's context
// parallelism, Liu et al. 2023's ring attention). Ranks are ordered tensor
// fastest, then context, then data, then pipeline (Megatron-Core's order),
// so a tensor group of at most a node's devices stays inside the node.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLANNER_ESTIMATE_H
#define LOOM_PLANNER_ESTIMATE_H

#include "loom/CostModel/ClusterSpec.h"
#include "loom/CostModel/MemoryModel.h"
#include "loom/Import/ModelConfig.h"
#include "loom/Planner/StageDP.h"
#include "loom/Schedule/Simulator.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace loom::plan {

/// The pipeline schedule: the planner's name for sched::ScheduleKind.
using Schedule = sched::ScheduleKind;
llvm::StringRef stringifySchedule(Schedule schedule);

/// How ranks map to devices (consecutive ranks share a node): tensor
/// fastest, then context, data, pipeline (Megatron-LM's order), or tensor,
/// context, pipeline, data (pipeline neighbours close, data-parallel
/// groups spread).
enum class RankOrder { TensorDataPipeline, TensorPipelineData };
llvm::StringRef stringifyRankOrder(RankOrder order); ///< "tp-dp-pp", ...

struct ParallelPlan {
  int64_t dp = 1, tp = 1, pp = 1;
  /// Context-parallel degree: each sequence split over `cp` devices.
  int64_t cp = 1;
  /// Sequences per micro-batch on one data-parallel rank.
  int64_t microBatch = 1;
  cost::ZeroStage zero = cost::ZeroStage::None;
  cost::Recompute recompute = cost::Recompute::None;
  Schedule schedule = Schedule::OneFOneB;
  /// Stages per pipeline rank (V of interleaved-1f1b, else 1).
  int64_t virtualStages = 1;
  bool sequenceParallel = false;
  RankOrder rankOrder = RankOrder::TensorDataPipeline;
  /// Transformer layers of each pipeline stage, summing to the layer count:
  /// P entries, or for interleaved-1f1b P x V (the stages in pipeline
  /// order, stage s on rank s mod P; P entries are each rank's, split evenly
  /// over its V stages). The embedding is on stage 0, the head on the last;
  /// only those two may have no layers. Empty: the even split, L / P each
  /// with the first L mod P stages one more; interleaved, L / (P x V) each
  /// when that divides, else one less on the last and first stages, then
  /// the next ones inwards (126 layers on 16 x 8 stages: 0, 1, ..., 1, 0).
  std::vector<int64_t> stageLayers;
};

struct TrainingSetup {
  int64_t globalBatch = 1; ///< sequences per step
  int64_t seqLen = 0;      ///< 0: the model's maximum
  bool mixedPrecision = true;
  cost::OptimizerKind optimizer = cost::OptimizerKind::AdamW;
  /// Run --loom-decompose-attention (matmul, softmax, dropout, matmul)
  /// instead of costing the fused attention kernel.
  bool unfusedAttention = false;
  cost::ActivationOptions activations;
};

/// Bytes on one device.
struct MemoryBreakdown {
  double params = 0, grads = 0, optimizerStates = 0, activations = 0,
         temporaries = 0;
  double peak() const {
    return params + grads + optimizerStates + activations + temporaries;
  }
};

struct Estimate {
  int64_t numMicroBatches = 0;
  double stepTime = 0, compute = 0, exposedComm = 0, bubble = 0, optimizer = 0;
  double tokensPerSecond = 0, mfu = 0;
  double modelFlopsPerStep = 0;
  /// The device with the largest peak (a first-stage device under 1F1B).
  MemoryBreakdown memory;
  int64_t peakStage = 0;
  double deviceMemory = 0;
  bool fits = false;
  /// Per-layer saved activations on one device for one micro-batch (bytes),
  /// what Korthikanti et al. tabulate.
  double activationsPerLayer = 0;
  /// Parameters of the whole model and of the largest stage's device.
  double numParams = 0, numParamsPerDevice = 0;
  /// Adjustments made to the model, e.g. the padded vocabulary.
  std::string notes;
  /// Transformer layers of each stage (the plan's, or the even split): P
  /// entries, or P x V in pipeline order for interleaved-1f1b.
  std::vector<int64_t> stageLayers;
  /// The simulated step of the pipeline schedule (sched::simulate), for
  /// `loom-plan --timeline`.
  sched::Simulation pipeline;
};

/// Why `plan` cannot run `config` on `cluster` (degrees that do not match
/// the device count or divide the model), or an empty string.
std::string checkPlan(const ModelConfig &config,
                      const cost::ClusterSpec &cluster,
                      const ParallelPlan &plan, const TrainingSetup &setup);

namespace detail {
struct ModelCosts;
} // namespace detail

/// Builds @forward_backward of an imported @forward in place, with
/// --loom-decompose-attention first when `decomposeAttention`. The tools
/// give loom::buildForwardBackward (passes/Pipelines/Pipelines.h): the
/// planner is a library below the passes, so it is handed the pipeline
/// that builds the programs it costs rather than running passes itself.
using ProgramBuilder = std::function<mlir::LogicalResult(
    mlir::ModuleOp module, bool decomposeAttention)>;

/// Estimates many plans of one model, cluster and setup. The model's costs
/// (its per-device programs built and costed op by op) depend only on the
/// tensor-parallel degree, the micro-batch and the context-parallel degree:
/// they are computed once per triple and cached, so estimating a plan
/// afterwards is arithmetic.
class PlanEvaluator {
public:
  PlanEvaluator(mlir::MLIRContext &context, const ModelConfig &config,
                const cost::ClusterSpec &cluster, const TrainingSetup &setup,
                ProgramBuilder buildProgram);
  ~PlanEvaluator();

  /// The estimate; an error for an impossible plan (checkPlan's reason) or
  /// a model the importer refuses. `simulate`: time the pipeline with the
  /// schedule's simulator (sched::simulate, filling Estimate::pipeline);
  /// otherwise with the closed forms of the schedules' bubbles, what a
  /// search screens thousands of plans with.
  llvm::Expected<Estimate> estimate(const ParallelPlan &plan,
                                    bool simulate = true);

  /// The chain of the stage DP for `plan` (its stageLayers ignored): the
  /// embedding, the layers and the head with their seconds per micro-batch,
  /// model-state and activation bytes on one device, the micro-batches each
  /// stage keeps in flight and the device memory. ZeRO-3's parameter
  /// gathers, which overlap a stage's compute as a whole, are left out.
  /// Interleaved plans have P x V stages, each given a V-th of its rank's
  /// memory.
  llvm::Expected<StageProblem> stageProblem(const ParallelPlan &plan);

  /// (tensor-parallel degree, micro-batch, context-parallel degree)
  /// triples costed so far.
  size_t numCostedModels() const { return cache.size(); }

private:
  llvm::Expected<const detail::ModelCosts *>
  modelCosts(int64_t tp, int64_t microBatch, int64_t cp);

  mlir::MLIRContext &context;
  const ModelConfig &config;
  const cost::ClusterSpec &cluster;
  TrainingSetup setup;
  ProgramBuilder buildProgram;
  std::map<std::tuple<int64_t, int64_t, int64_t>,
           std::unique_ptr<detail::ModelCosts>>
      cache;
};

/// One plan's estimate (a PlanEvaluator used once).
llvm::Expected<Estimate>
estimatePlan(mlir::MLIRContext &context, const ModelConfig &config,
             const cost::ClusterSpec &cluster, const ParallelPlan &plan,
             const TrainingSetup &setup, ProgramBuilder buildProgram);

} // namespace loom::plan

#endif // LOOM_PLANNER_ESTIMATE_H
