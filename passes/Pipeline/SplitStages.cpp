//===- SplitStages.cpp - Stage functions of a pipelined step --------------===//
//
// --loom-split-stages: @train_step, whose ops --loom-pipeline tagged with
// stages (and --loom-partition may have made SPMD), becomes the functions
// each stage runs on one micro-batch, and the schedule that runs them.
//
// 1. Every op gets a phase and a stage (StepPhases.h): forward and
//    backward ops carry them; optimizer updates and the tied-gradient sums
//    are the optimizer phase; ops the partitioner inserted take them from
//    their first user, else from their producers. An optimizer op runs on
//    every stage that holds the parameters it updates (a parameter used by
//    several stages is held, and updated, by each).
// 2. Each stage's backward takes the forward ops its recomputation mode
//    recomputes; with ZB-H1 it is cut into the part the activation
//    gradients need (B) and the rest (W).
// 3. Values crossing functions are found by dataflow: activations (forward
//    values a later stage uses, passed on by the stages in between),
//    activation gradients (likewise, backwards), saved values (forward
//    values the stage's backward reads), and accumulators (what the
//    optimizer or the step's results read from the forward and backward:
//    the gradients and the loss, summed over micro-batches).
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline/Passes.h"

#include "passes/Pipeline/StepPhases.h"

#include "loom/Schedule/Schedule.h"
#include "loom/Schedule/ScheduleAttr.h"
#include "loom/Schedule/Verify.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "loom/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <set>

#define DEBUG_TYPE "loom-split-stages"

namespace loom {
#define GEN_PASS_DEF_LOOMSPLITSTAGES
#include "passes/Pipeline/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace loom {
namespace {

/// One function being cut out of the step.
struct Piece {
  std::string name;
  StringRef kind;
  int64_t stage = 0;
  SmallVector<Operation *> ops; ///< in block order
  llvm::SmallPtrSet<Operation *, 32> owns;
  /// Values the ops use and do not define (constants excluded).
  llvm::SetVector<Value> external;

  void add(Operation *op) {
    ops.push_back(op);
    owns.insert(op);
  }
  bool defines(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && owns.count(def);
  }
};

/// An argument or result of a stage function.
struct Port {
  Value value;
  DictionaryAttr attrs;
};

class Splitter {
public:
  Splitter(ModuleOp module, func::FuncOp step)
      : module(module), step(step), body(step.getBody().front()), phases(step) {
  }

  LogicalResult run();

private:
  LogicalResult readPipeline();
  void buildPieces();
  LogicalResult collectCrossings();
  LogicalResult emit();
  LogicalResult emitOptimizer(int64_t s);
  func::FuncOp emitPiece(const Piece &piece, ArrayRef<Port> inputs,
                         ArrayRef<Port> outputs, ArrayRef<Port> accumulators);

  int64_t stageOf(Value v) const {
    return info.lookup(v.getDefiningOp()).stage;
  }
  bool isForward(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && info.count(def) && info.lookup(def).phase == Phase::Forward;
  }
  bool isBackward(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && info.count(def) && info.lookup(def).phase == Phase::Backward;
  }
  std::string keyOf(Value v) const;
  bool isStepInvariant(Operation *op) { return phases.isStepInvariant(op); }
  /// An argument of @train_step, with its attributes.
  Port argPort(BlockArgument arg);
  /// The arguments of @train_step `piece` reads, in order.
  void appendArguments(const Piece &piece, SmallVectorImpl<Port> &ports);
  DictionaryAttr portAttrs(StringRef role, Value v,
                           DictionaryAttr base = {}) const;
  /// Values in block order (by defining op, then result number).
  SmallVector<Value> ordered(const llvm::SetVector<Value> &values) const;

  ModuleOp module;
  func::FuncOp step;
  Block &body;
  sched::ScheduleKind kind = sched::ScheduleKind::OneFOneB;
  int64_t numRanks = 1, virtualStages = 1, numStages = 1, microBatches = 1;
  SmallVector<std::string> recompute;

  StepPhases phases;
  /// The phases' maps (StepPhases.h).
  DenseMap<Operation *, OpInfo> &info = phases.info;
  DenseMap<Operation *, int64_t> &position = phases.position;

