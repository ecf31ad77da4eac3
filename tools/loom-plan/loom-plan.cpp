//===- loom-plan.cpp - Choosing and estimating parallel plans -------------===//
//
//   loom-plan CONFIG.json --cluster SPEC --global-batch B [--seq S]
//             [--top K] [--json] [any of the plan flags below, pinning it]
//
// (or MODEL.onnx instead of CONFIG.json: the graph is planned as the
// configuration of its family, which loom-import's recognizeModel reads
// from it; at its own sequence length unless --seq is given)
//
// searches every plan (loom/Planner/Search.h) and prints the fastest that
// fits with the next K - 1 and why each lost;
//
//   loom-plan CONFIG.json --cluster SPEC --global-batch B [--seq S]
//             --dp D --tp T --pp P [--cp C] --micro-batch M [--zero 0|1|2|3]
//             [--recompute none|selective|full]
//             [--schedule gpipe|1f1b|interleaved-1f1b|zb-h1]
//             [--virtual-stages V] [--layers L0,L1,...]
//             [--timeline FILE.json|FILE.svg]
//             [--sequence-parallel] [--mixed-precision[=false]]
//             [--optimizer adamw|sgd] [--unfused-attention]
//             [--store-dropout-masks] --estimate [--json]
//
// prints, for that manual plan, the predicted step time (compute, exposed
// communication, pipeline bubble, optimizer), tokens/s, MFU and the memory
// of the fullest device (see loom/Planner/Estimate.h for the model). A plan
// that cannot run (degrees not matching the cluster or not dividing the
// model) is an error with the reason; one that runs out of memory is an
// estimate with `fits: false`. --timeline draws the estimated step's
// pipeline schedule (loom/Schedule/Timeline.h).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/OnnxImporter.h"
#include "loom/Planner/Estimate.h"
#include "loom/Planner/Search.h"
#include "loom/Schedule/Timeline.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Support/InputFile.h"
#include "passes/Pipelines/Pipelines.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <cmath>
#include <memory>

using namespace llvm;
using namespace loom;

namespace {
cl::OptionCategory category("loom-plan options");

cl::opt<std::string> configPath(cl::Positional, cl::Required,
                                cl::desc("<config.json | model.onnx>"),
                                cl::cat(category));
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
                    cl::desc("Data-parallel degree D (--estimate: default 1; "
                             "a search tries every D unless given)"));
cl::opt<int64_t> tp("tp", cl::init(1), cl::cat(category),
                    cl::desc("Tensor-parallel degree T, Megatron-style "
                             "(--estimate: default 1; a search tries every T "
                             "unless given)"));
cl::opt<int64_t> pp("pp", cl::init(1), cl::cat(category),
                    cl::desc("Pipeline stages P (--estimate: default 1; a "
                             "search tries every P unless given)"));
cl::opt<int64_t> cp("cp", cl::init(1), cl::cat(category),
                    cl::desc("Context-parallel degree CP: each sequence split "
                             "over CP devices, attention's keys and values "
                             "passed around their ring (--estimate: default "
                             "1; a search tries every CP unless given)"));
cl::list<int64_t> stageLayersFlag(
    "layers", cl::CommaSeparated, cl::cat(category),
    cl::value_desc("L0,L1,..."),
    cl::desc("Transformer layers of each pipeline stage (--estimate): P "
             "counts, or P x V for interleaved-1f1b (default: even)"));
cl::opt<int64_t> microBatch("micro-batch", cl::init(1), cl::cat(category),
                            cl::desc("Sequences per micro-batch on one "
                                     "data-parallel rank (--estimate: default "
                                     "1; a search tries every size unless "
                                     "given)"));
