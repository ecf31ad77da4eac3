//===- Estimate.cpp - Step time and memory of a manual parallel plan ------===//
//
// The arithmetic of plans on a model's costs (ModelCosts.h: the per-device
// programs, costed op by op): every stage's time and memory, the pipeline
// schedule simulated, the collectives of each parallelism.
//
// Sources:
//  [S19] M. Shoeybi et al., "Megatron-LM", 2019, §3 and Fig. 3/4: two
//        all-reduces per layer in the forward (g) and two in the backward (f).
//  [N21] D. Narayanan et al., "Efficient Large-Scale Language Model Training
//        on GPU Clusters Using Megatron-LM", SC'21: pipeline time (m + p - 1)
//        stage times, the 1F1B schedule keeping at most p micro-batches in
//        flight on the first stage, and MFU from model FLOPs. The pipelined
//        time of every schedule is simulated (loom/Schedule/Simulator.h).
//  [K23] V. Korthikanti et al., "Reducing Activation Recomputation in Large
//        Transformer Models", MLSys'23, §4.2.2: sequence parallelism turns
//        each all-reduce into an all-gather plus a reduce-scatter.
//  [Z20] S. Rajbhandari et al., "ZeRO", SC'20, §5 and §7: communication of
//        the stages (ZeRO-3 gathers parameters in the forward and backward).
//  [N21b] Narayanan et al. 2021 (as [N21]) §4.1: the scatter/gather
//        optimization, each of the T tensor-parallel ranks sending 1/T of a
//        stage's output, all-gathered over NVLink on the receiving side.
//  [L23] H. Liu, M. Zaharia, P. Abbeel, "Ring Attention with Blockwise
//        Transformers", 2023, and Megatron-Core's context parallelism: the
//        sequence split over CP devices, each passing its keys and values
//        around the ring in CP - 1 steps behind the attention of the block
//        it holds; the backward passes them again with their gradients.
//  [F23] Y. Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully
//        Sharded Data Parallel", VLDB 2023, §3.1-3.3: the model is wrapped
//        in units (a transformer block each), and each unit's parameters
//        are all-gathered before its forward and its backward, and its
//        gradients reduce-scattered after, one collective per unit.
//  [M22] Megatron-LM's training loop: the data-parallel gradient reduction
//        runs after the pipeline flush, in fp32 when the model trains in
//        bf16 (its main_grad buffers); Loom's optimizer function reduces
//        the f32 gradients of its casts after the flush too.
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/Estimate.h"

#include "ModelCosts.h"

#include "loom/CostModel/Collectives.h"
#include "loom/CostModel/OpCost.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace loom::cost;