  std::vector<Piece> forward;               ///< per stage
  std::vector<std::vector<Piece>> backward; ///< per stage: [B] or [B, W]
  std::vector<Piece> optimizer;             ///< per stage
  /// Activations entering stage u's forward / gradients entering stage u's
  /// backward (from u + 1).
  std::vector<llvm::SetVector<Value>> activationsIn, gradientsIn;
  /// Forward values a stage's backward reads (saved by its forward).
  std::vector<llvm::SetVector<Value>> savedForward;
  /// Values the W part reads from the B part (ZB-H1).
  std::vector<llvm::SetVector<Value>> savedForWeight;
  /// Accumulators: the value, its key (a tied sum's for tied gradients) and
  /// the result attributes when it is one of the step's results.
  struct Accumulator {
    Value value;
    std::string key;
    DictionaryAttr resultAttrs;
  };
  DenseMap<Operation *, SmallVector<Accumulator>> accumulatorsOf;
};

std::string Splitter::keyOf(Value v) const {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return "arg" + std::to_string(arg.getArgNumber());
  auto result = cast<OpResult>(v);
  std::string key = "v" + std::to_string(position.lookup(result.getOwner()));
  if (result.getOwner()->getNumResults() > 1)
    key += "#" + std::to_string(result.getResultNumber());
  return key;
}

DictionaryAttr Splitter::portAttrs(StringRef role, Value v,
                                   DictionaryAttr base) const {
  MLIRContext *ctx = v.getContext();
  Builder b(ctx);
  NamedAttrList attrs(base ? base : b.getDictionaryAttr({}));
  attrs.set(kRoleAttr, b.getStringAttr(role));
  attrs.set(kValueKeyAttr, b.getStringAttr(keyOf(v)));
  return attrs.getDictionary(ctx);
}

Port Splitter::argPort(BlockArgument arg) {
  DictionaryAttr attrs = step.getArgAttrDict(arg.getArgNumber());
  return {arg, attrs ? attrs : DictionaryAttr::get(module.getContext())};
}

void Splitter::appendArguments(const Piece &piece,
                               SmallVectorImpl<Port> &ports) {
  SmallVector<BlockArgument> args;
  for (Value v : piece.external)
    if (auto arg = dyn_cast<BlockArgument>(v))
      args.push_back(arg);
  llvm::sort(args, [](BlockArgument a, BlockArgument b) {
    return a.getArgNumber() < b.getArgNumber();
  });
  for (BlockArgument arg : args)
    ports.push_back(argPort(arg));
}

SmallVector<Value>
Splitter::ordered(const llvm::SetVector<Value> &values) const {
  SmallVector<Value> list(values.begin(), values.end());
  auto rank = [&](Value v) {
    auto result = cast<OpResult>(v);
    return std::make_pair(position.lookup(result.getOwner()),
                          result.getResultNumber());
  };
  llvm::sort(list, [&](Value a, Value b) { return rank(a) < rank(b); });
  return list;
}

LogicalResult Splitter::readPipeline() {
  // The pass runs on a "pipelined" module only, whose `loom.pipeline` the
  // dialect verified whole (LoomAttributes.cpp): every key is there, with
  // its type and range.
  auto attr = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  kind =
      *sched::parseScheduleKind(attr.getAs<StringAttr>("schedule").getValue());
  numRanks = attr.getAs<IntegerAttr>("ranks").getInt();
  virtualStages = attr.getAs<IntegerAttr>("virtual_stages").getInt();
  microBatches = attr.getAs<IntegerAttr>("micro_batches").getInt();
  numStages = numRanks * virtualStages;
  for (Attribute mode : attr.getAs<ArrayAttr>("recompute"))
    recompute.push_back(cast<StringAttr>(mode).getValue().str());
  return success();
}

void Splitter::buildPieces() {
  forward.resize(numStages);
  backward.resize(numStages);
  optimizer.resize(numStages);
  bool splitBackward = kind == sched::ScheduleKind::ZeroBubbleH1;
  for (int64_t s = 0; s < numStages; ++s) {
    forward[s].name = "stage" + std::to_string(s) + "_forward";
    forward[s].kind = "forward";
    optimizer[s].name = "stage" + std::to_string(s) + "_optimizer";
    optimizer[s].kind = "optimizer";
    forward[s].stage = optimizer[s].stage = s;
  }
  std::vector<std::vector<Operation *>> backwardOps(numStages);
  for (Operation &op : body.without_terminator()) {
    auto it = info.find(&op);
    if (it == info.end())
      continue;
    const OpInfo &opInfo = it->second;
    switch (opInfo.phase) {
    case Phase::Forward:
      forward[opInfo.stage].add(&op);
      break;
    case Phase::Backward:
      backwardOps[opInfo.stage].push_back(&op);
      break;
    case Phase::Optimizer:
      if (op.hasAttr(kTiedGradientAttr))
        break; // Its result is an accumulator the executor sums.
      for (int64_t s : opInfo.optStages)
        optimizer[s].add(&op);
      break;
    }
  }

  // The optimizer recomputes the weight slices and gathers it reads.
  for (Piece &piece : optimizer) {
    SmallVector<Value> worklist;
    for (Operation *op : piece.ops)
      llvm::append_range(worklist, op->getOperands());
    llvm::SmallPtrSet<Operation *, 16> extra;
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || piece.owns.count(def) || extra.count(def) ||
          !isStepInvariant(def))
        continue;
      extra.insert(def);
      llvm::append_range(worklist, def->getOperands());
    }
    if (extra.empty())
      continue;
    SmallVector<Operation *> all(piece.ops);
    all.append(extra.begin(), extra.end());
    llvm::sort(all, [&](Operation *a, Operation *b) {
      return position[a] < position[b];
    });
    piece.ops.clear();
    piece.owns.clear();
    for (Operation *op : all)
      piece.add(op);
  }

