//===- loom-plan.cpp - Estimating a parallel plan of a training step ------===//
//
//   loom-plan CONFIG.json --cluster SPEC --global-batch B [--seq S]
//             --dp D --tp T --pp P --micro-batch M [--zero 0|1|2|3]
//             [--recompute none|selective|full]
//             [--schedule gpipe|1f1b|interleaved-1f1b|zb-h1]
//             [--virtual-stages V] [--timeline FILE.json|FILE.svg]
//             [--sequence-parallel] [--precision bf16|f32]
//             [--optimizer adamw|sgd] [--unfused-attention]
//             [--store-dropout-masks] --estimate [--json]
//
// Prints, for that manual plan, the predicted step time (compute, exposed
// communication, pipeline bubble, optimizer), tokens/s, MFU and the memory
// of the fullest device (see loom/Planner/Estimate.h for the model). A plan
// that cannot run (degrees not matching the cluster or not dividing the
// model) is an error with the reason; one that runs out of memory is an
// estimate with `fits: false`. --timeline draws the estimated step's
// pipeline schedule (loom/Schedule/Timeline.h).
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/Estimate.h"
#include "loom/Schedule/Timeline.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
using namespace loom;

namespace {
cl::OptionCategory category("loom-plan options");

cl::opt<std::string> configPath(cl::Positional, cl::Required,
                                cl::desc("<config.json>"), cl::cat(category));
cl::opt<std::string> clusterArg(
    "cluster", cl::Required, cl::cat(category), cl::value_desc("spec"),
    cl::desc("Cluster: a preset (a100-80g, h100-80g, h200, cpu-local) or a "
             "spec file, optionally with :NODES (a100-80g:128)"));
cl::opt<int64_t> globalBatch("global-batch", cl::Required, cl::cat(category),
                             cl::desc("Sequences per training step"));
cl::opt<int64_t> seqLen("seq", cl::init(0), cl::cat(category),
                        cl::desc("Tokens per sequence (default: the "
                                 "model's maximum)"));
cl::opt<int64_t> dp("dp", cl::init(1), cl::cat(category),
                    cl::desc("Data-parallel degree D (default 1)"));
cl::opt<int64_t> tp("tp", cl::init(1), cl::cat(category),
                    cl::desc("Tensor-parallel degree T, Megatron-style "
                             "(default 1)"));
cl::opt<int64_t> pp("pp", cl::init(1), cl::cat(category),
                    cl::desc("Pipeline stages P (default 1)"));
cl::opt<int64_t> microBatch("micro-batch", cl::init(1), cl::cat(category),
                            cl::desc("Sequences per micro-batch on one "
                                     "data-parallel rank (default 1)"));
cl::opt<unsigned> zero("zero", cl::init(0), cl::cat(category),
                       cl::desc("ZeRO stage 0-3 over the data-parallel "
                                "devices (default 0)"));
cl::opt<cost::Recompute> recompute(
    "recompute", cl::init(cost::Recompute::None), cl::cat(category),
    cl::desc("Activation recomputation"),
    cl::values(clEnumValN(cost::Recompute::None, "none", "keep everything"),
               clEnumValN(cost::Recompute::Selective, "selective",
                          "recompute the attention core"),
               clEnumValN(cost::Recompute::Full, "full",
                          "keep only each layer's input")));
cl::opt<plan::Schedule> schedule(
    "schedule", cl::init(plan::Schedule::OneFOneB), cl::cat(category),
    cl::desc("Pipeline schedule"),
    cl::values(clEnumValN(plan::Schedule::GPipe, "gpipe",
                          "all forwards, then all backwards"),
               clEnumValN(plan::Schedule::OneFOneB, "1f1b",
                          "one forward, one backward (default)"),
               clEnumValN(plan::Schedule::Interleaved1F1B, "interleaved-1f1b",
                          "Megatron-LM's interleaved 1F1B over "
                          "--virtual-stages"),
               clEnumValN(plan::Schedule::ZeroBubbleH1, "zb-h1",
                          "zero bubble H1 (Qi et al. 2023)")));
cl::opt<int64_t> virtualStages(
    "virtual-stages", cl::init(1), cl::cat(category),
    cl::desc("Stages per pipeline rank for interleaved-1f1b (default 1)"));
cl::opt<std::string> timelinePath(
    "timeline", cl::cat(category), cl::value_desc("file"),
    cl::desc("Write the estimated step's pipeline schedule: a Chrome "
             "trace (.json, opens in Perfetto) or a picture (.svg)"));
cl::opt<bool> sequenceParallel(
    "sequence-parallel", cl::cat(category),
    cl::desc("Split the ops tensor parallelism replicates along the "
             "sequence (Korthikanti et al.)"));
cl::opt<bool> mixedPrecision(
    "mixed-precision", cl::init(true), cl::cat(category),
    cl::desc("bf16 compute with f32 master weights (default true; "
             "--mixed-precision=false: f32 throughout)"));
cl::opt<cost::OptimizerKind> optimizer(
    "optimizer", cl::init(cost::OptimizerKind::AdamW), cl::cat(category),
    cl::desc("Optimizer (its states)"),
    cl::values(clEnumValN(cost::OptimizerKind::AdamW, "adamw",
                          "AdamW (default)"),
               clEnumValN(cost::OptimizerKind::SGD, "sgd", "plain SGD")));
cl::opt<bool> unfusedAttention(
    "unfused-attention", cl::cat(category),
    cl::desc("Cost attention as --loom-decompose-attention leaves it "
             "(matmul, softmax, dropout, matmul) instead of the fused "
             "kernel"));
cl::opt<bool> storeDropoutMasks(
    "store-dropout-masks", cl::cat(category),
    cl::desc("Count a 1-byte mask per dropout element as Megatron-LM's "
             "kernels keep (Loom regenerates masks and keeps none)"));
cl::opt<bool> estimateFlag("estimate", cl::cat(category),
                           cl::desc("Estimate the plan given by --dp, --tp, "
                                    "--pp and --micro-batch"));
cl::opt<bool> jsonOutput("json", cl::cat(category),
                         cl::desc("Print the estimate as JSON"));

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-plan") << message << "\n";
  return 1;
}