cl::opt<unsigned> zero("zero", cl::init(0), cl::cat(category),
                       cl::desc("ZeRO stage 0-3, sharding over the D x CP "
                                "data- and context-parallel devices, which "
                                "hold the same parameters (--estimate: "
                                "default 0; a search tries every stage "
                                "unless given)"));
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
cl::opt<plan::RankOrder> rankOrder(
    "rank-order", cl::init(plan::RankOrder::TensorDataPipeline),
    cl::cat(category), cl::desc("How ranks map to nodes"),
    cl::values(clEnumValN(plan::RankOrder::TensorDataPipeline, "tp-dp-pp",
                          "tensor fastest, then data, then pipeline "
                          "(Megatron-LM's, default)"),
               clEnumValN(plan::RankOrder::TensorPipelineData, "tp-pp-dp",
                          "tensor fastest, then pipeline, then data")));
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
cl::opt<double> attentionEfficiency(
    "attention-efficiency", cl::init(0), cl::cat(category), cl::value_desc("F"),
    cl::desc("Cost the fused attention kernel at F of the peak on the work "
             "it does, the kernel your stack runs (default: the cluster's "
             "attention_efficiency)"));
cl::opt<bool> storeDropoutMasks(
    "store-dropout-masks", cl::cat(category),
    cl::desc("Count a 1-byte mask per dropout element as Megatron-LM's "
             "kernels keep (Loom regenerates masks and keeps none)"));
cl::opt<bool> estimateFlag("estimate", cl::cat(category),
                           cl::desc("Estimate the plan given by --dp, --tp, "
                                    "--pp and --micro-batch"));
cl::opt<bool> jsonOutput("json", cl::cat(category),
                         cl::desc("Print the estimate as JSON"));
cl::opt<double> searchSeconds(
    "search-seconds", cl::init(60), cl::cat(category), cl::value_desc("S"),
    cl::desc("Search: rank the plans estimated within S seconds (default 60; "
             "0: no limit)"));
cl::opt<int64_t> topK("top", cl::init(5), cl::cat(category),
                      cl::desc("Search: print the best plan and the next "
                               "K - 1 (default 5)"));

/// `value` in printf's %g: 0.35, 16.3, 1.5.
std::string shortNumber(double value) {
  std::string text;
  raw_string_ostream(text) << format("%g", value);
  return text;
}

int fail(const Twine &message) {
  WithColor::error(errs(), "loom-plan") << message << "\n";
  return 1;
}

/// Bounds of the command line's sizes.
constexpr int64_t kMaxGlobalBatch = int64_t(1) << 24;
constexpr int64_t kMaxDegree = int64_t(1) << 20;

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

/// "D=24 T=8 P=8, micro-batch 1 x 96 micro-batches, 1f1b, ZeRO-0, ..."
/// ("D=8 CP=16 T=8 P=16, ..." with context parallelism).
std::string describePlan(const plan::ParallelPlan &p, const plan::Estimate &e) {
  return formatv("D={0} {10}T={1} P={2}, micro-batch {3} x {4} "
                 "micro-batch{11}, {5}, ZeRO-{6}, recompute {7}{8}{9}",
                 p.dp, p.tp, p.pp, p.microBatch, e.numMicroBatches,
                 p.virtualStages > 1
                     ? formatv("{0} (V={1})",
                               plan::stringifySchedule(p.schedule),
                               p.virtualStages)
                           .str()
                     : plan::stringifySchedule(p.schedule).str(),
                 int(p.zero), cost::stringifyRecompute(p.recompute),
                 p.sequenceParallel ? ", sequence parallel" : "",
                 p.rankOrder == plan::RankOrder::TensorDataPipeline
                     ? ""
                     : ", ranks tp-pp-dp",
                 p.cp > 1 ? formatv("CP={0} ", p.cp).str() : "",
                 e.numMicroBatches == 1 ? "" : "es")
      .str();
}

/// The numbers an estimate prints must be finite: a NaN or infinity is a
/// defect of the cost model (or an absurd cluster spec that passed its
/// checks), which must be reported, never printed as a result (and NaN is
/// not JSON).
Error checkFinite(const plan::Estimate &e, const plan::ParallelPlan &p) {
  const plan::MemoryBreakdown &m = e.memory;
  std::pair<const char *, double> fields[] = {
      {"step time", e.stepTime},
      {"compute", e.compute},
      {"exposed communication", e.exposedComm},
      {"pipeline bubble", e.bubble},
      {"optimizer", e.optimizer},
      {"tokens/s", e.tokensPerSecond},
      {"MFU", e.mfu},
      {"model FLOPs", e.modelFlopsPerStep},
      {"parameters", e.numParams},
      {"parameter memory", m.params},
      {"gradient memory", m.grads},
      {"optimizer state memory", m.optimizerStates},
      {"activation memory", m.activations},
      {"temporary memory", m.temporaries},
      {"activations per layer", e.activationsPerLayer}};
  for (auto [name, value] : fields)
    if (!std::isfinite(value) || value < 0)
      return createStringError(
          inconvertibleErrorCode(),
          formatv("internal error: the cost model gives {0} = {1} for plan "
                  "{2}; this is a bug in Loom, please report it with the "
                  "command line",
                  name, value, describePlan(p, e)));
  return Error::success();
}