  for (int64_t s = 0; s < numStages; ++s) {
    // Forward ops the backward recomputes instead of reading them saved.
    auto recomputes = [&](Operation *op) {
      if (recompute[s] == "full")
        return true;
      return recompute[s] == "selective" && op->hasAttr(kAttentionCoreAttr);
    };
    llvm::SmallPtrSet<Operation *, 32> members(backwardOps[s].begin(),
                                               backwardOps[s].end());
    SmallVector<Value> worklist;
    for (Operation *op : backwardOps[s])
      llvm::append_range(worklist, op->getOperands());
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || members.count(def) || !forward[s].owns.count(def) ||
          !recomputes(def))
        continue;
      members.insert(def);
      llvm::append_range(worklist, def->getOperands());
    }
    SmallVector<Operation *> all;
    for (Operation &op : body)
      if (members.count(&op))
        all.push_back(&op);

    auto makePiece = [&](StringRef suffix, StringRef pieceKind) {
      Piece piece;
      piece.name = "stage" + std::to_string(s) + "_" + suffix.str();
      piece.kind = pieceKind;
      piece.stage = s;
      return piece;
    };
    if (!splitBackward) {
      Piece piece = makePiece("backward", "backward");
      for (Operation *op : all)
        piece.add(op);
      backward[s].push_back(std::move(piece));
      continue;
    }
    // B: what the gradients sent to earlier stages need.
    llvm::SmallPtrSet<Operation *, 32> inputPart;
    SmallVector<Operation *> stack;
    for (Operation *op : all)
      for (Operation *user : op->getUsers()) {
        auto it = info.find(user);
        if (it != info.end() && it->second.phase == Phase::Backward &&
            it->second.stage < s && inputPart.insert(op).second)
          stack.push_back(op);
      }
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && members.count(def) && inputPart.insert(def).second)
          stack.push_back(def);
    }
    Piece input = makePiece("backward_input", "backward_input");
    Piece weight = makePiece("backward_weight", "backward_weight");
    for (Operation *op : all)
      (inputPart.count(op) ? input : weight).add(op);
    backward[s].push_back(std::move(input));
    backward[s].push_back(std::move(weight));
  }
}