/// Bytes in the largest binary unit that keeps at least 1 in front.
std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024) {
    bytes /= 1024;
    ++unit;
  }
  return formatv("{0:f2} {1}", bytes, units[unit]).str();
}

/// "1f1b", "interleaved-1f1b (V=2)".
std::string scheduleName(const plan::ParallelPlan &p) {
  std::string name = plan::stringifySchedule(p.schedule).str();
  if (p.virtualStages > 1)
    name += formatv(" (V={0})", p.virtualStages).str();
  return name;
}

void printText(const plan::Estimate &e, const plan::ParallelPlan &p,
               const cost::ClusterSpec &cluster, raw_ostream &os) {
  os << formatv("plan:        D={0} T={1} P={2}, micro-batch {3} x {4} "
                "micro-batches, {5}, ZeRO-{6}, recompute {7}{8}\n",
                p.dp, p.tp, p.pp, p.microBatch, e.numMicroBatches,
                scheduleName(p), int(p.zero),
                cost::stringifyRecompute(p.recompute),
                p.sequenceParallel ? ", sequence parallel" : "");
  os << formatv("cluster:     {0}: {1} nodes x {2} devices ({3})\n",
                cluster.name, cluster.nodes, cluster.devicesPerNode,
                cluster.device.name);
  os << formatv("model:       {0:e3} parameters, {1:e3} model FLOPs per "
                "step\n",
                e.numParams, e.modelFlopsPerStep);
  if (!e.notes.empty())
    os << "note:        " << e.notes << "\n";
  os << formatv("step time:   {0:f4} s = compute {1:f4} s + exposed "
                "communication {2:f4} s + pipeline bubble {3:f4} s\n",
                e.stepTime, e.compute, e.exposedComm, e.bubble);
  os << formatv("             (compute includes {0:f4} s once per step: the "
                "optimizer and the weights' compute copies)\n",
                e.optimizer);
  os << formatv("throughput:  {0:f1} tokens/s, MFU {1:f1}%\n",
                e.tokensPerSecond, 100 * e.mfu);
  const plan::MemoryBreakdown &m = e.memory;
  os << formatv("memory:      stage {0}, per device: parameters {1}, "
                "gradients {2}, optimizer states {3}, activations {4}, "
                "temporaries {5}\n",
                e.peakStage, formatBytes(m.params), formatBytes(m.grads),
                formatBytes(m.optimizerStates), formatBytes(m.activations),
                formatBytes(m.temporaries));
  os << formatv("             peak {0} of {1}: {2}\n", formatBytes(m.peak()),
                formatBytes(e.deviceMemory), e.fits ? "fits" : "does NOT fit");
}