/// Transformer layers of each of the plan's P · V stages, in pipeline
/// order (the estimate's layout has them all).
std::vector<int64_t> chunkLayers(const plan::Estimate &e,
                                 const plan::ParallelPlan &) {
  return e.stageLayers;
}

/// "0: embedding + layers 0-9 | 1: layers 10-19 | ... + head"; with V
/// virtual stages each rank lists its V chunks ("0: embedding + layers 0-4,
/// 40-44 | ...").
std::string describeStages(const plan::Estimate &e,
                           const plan::ParallelPlan &p) {
  int64_t numRanks = p.pp, v = p.virtualStages;
  // Layer ranges of every stage (P · V of them, in pipeline order).
  std::vector<std::pair<int64_t, int64_t>> chunks;
  int64_t next = 0;
  for (int64_t layers : chunkLayers(e, p)) {
    chunks.push_back({next, next + layers});
    next += layers;
  }
  std::string text;
  for (int64_t r = 0; r < numRanks; ++r) {
    std::vector<std::string> ranges;
    for (int64_t c = r; c < numRanks * v; c += numRanks) {
      auto [begin, end] = chunks[c];
      if (end - begin == 1)
        ranges.push_back(formatv("{0}", begin).str());
      else if (end > begin)
        ranges.push_back(formatv("{0}-{1}", begin, end - 1).str());
    }
    std::vector<std::string> parts;
    if (r == 0)
      parts.push_back("embedding");
    if (!ranges.empty())
      parts.push_back(
          (ranges.size() == 1 && ranges[0].find('-') == std::string::npos
               ? "layer "
               : "layers ") +
          join(ranges.begin(), ranges.end(), ", "));
    if (r == (v > 1 ? (numRanks * v - 1) % numRanks : numRanks - 1))
      parts.push_back("head");
    text += formatv("{0}{1}: {2}", r ? " | " : "", r,
                    join(parts.begin(), parts.end(), " + "))
                .str();
  }
  return text;
}

/// The --loom-auto-shard options of a context-parallel plan: a mesh of
/// the data, context and tensor degrees above 1 (one pipeline rank's
/// grid), the context axis among them.
std::string contextFlags(const plan::ParallelPlan &p) {
  std::vector<std::string> axes;
  int64_t contextAxis = 0;
  for (auto [degree, isContext] :
       {std::pair{p.dp, false}, {p.cp, true}, {p.tp, false}}) {
    if (degree == 1)
      continue;
    if (isContext)
      contextAxis = int64_t(axes.size());
    axes.push_back(std::to_string(degree));
  }
  return formatv("--loom-auto-shard=\"func=train_step mesh={0} "
                 "context-axis={1}\"",
                 join(axes.begin(), axes.end(), "x"), contextAxis)
      .str();
}

/// The --loom-pipeline options that cut a step into this plan's stages
/// (docs/pipeline.md): one layer count per stage, P · V of them.
std::string pipelineFlags(const plan::Estimate &e,
                          const plan::ParallelPlan &p) {
  int64_t v = p.virtualStages;
  std::vector<std::string> layers;
  for (int64_t count : chunkLayers(e, p))
    layers.push_back(std::to_string(count));
  std::string flags =
      formatv("--loom-pipeline=\"stages={0} micro-batches={1} schedule={2}",
              p.pp, e.numMicroBatches, plan::stringifySchedule(p.schedule))
          .str();
  if (v > 1)
    flags += formatv(" virtual-stages={0}", v).str();
  if (p.recompute != cost::Recompute::None)
    flags +=
        formatv(" recompute={0}", cost::stringifyRecompute(p.recompute)).str();
  return flags + " layers=" + join(layers.begin(), layers.end(), ",") + "\"";
}