LogicalResult Splitter::collectCrossings() {
  auto collectExternal = [&](Piece &piece) {
    for (Operation *op : piece.ops)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && (piece.owns.count(def) || isConstantLeaf(def)))
          continue;
        piece.external.insert(operand);
      }
  };
  for (int64_t s = 0; s < numStages; ++s) {
    collectExternal(forward[s]);
    for (Piece &piece : backward[s])
      collectExternal(piece);
    collectExternal(optimizer[s]);
  }

  // Saved values, and the forward values each stage needs from earlier
  // stages (directly, or to save them for its backward).
  savedForward.resize(numStages);
  savedForWeight.resize(numStages);
  std::vector<llvm::SetVector<Value>> direct(numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    for (Value v : forward[s].external) {
      if (!isForward(v))
        continue;
      if (stageOf(v) > s)
        return forward[s].ops.front()->emitError("--loom-split-stages: stage ")
               << s << " uses a value of the later stage " << stageOf(v);
      direct[s].insert(v);
    }
    for (Piece &piece : backward[s])
      for (Value v : piece.external) {
        if (isForward(v)) {
          if (stageOf(v) > s)
            return v.getDefiningOp()->emitError("--loom-split-stages: the "
                                                "backward of stage ")
                   << s << " reads this value of the later stage "
                   << stageOf(v);
          savedForward[s].insert(v);
          if (stageOf(v) < s)
            direct[s].insert(v);
          continue;
        }
        if (&piece != &backward[s].front() && backward[s].front().defines(v))
          savedForWeight[s].insert(v);
      }
  }
  activationsIn.assign(numStages + 1, {});
  for (int64_t u = numStages - 1; u >= 0; --u) {
    activationsIn[u] = direct[u];
    for (Value v : activationsIn[u + 1])
      if (!forward[u].defines(v))
        activationsIn[u].insert(v);
  }
  if (!activationsIn[0].empty())
    return activationsIn[0].front().getDefiningOp()->emitError(
        "--loom-split-stages: stage 0 needs a value no stage computes "
        "before it");

  // Activation gradients each stage's backward needs from later stages.
  gradientsIn.assign(numStages, {});
  for (int64_t u = 0; u < numStages; ++u) {
    for (Piece &piece : backward[u])
      for (Value v : piece.external)
        if (isBackward(v) && stageOf(v) > u)
          gradientsIn[u].insert(v);
    if (u > 0)
      for (Value v : gradientsIn[u - 1]) {
        bool defined = llvm::any_of(
            backward[u], [&](const Piece &piece) { return piece.defines(v); });
        if (!defined)
          gradientsIn[u].insert(v);
      }
    // With B and W apart, W reads received gradients through B.
    if (backward[u].size() > 1)
      for (Value v : backward[u].back().external)
        if (gradientsIn[u].contains(v))
          savedForWeight[u].insert(v);
  }
  if (!gradientsIn[numStages - 1].empty())
    return gradientsIn[numStages - 1].front().getDefiningOp()->emitError(
        "--loom-split-stages: the last stage's backward needs a gradient no "
        "stage computes");

  // Accumulators: forward and backward values the optimizer reads, and
  // the step's results that are not the optimizer's (the loss).
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (Operation &op : body.without_terminator()) {
    auto it = info.find(&op);
    if (it == info.end() || it->second.phase != Phase::Optimizer)
      continue;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !info.count(def) || info[def].phase == Phase::Optimizer ||
          isStepInvariant(def))
        continue;
      Value keyed = op.hasAttr(kTiedGradientAttr) ? op.getResult(0) : operand;
      auto &list = accumulatorsOf[def];
      std::string key = keyOf(keyed);
      if (llvm::none_of(list, [&](const Accumulator &a) {
            return a.value == operand && a.key == key;
          }))
        list.push_back({operand, key, {}});
    }
  }
  for (auto [r, operand] : llvm::enumerate(ret.getOperands())) {
    Operation *def = operand.getDefiningOp();
    if (!def || !info.count(def) || info[def].phase == Phase::Optimizer)
      continue;
    accumulatorsOf[def].push_back(
        {operand, keyOf(operand), step.getResultAttrDict(r)});
  }
  return success();
}