namespace loom::plan {

llvm::StringRef stringifySchedule(Schedule schedule) {
  return sched::stringifyScheduleKind(schedule);
}

llvm::StringRef stringifyRankOrder(RankOrder order) {
  return order == RankOrder::TensorDataPipeline ? "tp-dp-pp" : "tp-pp-dp";
}

namespace {

/// Distance between consecutive members of a data-parallel group and
/// between neighbouring pipeline stages, in ranks (a context-parallel group
/// is the T-strided ranks after a tensor group's).
int64_t dataStride(const ParallelPlan &plan) {
  int64_t inner = plan.tp * plan.cp;
  return plan.rankOrder == RankOrder::TensorDataPipeline ? inner
                                                         : inner * plan.pp;
}
int64_t pipelineStride(const ParallelPlan &plan) {
  int64_t inner = plan.tp * plan.cp;
  return plan.rankOrder == RankOrder::TensorDataPipeline ? inner * plan.dp
                                                         : inner;
}

/// The ranks that hold the same parameters and reduce their gradients (and
/// share ZeRO's shards): the D data-parallel ranks times the CP
/// context-parallel ones (Megatron-Core's data-parallel group with context
/// parallelism), placed on the nodes as the rank order lays them out.
GroupPlacement gradientGroup(const ParallelPlan &plan, int64_t devicesPerNode) {
  return GroupPlacement::of({{plan.cp, plan.tp}, {plan.dp, dataStride(plan)}},
                            devicesPerNode);
}

} // namespace

namespace {
using detail::ModelCosts;
using detail::ParamCounts;
using detail::PartCost;
using detail::savedBytes;

/// Seconds of communication one micro-batch costs a stage.
struct MicroBatchComm {
  double perLayer = 0, embedding = 0, head = 0, sendRecv = 0;
  /// One step of the context-parallel ring [L23]: a device's keys and
  /// values to its neighbour (forward), and with their gradients
  /// (backward); cp - 1 steps of each per layer.
  double ringForward = 0, ringBackward = 0;
};

/// `hiddenBytes`: one micro-batch's hidden state on a context-parallel
/// device (its 1/cp of the sequence); `kvBytes`: its keys and values on
/// one tensor-parallel rank.
MicroBatchComm microBatchComm(const ClusterSpec &cluster,
                              const ParallelPlan &plan, double hiddenBytes,
                              double kvBytes, double tokens) {
  const int64_t t = plan.tp;
  // Every group placed where the rank order puts it; the slowest of each
  // kind sets the time (GroupPlacement::of), as all of them step together.
  // A stage sends to the next, and a context-parallel device to its ring
  // neighbour: across nodes wherever their groups span nodes.
  auto tpGroup = GroupPlacement::strided(t, 1, cluster.devicesPerNode);
  auto ppGroup = GroupPlacement::strided(plan.pp, pipelineStride(plan),
                                         cluster.devicesPerNode)
                     .neighbours();
  auto cpPair =
      GroupPlacement::strided(plan.cp, t, cluster.devicesPerNode).neighbours();
  auto coll = [&](Collective kind, double bytes, const GroupPlacement &g) {
    return collectiveCost(kind, bytes, g, cluster).seconds;
  };
  MicroBatchComm comm;
  // [N21b]: each tensor-parallel rank sends its 1/T of the stage's output;
  // with sequence parallelism that is its own shard, otherwise the
  // receivers all-gather it over the node's links.
  if (plan.pp > 1) {
    comm.sendRecv =
        coll(Collective::SendRecv, hiddenBytes / double(t), ppGroup);
    if (t > 1 && !plan.sequenceParallel)
      comm.sendRecv += coll(Collective::AllGather, hiddenBytes, tpGroup);
  }
  if (plan.cp > 1) {
    comm.ringForward = coll(Collective::SendRecv, kvBytes, cpPair);
    comm.ringBackward = coll(Collective::SendRecv, 2 * kvBytes, cpPair);
  }
  if (t == 1)
    return comm;
  // [S19]/[K23]: per layer and direction, two all-reduces of the hidden
  // state, or two all-gathers and two reduce-scatters with SP.
  double pair =
      plan.sequenceParallel
          ? 2 * (coll(Collective::AllGather, hiddenBytes, tpGroup) +
                 coll(Collective::ReduceScatter, hiddenBytes, tpGroup))
          : 2 * coll(Collective::AllReduce, hiddenBytes, tpGroup);
  comm.perLayer = 2 * pair;
  if (plan.recompute == Recompute::Full)
    comm.perLayer += pair; // the rerun forward communicates again
  // Vocabulary-parallel embedding (forward all-reduce of its output) and
  // cross-entropy (backward all-reduce of the head's input gradient, and
  // three all-reduces of [b, s] fp32 statistics).
  comm.embedding = coll(Collective::AllReduce, hiddenBytes, tpGroup);
  comm.head = coll(Collective::AllReduce, hiddenBytes, tpGroup) +
              3 * coll(Collective::AllReduce, tokens * 4, tpGroup);
  return comm;
}

/// One link of the chain (the embedding, a layer, the head) on one device of
/// its stage, per micro-batch under a plan.
struct ItemCost {
  double forward = 0, backward = 0, comm = 0, perStep = 0;
  double params = 0, kept = 0;
  double seconds() const { return forward + backward + comm; }
};

/// What a plan makes of the model's costs: every item, the communication
/// and the memory every stage holds whatever its layers.
struct PlanCosts {
  ItemCost embedding, layer, head;
  MicroBatchComm comm;
  StateBytesPerParam perParam;
  /// Bytes on every stage: temporaries, the layer rebuilt by full
  /// recomputation.
  double temporaries = 0, rebuiltLayer = 0;
  double layerKept = 0;
};

ItemCost itemCost(const PartCost &part, const ParallelPlan &plan,
                  const MicroBatchComm &ring, double comm, double params,
                  double kept) {
  ItemCost item;
  double spShare = plan.sequenceParallel ? 1.0 - 1.0 / double(plan.tp) : 0;
  // [L23]: a context-parallel device's queries meet all cp blocks of keys,
  // one block per ring step, each step's transfer behind the block before.
  double cp = double(plan.cp);
  double attentionForward = cp * part.attentionForward,
         attentionBackward = cp * part.attentionBackward;
  item.forward = part.forward - spShare * part.forwardReplicated +
                 attentionForward - part.attentionForward;
  double recompute = plan.recompute == Recompute::Full        ? item.forward
                     : plan.recompute == Recompute::Selective ? part.coreForward
                                                              : 0;
  item.backward = part.backward - spShare * part.backwardReplicated +
                  attentionBackward - part.attentionBackward + recompute;
  item.comm = comm;
  if (plan.cp > 1 && part.attentionForward > 0)
    item.comm +=
        (cp - 1) * (exposedTime(ring.ringForward, attentionForward / cp) +
                    exposedTime(ring.ringBackward, attentionBackward / cp) +
                    (plan.recompute == Recompute::Full
                         ? exposedTime(ring.ringForward, attentionForward / cp)
                         : 0));
  item.perStep = part.perStep;
  item.params = params;
  item.kept = kept;
  return item;
}

PlanCosts planCosts(const ModelConfig &config, const ClusterSpec &cluster,
                    const ParallelPlan &plan, const TrainingSetup &setup,
                    const ModelCosts &model) {
  const int64_t t = plan.tp,
                seq = (setup.seqLen ? setup.seqLen : config.maxPositions) /
                      plan.cp;
  PlanCosts costs;
  double elementBytes = setup.mixedPrecision ? 2 : 4;
  double hiddenBytes =
      double(plan.microBatch * seq * config.hidden) * elementBytes;
  double kvBytes = 2 * double(plan.microBatch * seq) *
                   double(config.numKVHeads / t) *
                   double(config.hidden / config.numHeads) * elementBytes;
  costs.layerKept =
      plan.recompute == Recompute::Full
          ? hiddenBytes / (plan.sequenceParallel ? double(t) : 1)
          : model.layerKept(plan.recompute, plan.sequenceParallel, t);
  costs.comm = microBatchComm(cluster, plan, hiddenBytes, kvBytes,
                              double(plan.microBatch * seq));
  costs.perParam = stateBytesPerParam(setup.mixedPrecision, setup.optimizer);
  const ParamCounts &params =
      plan.pp > 1 && config.tieEmbeddings ? model.paramsTiedCopy : model.params;
  auto kept = [&](const PartCost &part) {
    return savedBytes(part.saved, plan.recompute, plan.sequenceParallel, t);
  };
  costs.embedding =
      itemCost(model.embedding, plan, costs.comm, costs.comm.embedding,
               params.embedding, kept(model.embedding));
  costs.layer = itemCost(model.layer, plan, costs.comm, costs.comm.perLayer,
                         params.layer, costs.layerKept);
  costs.head = itemCost(model.head, plan, costs.comm, costs.comm.head,
                        params.head, kept(model.head));
  costs.temporaries = model.temporaries;
  if (plan.recompute == Recompute::Full) // one layer rebuilt at a time
    costs.rebuiltLayer =
        model.layerKept(Recompute::None, plan.sequenceParallel, t);
  return costs;
}

/// Micro-batches stage i keeps in flight: all of them under GPipe; under
/// 1F1B stage i holds p - i [N21 §2.2]; a virtual stage holds 1/V of the
/// rank's layers.
double inFlight(const ParallelPlan &plan, int64_t i, int64_t m) {
  int64_t v = plan.virtualStages;
  return double(sched::peakInFlight(plan.schedule, int(plan.pp), int(m), int(v),
                                    int(i))) /
         double(v);
}

/// One pipeline stage's share: seconds per micro-batch, parameters and
/// activations on one of its devices.
struct Stage {
  double seconds = 0, compute = 0, comm = 0, forward = 0, backward = 0;
  double perStep = 0;
  double params = 0, activations = 0;
  /// Bytes one micro-batch leaves on the stage until its backward.
  double kept = 0;
};

/// Stage i of `plan` with `layers` layers; `gradGroup`: where the ranks
/// that share its parameters sit (gradientGroup of the plan as the devices
/// run it: an interleaved plan's stages are costed as a plan of P x V
/// stages, whose own strides would place the group on devices that do not
/// exist). `interleavedChunk`: one of an interleaved plan's P x V stages,
/// whose transfers run while its rank computes another stage's micro-batch
/// (Megatron-LM's interleaved schedule overlaps them), so only what
/// outlasts a forward is exposed.
Stage buildStage(int64_t i, int64_t layers, const ClusterSpec &cluster,
                 const ParallelPlan &plan, int64_t numMicroBatches,
                 const PlanCosts &costs, const GroupPlacement &gradGroup,
                 bool interleavedChunk = false) {
  const bool first = i == 0, last = i == plan.pp - 1;
  Stage stage;
  double kept = 0;
  auto add = [&](const ItemCost &item, double count) {
    stage.forward += count * item.forward;
    stage.backward += count * item.backward;
    stage.comm += count * item.comm;
    stage.perStep += count * item.perStep;
    stage.params += count * item.params;
    kept += count * item.kept;
  };
  add(costs.layer, double(layers));
  if (first)
    add(costs.embedding, 1);
  if (last)
    add(costs.head, 1);
  stage.compute = stage.forward + stage.backward;
  double transfer = interleavedChunk
                        ? exposedTime(costs.comm.sendRecv, stage.forward)
                        : costs.comm.sendRecv;
  stage.comm += (last ? 0 : transfer) + (first ? 0 : transfer);
  if (plan.zero == ZeroStage::Parameters && plan.dp * plan.cp > 1) {
    // [Z20 §7]: every micro-batch gathers the parameters for its forward
    // and again for its backward, and reduce-scatters its gradients into
    // their shards; prefetched behind the compute. The backward's gather
    // and reduce-scatter share the links and the compute they hide behind.
    // [F23]: one collective per unit, a layer each and the embedding and
    // head each one more, so each pays its latency (equal shares of the
    // bytes: the bandwidth term is the same either way).
    double units =
        std::max(1.0, double(layers) + (first ? 1 : 0) + (last ? 1 : 0));
    auto coll = [&](Collective kind, double bytes) {
      return units *
             collectiveCost(kind, bytes / units, gradGroup, cluster).seconds;
    };
    double gather = coll(Collective::AllGather,
                         stage.params * costs.perParam.params),
           reduce = coll(Collective::ReduceScatter,
                         stage.params * costs.perParam.grads);
    stage.comm += exposedTime(gather, stage.forward) +
                  exposedTime(gather + reduce, stage.backward);
  }
  stage.seconds = stage.compute + stage.comm;
  stage.kept = kept;
  stage.activations =
      inFlight(plan, i, numMicroBatches) * kept + costs.rebuiltLayer;
  return stage;
}

/// The schedule's P x V stages of `plan` (its P stages unless interleaved),
/// with `layout`'s layers.
llvm::SmallVector<Stage> scheduleStages(llvm::ArrayRef<int64_t> layout,
                                        const ClusterSpec &cluster,
                                        const ParallelPlan &plan, int64_t m,
                                        const PlanCosts &costs) {
  llvm::SmallVector<Stage> stages;
  GroupPlacement gradGroup = gradientGroup(plan, cluster.devicesPerNode);
  if (plan.virtualStages == 1) {
    for (int64_t i = 0; i < plan.pp; ++i)
      stages.push_back(
          buildStage(i, layout[i], cluster, plan, m, costs, gradGroup));
    return stages;
  }
  // Costed like P x V pipeline stages (the embedding on the first, the head
  // on the last, each with its own transfers).
  ParallelPlan chunked = plan;
  chunked.pp = plan.pp * plan.virtualStages;
  chunked.virtualStages = 1;
  chunked.schedule = Schedule::OneFOneB;
  for (int64_t s = 0; s < chunked.pp; ++s)
    stages.push_back(buildStage(s, layout[s], cluster, chunked, m, costs,
                                gradGroup, /*interleavedChunk=*/true));
  return stages;
}

/// What each pipeline rank does per micro-batch and holds: its V stages
/// together, its activations those of the micro-batches its schedule keeps
/// in flight.
llvm::SmallVector<Stage> rankStages(llvm::ArrayRef<Stage> stages,
                                    const ParallelPlan &plan, int64_t m,
                                    const PlanCosts &costs) {
  if (plan.virtualStages == 1)
    return llvm::SmallVector<Stage>(stages);
  llvm::SmallVector<Stage> ranks(plan.pp);
  for (size_t s = 0; s < stages.size(); ++s) {
    Stage &rank = ranks[s % plan.pp];
    const Stage &stage = stages[s];
    rank.forward += stage.forward;
    rank.backward += stage.backward;
    rank.compute += stage.compute;
    rank.comm += stage.comm;
    rank.seconds += stage.seconds;
    rank.perStep += stage.perStep;
    rank.params += stage.params;
    rank.kept += stage.kept;
  }
  for (int64_t r = 0; r < plan.pp; ++r)
    ranks[r].activations =
        inFlight(plan, r, m) * ranks[r].kept + costs.rebuiltLayer;
  return ranks;
}

/// Transformer layers of each of the plan's P x V stages in pipeline order
/// (ParallelPlan::stageLayers): the plan's, or the even split.
std::vector<int64_t> stageLayout(const ModelConfig &config,
                                 const ParallelPlan &plan) {
  const int64_t p = plan.pp, v = plan.virtualStages, n = p * v,
                total = config.numLayers;
  std::vector<int64_t> layers;
  if (int64_t(plan.stageLayers.size()) == n)
    return plan.stageLayers;
  if (int64_t(plan.stageLayers.size()) == p) {
    // Each rank's layers over its V stages, the first ones one more.
    layers.assign(n, 0);
    for (int64_t s = 0; s < n; ++s) {
      int64_t rank = plan.stageLayers[s % p], chunk = s / p;
      layers[s] = rank / v + (chunk < rank % v ? 1 : 0);
    }
    return layers;
  }
  if (v == 1) {
    for (int64_t i = 0; i < p; ++i)
      layers.push_back(total / p + (i < total % p ? 1 : 0));
    return layers;
  }
  // Interleaved: ceil(L / (P V)) each, then one less on the stages holding
  // the head and the embedding, and inwards from there, as Llama 3 placed
  // 126 layers on 16 ranks (Dubey et al. 2024 §3.3.2).
  layers.assign(n, (total + n - 1) / n);
  int64_t deficit = layers[0] * n - total;
  for (int64_t k = 0; deficit > 0; ++k, --deficit)
    --layers[k % 2 == 0 ? n - 1 - k / 2 : k / 2];
  return layers;
}

} // namespace

std::string checkPlan(const ModelConfig &config, const ClusterSpec &cluster,
                      const ParallelPlan &plan, const TrainingSetup &setup) {
  if (plan.dp < 1 || plan.tp < 1 || plan.pp < 1 || plan.cp < 1 ||
      plan.microBatch < 1)
    return "every degree and the micro-batch must be at least 1";
  int64_t devices = plan.dp * plan.tp * plan.pp * plan.cp;
  if (devices != cluster.numDevices())
    return plan.cp == 1
               ? llvm::formatv("D x T x P = {0} x {1} x {2} = {3}, but the "
                               "cluster has {4} devices",
                               plan.dp, plan.tp, plan.pp, devices,
                               cluster.numDevices())
                     .str()
               : llvm::formatv("D x CP x T x P = {0} x {1} x {2} x {3} = {4}, "
                               "but the cluster has {5} devices",
                               plan.dp, plan.cp, plan.tp, plan.pp, devices,
                               cluster.numDevices())
                     .str();
  if (config.numHeads % plan.tp != 0)
    return llvm::formatv("T = {0} does not divide the {1} attention heads",
                         plan.tp, config.numHeads);
  if (config.numKVHeads % plan.tp != 0)
    return llvm::formatv("T = {0} does not divide the {1} key/value heads",
                         plan.tp, config.numKVHeads);
  if (config.intermediate % plan.tp != 0)
    return llvm::formatv("T = {0} does not divide the MLP width {1}", plan.tp,
                         config.intermediate);
  if (plan.pp > config.numLayers)
    return llvm::formatv("P = {0} stages but the model has {1} layers", plan.pp,
                         config.numLayers);
  // Interleaving takes turns between the stages of several ranks: one rank
  // running its V stages in order is the plain pipeline of P = 1 with a
  // schedule that does not exist.
  if (plan.schedule == Schedule::Interleaved1F1B && plan.pp < 2)
    return llvm::formatv("interleaved-1f1b interleaves the stages of at "
                         "least 2 pipeline ranks, but P = {0}",
                         plan.pp);
  // Interleaved, the first and last stages may hold only the embedding and
  // the head (as Llama 3's 126 layers on 16 x 8 stages).
  if (plan.virtualStages < 1 ||
      (plan.virtualStages > 1 &&
       plan.pp * plan.virtualStages > config.numLayers + 2))
    return llvm::formatv("P x V = {0} x {1} stages but the model has {2} "
                         "layers (and the embedding and the head)",
                         plan.pp, plan.virtualStages, config.numLayers);
  if (setup.globalBatch % (plan.dp * plan.microBatch) != 0)
    return llvm::formatv("the global batch {0} is not a multiple of D x "
                         "micro-batch = {1} x {2}",
                         setup.globalBatch, plan.dp, plan.microBatch);
  int64_t seq = setup.seqLen ? setup.seqLen : config.maxPositions;
  if (seq % plan.cp != 0)
    return llvm::formatv("context parallelism: CP = {0} does not divide the "
                         "sequence length {1}",
                         plan.cp, seq);
  if (plan.cp > 1 && setup.unfusedAttention)
    return "context parallelism passes keys and values between the blocks "
           "of the fused attention kernel, not the unfused form "
           "(--unfused-attention)";
  if (plan.sequenceParallel && (seq / plan.cp) % plan.tp != 0)
    return llvm::formatv("sequence parallelism: T = {0} does not divide the "
                         "sequence length {1}{2}",
                         plan.tp, seq / plan.cp,
                         plan.cp > 1 ? " of a context-parallel device" : "");
  if (!plan.stageLayers.empty()) {
    const int64_t n = plan.pp * plan.virtualStages,
                  given = int64_t(plan.stageLayers.size());
    for (auto [stage, layers] : llvm::enumerate(plan.stageLayers))
      if (layers < 0)
        return llvm::formatv("the stage layout gives stage {0} {1} layers",
                             stage, layers);
    int64_t sum = 0;
    for (int64_t layers : plan.stageLayers)
      sum += std::min(layers, config.numLayers + 1);
    if ((given != plan.pp && given != n) || sum != config.numLayers)
      return llvm::formatv(
          "the stage layout gives {0} stages {1} layers; "
          "the plan has {2} stages{3} of {4} layers",
          given, sum, plan.pp,
          plan.virtualStages > 1
              ? llvm::formatv(" ({0} with V = {1})", n, plan.virtualStages)
                    .str()
              : std::string(),
          config.numLayers);
  }
  std::vector<int64_t> layout = stageLayout(config, plan);
  for (int64_t i = 1; i + 1 < int64_t(layout.size()); ++i)
    if (layout[i] == 0)
      return llvm::formatv("pipeline stage {0} has no layers", i);
  int64_t m = setup.globalBatch / (plan.dp * plan.microBatch);
  if (llvm::Error error = sched::checkScheduleShape(
          plan.schedule, int(plan.pp), int(m), int(plan.virtualStages)))
    return toString(std::move(error));
  return "";
}

namespace {
/// The pipelined step under plan.schedule, simulated; `chunks` are the
/// P x V stages of the schedule (the P stages unless interleaved). A
/// stage's communication (its tensor-parallel collectives, and the
/// transfers to its neighbours, which Megatron-LM waits for between
/// kernels) is split between its forward and backward as its compute is, so
/// the simulated transfers are free; the data-parallel reduction and the
/// optimizer close every rank's step.
llvm::Expected<sched::Simulation> simulatePipeline(llvm::ArrayRef<Stage> chunks,
                                                   const ParallelPlan &plan,
                                                   int64_t m, double dpComm,
                                                   double optimizer) {
  int P = int(plan.pp), V = int(plan.virtualStages);
  llvm::Expected<sched::Schedule> schedule =
      sched::buildSchedule(plan.schedule, P, int(m), V);
  if (!schedule)
    return schedule.takeError();
  sched::ScheduleCosts costs;
  for (const Stage &chunk : chunks) {
    double forwardShare =
        chunk.compute > 0 ? chunk.forward / chunk.compute : 0.5;
    double forward = chunk.forward + forwardShare * chunk.comm;
    costs.forward.push_back(forward);
    costs.backward.push_back(chunk.seconds - forward);
  }
  costs.allReduce.assign(P, dpComm);
  costs.optimizer.assign(P, optimizer);
  return sched::simulate(*schedule, costs);
}

/// The pipelined time in closed form: the slowest stage paces the M
/// micro-batches and the others add the fill and drain, Σ t_s + (M − 1) ·
/// max t_s under GPipe and 1F1B [N21 §2.2]; interleaving divides the fill
/// and drain by V [N21 §2.2.2]; ZB-H1 leaves (F + B − W)/(F + B + W) of it
/// (Qi et al. 2023 §3), F/(F + b) with B and W each half of the backward b.
double closedFormPipeline(llvm::ArrayRef<Stage> stages,
                          const ParallelPlan &plan, int64_t m,
                          const Stage &bottleneck) {
  double sum = 0;
  for (const Stage &stage : stages)
    sum += stage.seconds;
  double fill = sum - bottleneck.seconds;
  if (plan.schedule == Schedule::Interleaved1F1B)
    fill /= double(plan.virtualStages);
  else if (plan.schedule == Schedule::ZeroBubbleH1 && bottleneck.compute > 0)
    fill *= bottleneck.forward / bottleneck.compute;
  return double(m) * bottleneck.seconds + fill;
}

} // namespace

PlanEvaluator::PlanEvaluator(MLIRContext &context, const ModelConfig &config,
                             const ClusterSpec &cluster,
                             const TrainingSetup &setup,
                             ProgramBuilder buildProgram)
    : context(context), config(config), cluster(cluster), setup(setup),
      buildProgram(std::move(buildProgram)) {}

PlanEvaluator::~PlanEvaluator() = default;

llvm::Expected<const ModelCosts *>
PlanEvaluator::modelCosts(int64_t tp, int64_t microBatch, int64_t cp) {
  auto &slot = cache[{tp, microBatch, cp}];
  if (!slot) {
    auto costs = detail::costModel(context, config, cluster.device, tp,
                                   microBatch, cp, setup, buildProgram);
    if (!costs) {
      cache.erase({tp, microBatch, cp});
      return costs.takeError();
    }
    slot = std::move(*costs);
  }
  return slot.get();
}

llvm::Expected<StageProblem>
PlanEvaluator::stageProblem(const ParallelPlan &plan) {
  ParallelPlan even = plan;
  even.stageLayers.clear();
  if (std::string reason = checkPlan(config, cluster, even, setup);
      !reason.empty())
    return llvm::createStringError(reason);
  auto model = modelCosts(plan.tp, plan.microBatch, plan.cp);
  if (!model)
    return model.takeError();
  PlanCosts costs = planCosts(config, cluster, plan, setup, **model);
  const int64_t m = setup.globalBatch / (plan.dp * plan.microBatch);
  const int64_t v = plan.virtualStages, n = plan.pp * v;
  auto item = [&](const ItemCost &cost) {
    return StageItem{cost.seconds(),
                     modelStateMemory(cost.params, costs.perParam, plan.zero,
                                      plan.dp * plan.cp)
                         .total(),
                     cost.kept};
  };
  StageProblem problem;
  problem.items.push_back(item(costs.embedding));
  problem.items.insert(problem.items.end(), config.numLayers,
                       item(costs.layer));
  problem.items.push_back(item(costs.head));
  problem.numStages = n;
  problem.numMicroBatches = m;
  // An interleaved stage's transfers run behind another stage's compute:
  // what outlasts a layer's forward is exposed.
  double transfer = v > 1
                        ? exposedTime(costs.comm.sendRecv, costs.layer.forward)
                        : costs.comm.sendRecv;
  for (int64_t i = 0; i < n; ++i) {
    problem.inFlight.push_back(inFlight(plan, i % plan.pp, m));
    problem.stageSeconds.push_back(transfer * double((i > 0) + (i + 1 < n)));
  }
  // A rank's V stages share its memory: each is given a V-th of it (the
  // estimate then checks the rank as a whole).
  problem.stageBytes = (costs.temporaries + costs.rebuiltLayer) / double(v);
  problem.capacity = cluster.device.memoryBytes / double(v);
  return problem;
}

llvm::Expected<Estimate> PlanEvaluator::estimate(const ParallelPlan &plan,
                                                 bool simulate) {
  if (std::string reason = checkPlan(config, cluster, plan, setup);
      !reason.empty())
    return llvm::createStringError(reason);
  const int64_t d = plan.dp, t = plan.tp, p = plan.pp;
  // The ranks that reduce the same gradients and share ZeRO's shards.
  const int64_t g = d * plan.cp;
  const int64_t seq = setup.seqLen ? setup.seqLen : config.maxPositions;
  const int64_t m = setup.globalBatch / (d * plan.microBatch);
  const DeviceSpec &device = cluster.device;
  Estimate estimate;
  estimate.numMicroBatches = m;
  auto note = [&](const llvm::Twine &text) {
    estimate.notes += (estimate.notes.empty() ? "" : "; ") + text.str();
  };
  if (config.vocab % t != 0)
    note(llvm::formatv("vocabulary padded from {0} to {1} to "
                       "split it over T = {2}",
                       config.vocab, (config.vocab + t - 1) / t * t, t));
  if (plan.recompute == Recompute::Selective && !setup.unfusedAttention)
    note("selective recomputation reruns the attention core, which the "
         "fused attention kernel does not keep: it costs and saves what "
         "recompute none does (--unfused-attention: the decomposed "
         "attention, whose scores it drops)");

  auto model = modelCosts(t, plan.microBatch, plan.cp);
  if (!model)
    return model.takeError();
  estimate.modelFlopsPerStep = (*model)->modelFlops * double(d * m);
  PlanCosts costs = planCosts(config, cluster, plan, setup, **model);
  const StateBytesPerParam &perParam = costs.perParam;
  estimate.activationsPerLayer = costs.layerKept;
  estimate.numParams = (*model)->totalParams;
  estimate.stageLayers = stageLayout(config, plan);
  llvm::SmallVector<Stage> chunks =
      scheduleStages(estimate.stageLayers, cluster, plan, m, costs);
  llvm::SmallVector<Stage> stages = rankStages(chunks, plan, m, costs);

  // The slowest stage sets the pace of the pipeline [N21 §2.2].
  const Stage *bottleneck = &stages.front();
  for (const Stage &stage : stages)
    if (stage.seconds > bottleneck->seconds)
      bottleneck = &stage;

  // Data parallelism: the gradients reduced after the pipeline flush, not
  // behind a backward [M22] (ZeRO-3 reduce-scattered every micro-batch's
  // in its backward), updated parameters gathered after the optimizer
  // (ZeRO-1/2) [Z20 §7].
  double dpComm = 0;
  if (g > 1) {
    GroupPlacement group = gradientGroup(plan, cluster.devicesPerNode);
    auto coll = [&](Collective kind, double bytes) {
      return collectiveCost(kind, bytes, group, cluster).seconds;
    };
    double gradBytes = bottleneck->params * perParam.grads;
    if (plan.zero == ZeroStage::Parameters)
      dpComm = 0;
    else if (plan.zero == ZeroStage::Gradients)
      dpComm = coll(Collective::ReduceScatter, gradBytes);
    else
      dpComm = coll(Collective::AllReduce, gradBytes);
    if (plan.zero == ZeroStage::OptimizerStates ||
        plan.zero == ZeroStage::Gradients)
      dpComm +=
          coll(Collective::AllGather, bottleneck->params * perParam.params);
  }

  // The optimizer streams its states once: read and write them, read the
  // gradient, write the compute copy of the parameter.
  double optimizerParams =
      bottleneck->params / (plan.zero >= ZeroStage::OptimizerStates ? g : 1);
  OpWork update;
  update.opClass = OpClass::Bandwidth;
  update.bytes = optimizerParams *
                 (2 * perParam.optimizer + perParam.grads + perParam.params);
  update.flops = 16 * optimizerParams;
  estimate.optimizer = opTime(update, device) + bottleneck->perStep;

  estimate.compute = double(m) * bottleneck->compute + estimate.optimizer;
  if (simulate) {
    auto pipeline =
        simulatePipeline(chunks, plan, m, dpComm, estimate.optimizer);
    if (!pipeline)
      return pipeline.takeError();
    estimate.pipeline = std::move(*pipeline);
    // The slowest stage's devices: their busy time less compute is exposed
    // communication, the rest of the pipelined time is bubble.
    double busy = estimate.pipeline.rankCompute[bottleneck - stages.begin()];
    // busy >= m * compute by construction; the difference of the two sums
    // can round below zero when nothing is exposed (ZeRO-3, no TP).
    estimate.exposedComm =
        std::max(0.0, busy - double(m) * bottleneck->compute) + dpComm;
    estimate.bubble = estimate.pipeline.pipelineTime - busy;
    estimate.stepTime = estimate.pipeline.stepTime;
  } else {
    estimate.exposedComm = double(m) * bottleneck->comm + dpComm;
    double pipeline = closedFormPipeline(stages, plan, m, *bottleneck);
    estimate.bubble = pipeline - double(m) * bottleneck->seconds;
    estimate.stepTime = pipeline + dpComm + estimate.optimizer;
  }
  estimate.tokensPerSecond =
      double(setup.globalBatch * seq) / estimate.stepTime;
  MathMode mode = setup.mixedPrecision ? MathMode::BF16 : MathMode::FP32;
  estimate.mfu = estimate.modelFlopsPerStep /
                 (estimate.stepTime * double(cluster.numDevices()) *
                  device.peakFlops(mode));

  // Memory: the stage with the largest peak.
  for (int64_t i = 0; i < p; ++i) {
    ModelStateMemory states =
        modelStateMemory(stages[i].params, perParam, plan.zero, g);
    MemoryBreakdown memory{states.params, states.grads, states.optimizerStates,
                           stages[i].activations, costs.temporaries};
    if (i == 0 || memory.peak() > estimate.memory.peak()) {
      estimate.memory = memory;
      estimate.peakStage = i;
      estimate.numParamsPerDevice = stages[i].params;
    }
  }
  estimate.deviceMemory = device.memoryBytes;
  estimate.fits = estimate.memory.peak() <= device.memoryBytes;
  return estimate;
}

llvm::Expected<Estimate>
estimatePlan(MLIRContext &context, const ModelConfig &config,
             const ClusterSpec &cluster, const ParallelPlan &plan,
             const TrainingSetup &setup, ProgramBuilder buildProgram) {
  return PlanEvaluator(context, config, cluster, setup, std::move(buildProgram))
      .estimate(plan);
}

} // namespace loom::plan