void printText(const plan::Estimate &e, const plan::ParallelPlan &p,
               const cost::ClusterSpec &cluster, raw_ostream &os,
               bool withStages = false) {
  os << "plan:        " << describePlan(p, e) << "\n";
  if (withStages && p.pp > 1)
    os << "stages:      " << describeStages(e, p) << "\n";
  if (withStages && (p.pp > 1 || p.cp > 1)) {
    std::vector<std::string> flags;
    if (p.pp > 1)
      flags.push_back(pipelineFlags(e, p));
    if (p.cp > 1)
      flags.push_back(contextFlags(p));
    os << "loom-opt:    " << join(flags.begin(), flags.end(), " ") << "\n";
  }
  os << formatv("cluster:     {0}: {1} node{2} x {3} device{4} ({5})\n",
                cluster.name, cluster.nodes, cluster.nodes == 1 ? "" : "s",
                cluster.devicesPerNode, cluster.devicesPerNode == 1 ? "" : "s",
                cluster.device.name);
  os << formatv("model:       {0:e3} parameters, {1:e3} model FLOPs per "
                "step\n",
                e.numParams, e.modelFlopsPerStep);
  os << "attention:   "
     << (unfusedAttention
             ? "unfused (--unfused-attention: matmul, softmax, dropout, "
               "matmul; keeps the scores and probabilities, what selective "
               "recomputation drops)"
             : formatv("fused kernel at {0}% of the peak ({1}; keeps its "
                       "output and log-sum-exp, no scores; "
                       "--unfused-attention for the decomposed form)",
                       shortNumber(100 *
                                   cluster.device.attentionEfficiencyOrGemm()),
                       attentionEfficiency.getNumOccurrences()
                           ? "--attention-efficiency"
                       : cluster.device.attentionEfficiency > 0
                           ? "the cluster's attention_efficiency"
                           : "the cluster's gemm_efficiency: its spec gives "
                             "no attention_efficiency")
                   .str())
     << "\n";
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
                    {"cp", p.cp},
                    {"micro_batch", p.microBatch},
                    {"num_micro_batches", e.numMicroBatches},
                    {"schedule", plan::stringifySchedule(p.schedule)},
                    {"virtual_stages", p.virtualStages},
                    {"stage_layers", json::Array(e.stageLayers)},
                    {"zero", int(p.zero)},
                    {"sequence_parallel", p.sequenceParallel},
                    {"recompute", cost::stringifyRecompute(p.recompute)},
                    {"rank_order", plan::stringifyRankOrder(p.rankOrder)}}},
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
      {"attention", unfusedAttention ? "unfused" : "fused"},
      {"notes", e.notes},
  };
}

/// --timeline: the estimated step's pipeline schedule, as a Chrome trace
/// (.json) or a picture (.svg).
int writeTimeline(const plan::Estimate &estimate, const plan::ParallelPlan &p,
                  StringRef path) {
  std::string title =
      formatv("{0}: D={1} {7}T={2} P={3} V={4}, micro-batch {5} x {6}",
              plan::stringifySchedule(p.schedule), p.dp, p.tp, p.pp,
              p.virtualStages, p.microBatch, estimate.numMicroBatches,
              p.cp > 1 ? formatv("CP={0} ", p.cp).str() : "");
  Error error = path.ends_with(".svg")
                    ? sched::writeSvg(estimate.pipeline, path, title)
                    : sched::writeChromeTrace(estimate.pipeline, path);
  if (error)
    return fail(toString(std::move(error)));
  return 0;
}

/// The dimensions the command line pins in search mode.
plan::SearchSpace pinnedSpace() {
  plan::SearchSpace space;
  if (dp.getNumOccurrences())
    space.dp = {dp};
  if (tp.getNumOccurrences())
    space.tp = {tp};
  if (pp.getNumOccurrences())
    space.pp = {pp};
  if (cp.getNumOccurrences())
    space.cp = {cp};
  if (microBatch.getNumOccurrences())
    space.microBatch = {microBatch};
  if (zero.getNumOccurrences())
    space.zero = {static_cast<cost::ZeroStage>(zero.getValue())};
  if (recompute.getNumOccurrences())
    space.recompute = {recompute};
  if (schedule.getNumOccurrences())
    space.schedules = {schedule};
  if (virtualStages.getNumOccurrences())
    space.virtualStages = {virtualStages};
  if (sequenceParallel.getNumOccurrences())
    space.sequenceParallel = {sequenceParallel};
  if (rankOrder.getNumOccurrences())
    space.rankOrders = {rankOrder};
  return space;
}