func::FuncOp Splitter::emitPiece(const Piece &piece, ArrayRef<Port> inputs,
                                 ArrayRef<Port> outputs,
                                 ArrayRef<Port> accumulators) {
  MLIRContext *ctx = module.getContext();
  SmallVector<Type> argTypes, resultTypes;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  for (const Port &port : inputs) {
    argTypes.push_back(port.value.getType());
    argAttrs.push_back(port.attrs);
  }
  for (const Port &port : accumulators) {
    argTypes.push_back(port.value.getType());
    argAttrs.push_back(port.attrs);
  }
  for (const Port &port : outputs) {
    resultTypes.push_back(port.value.getType());
    resultAttrs.push_back(port.attrs);
  }
  for (const Port &port : accumulators) {
    resultTypes.push_back(port.value.getType());
    resultAttrs.push_back(port.attrs);
  }
  OpBuilder b(ctx);
  b.setInsertionPoint(step);
  auto fn = func::FuncOp::create(b, step.getLoc(), piece.name,
                                 b.getFunctionType(argTypes, resultTypes));
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  fn->setAttr(kStageFunctionAttr,
              b.getDictionaryAttr(
                  {b.getNamedAttr("stage", b.getI64IntegerAttr(piece.stage)),
                   b.getNamedAttr("kind", b.getStringAttr(piece.kind))}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping map;
  for (auto [i, port] : llvm::enumerate(inputs))
    map.map(port.value, entry->getArgument(i));
  for (Operation *op : piece.ops) {
    for (Value operand : op->getOperands())
      if (!map.contains(operand))
        if (Operation *def = operand.getDefiningOp();
            def && isConstantLeaf(def))
          b.clone(*def, map);
    b.clone(*op, map);
  }
  SmallVector<Value> results;
  for (const Port &port : outputs)
    results.push_back(map.lookup(port.value));
  for (auto [i, port] : llvm::enumerate(accumulators)) {
    Value acc = entry->getArgument(inputs.size() + i);
    results.push_back(
        AddOp::create(b, port.value.getLoc(), acc, map.lookup(port.value)));
  }
  func::ReturnOp::create(b, step.getLoc(), results);
  return fn;
}

LogicalResult Splitter::emit() {
  auto accumulatorPorts = [&](const Piece &piece) {
    SmallVector<Port> ports;
    for (Operation *op : piece.ops) {
      if (piece.kind != "forward" && forward[piece.stage].owns.count(op))
        continue; // recomputed: its forward accumulates it
      auto it = accumulatorsOf.find(op);
      if (it == accumulatorsOf.end())
        continue;
      for (const Accumulator &acc : it->second) {
        NamedAttrList attrs(acc.resultAttrs
                                ? acc.resultAttrs
                                : DictionaryAttr::get(module.getContext()));
        Builder b(module.getContext());
        if (!acc.resultAttrs)
          attrs.set(kRoleAttr, b.getStringAttr("accumulator"));
        attrs.set(kValueKeyAttr, b.getStringAttr(acc.key));
        ports.push_back({acc.value, attrs.getDictionary(module.getContext())});
      }
    }
    return ports;
  };

  for (int64_t s = 0; s < numStages; ++s) {
    // Forward: parameters and data, activations in; activations on, saved
    // values, accumulators out.
    SmallVector<Port> inputs, outputs;
    appendArguments(forward[s], inputs);
    for (Value v : ordered(activationsIn[s]))
      inputs.push_back({v, portAttrs("activation", v)});
    if (s + 1 < numStages)
      for (Value v : ordered(activationsIn[s + 1]))
        outputs.push_back({v, portAttrs("activation", v)});
    for (Value v : ordered(savedForward[s]))
      outputs.push_back({v, portAttrs("saved", v)});
    emitPiece(forward[s], inputs, outputs, accumulatorPorts(forward[s]));

    for (auto [i, piece] : llvm::enumerate(backward[s])) {
      bool first = i == 0, last = i + 1 == backward[s].size();
      SmallVector<Port> in, out;
      appendArguments(piece, in);
      for (Value v : ordered(savedForward[s]))
        if (piece.external.contains(v))
          in.push_back({v, portAttrs("saved", v)});
      if (first)
        for (Value v : ordered(gradientsIn[s]))
          in.push_back({v, portAttrs("activation_grad", v)});
      if (!first)
        for (Value v : ordered(savedForWeight[s]))
          in.push_back({v, portAttrs("saved", v)});
      if (first && s > 0)
        for (Value v : ordered(gradientsIn[s - 1]))
          out.push_back({v, portAttrs("activation_grad", v)});
      if (first && !last)
        for (Value v : ordered(savedForWeight[s]))
          out.push_back({v, portAttrs("saved", v)});
      // Every external value must be one of the ports.
      for (Value v : piece.external) {
        bool known =
            llvm::any_of(in, [&](const Port &p) { return p.value == v; });
        if (!known)
          return v.getDefiningOp()->emitError(
                     "--loom-split-stages: the backward of stage ")
                 << s << " reads this value, which no stage passes to it";
      }
      emitPiece(piece, in, out, accumulatorPorts(piece));
    }
    if (failed(emitOptimizer(s)))
      return failure();
  }
  return success();
}

LogicalResult Splitter::emitOptimizer(int64_t s) {
  Piece &piece = optimizer[s];
  SmallVector<Port> inputs, outputs;
  appendArguments(piece, inputs);
  llvm::SetVector<Value> accumulated;
  for (Value v : piece.external)
    if (!isa<BlockArgument>(v))
      accumulated.insert(v);
  Builder b(module.getContext());
  for (Value v : ordered(accumulated)) {
    Operation *def = v.getDefiningOp();
    const OpInfo &from = info[def];
    NamedAttrList attrs;
    attrs.set(kRoleAttr, b.getStringAttr("accumulator"));
    attrs.set(kValueKeyAttr, b.getStringAttr(keyOf(v)));
    if (def->hasAttr(kTiedGradientAttr)) {
      SmallVector<int64_t> tied(from.optStages.begin(), from.optStages.end());
      attrs.set(kTiedStagesAttr, b.getI64ArrayAttr(tied));
    } else if (from.phase == Phase::Optimizer || from.stage != s) {
      return def->emitError("--loom-split-stages: the optimizer of stage ")
             << s << " reads this value of stage " << from.stage;
    }
    inputs.push_back({v, attrs.getDictionary(module.getContext())});
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [r, returned] : llvm::enumerate(ret.getOperands())) {
    Value operand = returned;
    Operation *def = operand.getDefiningOp();
    bool here =
        def ? piece.owns.count(def) : (s == 0 && isa<BlockArgument>(operand));
    if (!here)
      continue;
    if (!def && llvm::none_of(
                    inputs, [&](const Port &p) { return p.value == operand; }))
      inputs.push_back(argPort(cast<BlockArgument>(operand)));
    outputs.push_back({operand, step.getResultAttrDict(r)});
  }
  emitPiece(piece, inputs, outputs, {});
  return success();
}

LogicalResult Splitter::run() {
  if (failed(readPipeline()))
    return failure();
  if (failed(phases.run(numStages)))
    return failure();
  buildPieces();
  if (failed(collectCrossings()) || failed(emit()))
    return failure();

  auto schedule =
      sched::buildSchedule(kind, numRanks, microBatches, virtualStages);
  if (!schedule)
    return emitLineError(module)
           << "--loom-split-stages: " << llvm::toString(schedule.takeError());
  if (llvm::Error err = sched::verifySchedule(*schedule))
    return emitLineError(module)
           << "--loom-split-stages: " << llvm::toString(std::move(err));
  module->setAttr(kScheduleAttr,
                  sched::scheduleToAttr(module.getContext(), *schedule));
  setModuleState(module, ModuleState::Split);
  step.erase();
  return success();
}

struct SplitStagesPass : impl::LoomSplitStagesBase<SplitStagesPass> {
  using LoomSplitStagesBase::LoomSplitStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ModuleState state = getModuleState(module);
        state != ModuleState::Pipelined) {
      emitLineError(module)
          << "--loom-split-stages: the module is "
          << stringifyModuleState(state) << ", not pipelined (loom.state)"
          << (state == ModuleState::Split ? "" : ": run --loom-pipeline first");
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step || step.isExternal()) {
      emitLineError(module) << "--loom-split-stages: no @train_step to split";
      return signalPassFailure();
    }
    if (failed(Splitter(module, step).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