json::Value toJSON(const plan::Estimate &e, const plan::ParallelPlan &p) {
  const plan::MemoryBreakdown &m = e.memory;
  return json::Object{
      {"plan",
       json::Object{{"dp", p.dp},
                    {"tp", p.tp},
                    {"pp", p.pp},
                    {"micro_batch", p.microBatch},
                    {"num_micro_batches", e.numMicroBatches},
                    {"schedule", plan::stringifySchedule(p.schedule)},
                    {"virtual_stages", p.virtualStages},
                    {"zero", int(p.zero)},
                    {"sequence_parallel", p.sequenceParallel},
                    {"recompute", cost::stringifyRecompute(p.recompute)}}},
      {"step_time_s", e.stepTime},
      {"compute_s", e.compute},
      {"exposed_comm_s", e.exposedComm},
      {"bubble_s", e.bubble},
      {"optimizer_s", e.optimizer},
      {"tokens_per_s", e.tokensPerSecond},
      {"mfu", e.mfu},
      {"model_flops_per_step", e.modelFlopsPerStep},
      {"parameters", e.numParams},
      {"fits", e.fits},
      {"memory_bytes", json::Object{{"params", m.params},
                                    {"grads", m.grads},
                                    {"optimizer_states", m.optimizerStates},
                                    {"activations", m.activations},
                                    {"temporaries", m.temporaries},
                                    {"peak", m.peak()},
                                    {"capacity", e.deviceMemory},
                                    {"stage", e.peakStage}}},
      {"activations_per_layer_bytes", e.activationsPerLayer},
      {"notes", e.notes},
  };
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom's planner: estimate a parallel plan of a training step\n");

  if (!estimateFlag)
    return fail("choosing a plan automatically is not available yet; give "
                "the plan with --dp/--tp/--pp/--micro-batch and --estimate");
  if (zero > 3)
    return fail(formatv("--zero={0}: the ZeRO stage must be 0, 1, 2 or 3",
                        zero.getValue()));
  if (globalBatch < 1 || seqLen < 0)
    return fail("--global-batch must be positive and --seq non-negative");
  StringRef timeline = timelinePath;
  if (!timeline.empty() && !timeline.ends_with(".json") &&
      !timeline.ends_with(".svg"))
    return fail("--timeline=" + timeline +
                ": the file must end in .json (Chrome trace) or .svg");

  auto buffer = MemoryBuffer::getFile(configPath);
  if (!buffer)
    return fail(configPath + ": " + buffer.getError().message());
  auto config = parseModelConfig((*buffer)->getBuffer(), configPath);
  if (!config)
    return fail(toString(config.takeError()));
  auto cluster = cost::resolveClusterSpec(clusterArg);
  if (!cluster)
    return fail(toString(cluster.takeError()));

  plan::ParallelPlan parallel;
  parallel.dp = dp;
  parallel.tp = tp;
  parallel.pp = pp;
  parallel.microBatch = microBatch;
  parallel.zero = static_cast<cost::ZeroStage>(zero.getValue());
  parallel.recompute = recompute;
  parallel.schedule = schedule;
  parallel.virtualStages = virtualStages;
  parallel.sequenceParallel = sequenceParallel;
  plan::TrainingSetup setup;
  setup.globalBatch = globalBatch;
  setup.seqLen = seqLen;
  setup.mixedPrecision = mixedPrecision;
  setup.optimizer = optimizer;
  setup.unfusedAttention = unfusedAttention;
  setup.activations.storeDropoutMasks = storeDropoutMasks;

  mlir::MLIRContext context;
  context.loadDialect<LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  auto estimate =
      plan::estimatePlan(context, *config, *cluster, parallel, setup);
  if (!estimate)
    return fail("impossible plan: " + toString(estimate.takeError()));
  if (!timeline.empty()) {
    std::string title =
        formatv("{0}: D={1} T={2} P={3} V={4}, micro-batch {5} x {6}",
                plan::stringifySchedule(parallel.schedule), parallel.dp,
                parallel.tp, parallel.pp, parallel.virtualStages,
                parallel.microBatch, estimate->numMicroBatches);
    Error error = timeline.ends_with(".svg")
                      ? sched::writeSvg(estimate->pipeline, timeline, title)
                      : sched::writeChromeTrace(estimate->pipeline, timeline);
    if (error)
      return fail(toString(std::move(error)));
  }
  if (jsonOutput)
    outs() << formatv("{0:2}", toJSON(*estimate, parallel)) << "\n";
  else
    printText(*estimate, parallel, *cluster, outs());
  return 0;
}