/// Progress on stderr: a counter redrawn in place on a terminal, a line
/// every 5 s otherwise (so short searches print nothing).
std::function<void(int64_t, int64_t)> progressReporter() {
  using Clock = std::chrono::steady_clock;
  bool terminal = sys::Process::StandardErrIsDisplayed();
  auto start = Clock::now();
  auto last = std::make_shared<Clock::time_point>(start);
  return [=](int64_t done, int64_t total) {
    auto now = Clock::now();
    double elapsed = std::chrono::duration<double>(now - start).count();
    if (terminal) {
      errs() << formatv("\rloom-plan: {0}/{1} plans ({2:f1} s)", done, total,
                        elapsed);
      if (done == total)
        errs() << "\r\033[K";
      errs().flush();
    } else if (done < total && now - *last >= std::chrono::seconds(5)) {
      errs() << formatv("loom-plan: {0} of {1} plans estimated ({2:f1} s)\n",
                        done, total, elapsed);
      *last = now;
    }
  };
}

std::string formatGiB(double bytes) {
  return formatv("{0:f2} GiB", bytes / double(1ull << 30)).str();
}

void printSearch(const plan::SearchResult &result, double seconds,
                 const cost::ClusterSpec &cluster, raw_ostream &os) {
  const plan::RankedPlan &best = result.best.front();
  os << formatv("search:      {0} plans on {1} devices in {2:f2} s ({3} "
                "costed programs, {4} pruned by a bound), {5} rejected for "
                "memory\n",
                result.numPlans, cluster.numDevices(), seconds,
                result.numCostedModels, result.numPruned,
                result.numRejectedForMemory);
  if (result.stoppedEarly())
    os << formatv("note:        the search stopped after {0} s with {1} of "
                  "{2} plans estimated (--search-seconds)\n",
                  searchSeconds.getValue(), result.numEstimated,
                  result.numPlans);
  printText(best.estimate, best.plan, cluster, os, /*withStages=*/true);
  if (result.best.size() > 1)
    os << "alternatives:\n";
  for (size_t i = 1; i < result.best.size(); ++i) {
    const plan::RankedPlan &alt = result.best[i];
    os << formatv("  {0}. {1}\n", i + 1, describePlan(alt.plan, alt.estimate));
    os << formatv("     {0:f4} s, {1:f1} tokens/s, MFU {2:f1}%, {3} per "
                  "device: {4}\n",
                  alt.estimate.stepTime, alt.estimate.tokensPerSecond,
                  100 * alt.estimate.mfu,
                  formatBytes(alt.estimate.memory.peak()),
                  plan::whyLost(best.estimate, alt.estimate));
  }
  if (const auto &closest = result.closestRejected)
    os << formatv("rejected:    {0} plans for memory; the closest needs {1} > "
                  "{2}: {3}\n",
                  result.numRejectedForMemory,
                  formatGiB(closest->estimate.memory.peak()),
                  formatGiB(closest->estimate.deviceMemory),
                  describePlan(closest->plan, closest->estimate));
}

json::Value searchToJSON(const plan::SearchResult &result, double seconds) {
  const plan::RankedPlan &best = result.best.front();
  json::Value value = toJSON(best.estimate, best.plan);
  json::Object &object = *value.getAsObject();
  object["planning_time_s"] = seconds;
  object["plans_considered"] = result.numPlans;
  object["plans_estimated"] = result.numEstimated;
  object["plans_pruned"] = result.numPruned;
  object["rejected_for_memory"] = result.numRejectedForMemory;
  if (const auto &closest = result.closestRejected) {
    json::Value rejected = toJSON(closest->estimate, closest->plan);
    object["closest_rejected"] = std::move(rejected);
  } else {
    object["closest_rejected"] = nullptr;
  }
  json::Array alternatives;
  for (size_t i = 1; i < result.best.size(); ++i) {
    const plan::RankedPlan &alt = result.best[i];
    json::Value entry = toJSON(alt.estimate, alt.plan);
    (*entry.getAsObject())["why_lost"] =
        plan::whyLost(best.estimate, alt.estimate);
    alternatives.push_back(std::move(entry));
  }
  object["alternatives"] = std::move(alternatives);
  return value;
}

/// The model's configuration: a config.json, or the family an ONNX graph
/// is (imported at --seq for a dynamic sequence axis).
Expected<ModelConfig> readModel(mlir::MLIRContext &context) {
  if (isOnnxPath(configPath)) {
    OnnxImportOptions options;
    options.seqLen = seqLen;
    options.parameterValues = false;
    auto imported = importOnnx(context, configPath, options);
    if (!imported)
      return imported.takeError();
    auto config = recognizeModel(*imported);
    if (!config)
      return createStringError(inconvertibleErrorCode(),
                               configPath + ": " +
                                   toString(config.takeError()));
    // A graph is planned at the sequence length it was imported for.
    if (!seqLen)
      seqLen = imported->report.seqLen;
    return config;
  }
  auto buffer = readInputFile(configPath, kMaxJsonFileBytes);
  if (!buffer)
    return buffer.takeError();
  return parseModelConfig((*buffer)->getBuffer(), configPath);
}

int search(mlir::MLIRContext &context, const ModelConfig &config,
           const cost::ClusterSpec &cluster, const plan::TrainingSetup &setup) {
  if (topK < 1)
    return fail("--top must be at least 1");
  if (!std::isfinite(searchSeconds) || searchSeconds < 0)
    return fail("--search-seconds must be a number of seconds >= 0 (0: no "
                "limit)");
  plan::PlanEvaluator evaluator(context, config, cluster, setup,
                                buildForwardBackward);
  plan::SearchOptions options;
  options.space = pinnedSpace();
  options.topK = topK;
  options.progress = progressReporter();
  options.timeLimitSeconds = searchSeconds;
  auto start = std::chrono::steady_clock::now();
  auto result = plan::searchPlans(evaluator, config, cluster, setup, options);
  if (!result)
    return fail(toString(result.takeError()));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (result->best.empty() && result->stoppedEarly()) {
    // The plans not estimated may well fit: say how far the search got.
    std::string closest;
    if (const auto &rejected = result->closestRejected)
      closest = formatv(", none of which fits in memory (the closest needs "
                        "{0} > {1} per device: {2})",
                        formatGiB(rejected->estimate.memory.peak()),
                        formatGiB(rejected->estimate.deviceMemory),
                        describePlan(rejected->plan, rejected->estimate))
                    .str();
    return fail(formatv("the search stopped after {0} s (--search-seconds) "
                        "with {1} of the {2} plans estimated{3}; give it more "
                        "time or pin some of the degrees",
                        shortNumber(searchSeconds), result->numEstimated,
                        result->numPlans, closest));
  }
  if (result->best.empty()) {
    const plan::RankedPlan &closest = *result->closestRejected;
    return fail(formatv("no plan fits in memory: all {0} plans were rejected; "
                        "the closest needs {1} > {2} per device: {3}",
                        result->numPlans,
                        formatGiB(closest.estimate.memory.peak()),
                        formatGiB(closest.estimate.deviceMemory),
                        describePlan(closest.plan, closest.estimate)));
  }
  for (const plan::RankedPlan &ranked : result->best)
    if (Error error = checkFinite(ranked.estimate, ranked.plan))
      return fail(toString(std::move(error)));
  if (result->closestRejected)
    if (Error error = checkFinite(result->closestRejected->estimate,
                                  result->closestRejected->plan))
      return fail(toString(std::move(error)));
  if (!timelinePath.empty())
    if (int rc = writeTimeline(result->best.front().estimate,
                               result->best.front().plan, timelinePath))
      return rc;
  if (jsonOutput)
    outs() << formatv("{0:2}", searchToJSON(*result, seconds)) << "\n";
  else
    printSearch(*result, seconds, cluster, outs());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom's planner: choose or estimate a parallel plan of a training "
      "step\n");

  if (zero > 3)
    return fail(formatv("--zero={0}: the ZeRO stage must be 0, 1, 2 or 3",
                        zero.getValue()));
  if (globalBatch < 1 || seqLen < 0)
    return fail("--global-batch must be positive and --seq non-negative");
  // A step of more sequences than this is beyond what Loom plans (and its
  // micro-batch divisors would take long to enumerate).
  if (globalBatch > kMaxGlobalBatch)
    return fail(formatv("--global-batch {0} is beyond what Loom plans (at "
                        "most {1} sequences per step)",
                        globalBatch.getValue(), kMaxGlobalBatch));
  for (const cl::opt<int64_t> *degree :
       {&dp, &tp, &pp, &cp, &microBatch, &virtualStages})
    if (*degree < 1 || *degree > kMaxDegree)
      return fail(formatv("--{0} {1}: must be an integer in [1, {2}]",
                          degree->ArgStr, degree->getValue(), kMaxDegree));
  StringRef timeline = timelinePath;
  if (!timeline.empty() && !timeline.ends_with(".json") &&
      !timeline.ends_with(".svg"))
    return fail("--timeline: " + timeline +
                ": the file must end in .json (Chrome trace) or .svg");
  // Before a search of up to a minute, not after it.
  if (!timeline.empty())
    if (Error error = checkOutputFile(timeline))
      return fail("--timeline: " + toString(std::move(error)));

  mlir::MLIRContext context;
  auto config = readModel(context);
  if (!config)
    return fail(toString(config.takeError()));
  auto cluster = cost::resolveClusterSpec(clusterArg);
  if (!cluster)
    return fail(toString(cluster.takeError()));
  if (attentionEfficiency.getNumOccurrences()) {
    if (unfusedAttention)
      return fail("--attention-efficiency is the rate of the fused attention "
                  "kernel, which --unfused-attention does not run (its "
                  "matmuls run at the GEMMs' rate): give one or the other");
    if (!(attentionEfficiency > 0 && attentionEfficiency <= 1))
      return fail(formatv("--attention-efficiency {0}: must be a fraction "
                          "of the peak in (0, 1]",
                          shortNumber(attentionEfficiency)));
    cluster->device.attentionEfficiency = attentionEfficiency;
  }

  plan::ParallelPlan parallel;
  parallel.dp = dp;
  parallel.tp = tp;
  parallel.pp = pp;
  parallel.cp = cp;
  parallel.stageLayers.assign(stageLayersFlag.begin(), stageLayersFlag.end());
  parallel.microBatch = microBatch;
  parallel.zero = static_cast<cost::ZeroStage>(zero.getValue());
  parallel.recompute = recompute;
  parallel.schedule = schedule;
  parallel.virtualStages = virtualStages;
  parallel.sequenceParallel = sequenceParallel;
  parallel.rankOrder = rankOrder;
  plan::TrainingSetup setup;
  setup.globalBatch = globalBatch;
  setup.seqLen = seqLen;
  setup.mixedPrecision = mixedPrecision;
  setup.optimizer = optimizer;
  setup.unfusedAttention = unfusedAttention;
  setup.activations.storeDropoutMasks = storeDropoutMasks;

  for (auto [stage, layers] : enumerate(stageLayersFlag))
    if (layers < 0)
      return fail(formatv("--layers: stage {0} has {1} layers", stage, layers));
  if (!estimateFlag && stageLayersFlag.getNumOccurrences())
    return fail("--layers gives the stage layout of the plan --estimate "
                "estimates; the search places the layers itself");

  context.loadDialect<LoomDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  if (!estimateFlag)
    return search(context, *config, *cluster, setup);
  auto estimate = plan::estimatePlan(context, *config, *cluster, parallel,
                                     setup, buildForwardBackward);
  if (!estimate)
    return fail("impossible plan: " + toString(estimate.takeError()));
  if (Error error = checkFinite(*estimate, parallel))
    return fail(toString(std::move(error)));
  if (!timeline.empty())
    if (int rc = writeTimeline(*estimate, parallel, timeline))
      return rc;
  if (jsonOutput)
    outs() << formatv("{0:2}", toJSON(*estimate, parallel)) << "\n";
  else
    printText(*estimate, parallel, *cluster, outs(), /*withStages=*/true);
  return 0;
}
