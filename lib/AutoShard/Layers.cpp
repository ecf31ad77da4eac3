//===- Layers.cpp - Repeated transformer layers of a function -------------===//
//
// Two steps, both linear in the size of the function:
//
// 1. Assign ops to layers. Arguments carry their layer (loom.layer, or in
//    IR written without it, their name). An op's forward layer A is the
//    deepest layer among the arguments it depends on (an op of layer i's
//    forward pass depends on layers 0..i); its backward layer B is the
//    deepest layer among the marked results it reaches (a gradient op of
//    layer i, or the update of a layer-i parameter, reaches results of
//    layers 0..i only, while every forward op reaches the loss and through
//    it every gradient). The op's layer is min(A, B): forward ops get A,
//    gradient and optimizer ops get B. A function whose results carry no
//    layer (a forward pass) uses A alone. Ops that depend on no layer (the
//    embedding, constants) are outside every layer.
//
// 2. Tie layers. A layer's members in order (its arguments, then its ops in
//    block order) are compared with each earlier representative's: the same
//    op names and types at every position, arguments of the same role, type
//    and name (up to the layer index), and every operand coming from the
//    same place: the same position of its own layer, an op of the same kind
//    in the layer at the same distance, or the same value (or an equal
//    constant) outside the layers. The first representative that matches
//    takes the layer; a layer that matches none is a representative.
//
// The labels only decide what is compared; the comparison decides what is
// tied, so an unusual model yields more representatives, never a wrong tie.
// The problem builder ties an op only when its strategies are exactly its
// representative's (attributes such as a dropout key may differ).
//
//===----------------------------------------------------------------------===//

#include "loom/AutoShard/Layers.h"

#include "dialects/Loom/LoomDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <vector>

using namespace mlir;

namespace loom::autoshard {

int layerOfName(llvm::StringRef name) {
  for (llvm::StringRef marker : {"h.", "layers.", "blocks."}) {
    size_t from = 0;
    while ((from = name.find(marker, from)) != llvm::StringRef::npos) {
      // The marker starts a component: at the start or after a dot.
      bool starts = from == 0 || name[from - 1] == '.';
      llvm::StringRef rest = name.drop_front(from + marker.size());
      from += marker.size();
      if (!starts)
        continue;
      llvm::StringRef digits =
          rest.take_while([](char c) { return llvm::isDigit(c); });
      unsigned index;
      if (!digits.empty() && rest.drop_front(digits.size()).starts_with(".") &&
          !digits.getAsInteger(10, index))
        return static_cast<int>(index);
    }
  }
  return -1;
}

namespace {

/// `name` with its layer index replaced, so that two layers' names of the
/// same parameter compare equal.
std::string withoutLayer(llvm::StringRef name, int layer) {
  std::string index = "." + std::to_string(layer) + ".";
  size_t at = name.find(index);
  if (at == llvm::StringRef::npos)
    return name.str();
  return (name.take_front(at) + ".*." + name.drop_front(at + index.size()))
      .str();
}

/// An argument (op == null) or an op of the function.
struct Member {
  Operation *op = nullptr;
  unsigned arg = 0;
};

class LayerFinder {
public:
  explicit LayerFinder(func::FuncOp fn) : fn(fn) {}

  LayerTies run() {
    LayerTies ties;
    if (!fn.getBody().hasOneBlock())
      return ties;
    assignLayers();
    ties.numLayers = layers.size();
    if (layers.size() < 2)
      return ties;
    std::vector<int> representatives;
    for (int layer = 0; layer < int(layers.size()); ++layer) {
      auto match = llvm::find_if(representatives, [&](int representative) {
        return sameLayer(representative, layer);
      });
      if (match == representatives.end()) {
        representatives.push_back(layer);
        continue;
      }
      for (auto [leader, member] :
           llvm::zip_equal(layers[*match], layers[layer])) {
        if (member.op)
          ties.ops[member.op] = leader.op;
        else
          ties.arguments[member.arg] = leader.arg;
      }
    }
    ties.numRepresentatives = representatives.size();
    return ties;
  }

private:
  void assignLayers() {
    Block &body = fn.getBody().front();
    std::vector<int> argLayer;
    int numLayers = 0;
    // The importers mark each layer's parameters, and the passes their
    // gradients, moments and updates (loom.layer); IR written without the
    // marks has the layer in the names.
    bool marked = false;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      marked |= static_cast<bool>(fn.getArgAttr(i, kLayerAttr));
    auto layerOf = [&](DictionaryAttr attrs) {
      if (!attrs)
        return -1;
      if (marked) {
        auto layer = attrs.getAs<IntegerAttr>(kLayerAttr);
        return layer ? int(layer.getInt()) : -1;
      }
      auto name = attrs.getAs<StringAttr>(kNameAttr);
      if (!name)
        name = attrs.getAs<StringAttr>(kGradOfAttr);
      return name ? layerOfName(name.getValue()) : -1;
    };
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      argLayer.push_back(layerOf(fn.getArgAttrDict(i)));
      numLayers = std::max(numLayers, argLayer.back() + 1);
    }
    if (numLayers < 2)
      return;
    layers.resize(numLayers);

    // Forward layer: the deepest argument layer an op depends on.
    llvm::DenseMap<Operation *, int> forward;
    auto forwardOf = [&](Value value) {
      if (auto arg = dyn_cast<BlockArgument>(value))
        return arg.getOwner() == &body ? argLayer[arg.getArgNumber()] : -1;
      return forward.lookup_or(value.getDefiningOp(), -1);
    };
    for (Operation &op : body) {
      int layer = -1;
      for (Value operand : op.getOperands())
        layer = std::max(layer, forwardOf(operand));
      forward[&op] = layer;
    }

    // Backward layer: the deepest named result an op reaches.
    std::vector<int> resultLayer;
    bool resultsHaveLayers = false;
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      resultLayer.push_back(layerOf(fn.getResultAttrDict(i)));
      resultsHaveLayers |= resultLayer.back() >= 0;
    }
    llvm::DenseMap<Operation *, int> backward;
    for (Operation &op : llvm::reverse(body)) {
      int layer = -1;
      for (OpOperand &use : op.getUses()) {
        Operation *user = use.getOwner();
        if (isa<func::ReturnOp>(user) && user->getBlock() == &body)
          layer = std::max(layer, resultLayer[use.getOperandNumber()]);
        else
          layer = std::max(layer, backward.lookup_or(user, -1));
      }
      backward[&op] = layer;
    }

    for (auto [i, layer] : llvm::enumerate(argLayer))
      if (layer >= 0)
        add(Member{nullptr, unsigned(i)}, layer);
    for (Operation &op : body) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      int layer = forward[&op];
      if (resultsHaveLayers)
        layer = std::min(layer, backward[&op]);
      if (layer >= 0)
        add(Member{&op, 0}, layer);
    }
  }

  void add(Member member, int layer) {
    if (member.op)
      opPlace[member.op] = {layer, int(layers[layer].size())};
    else
      argPlace[member.arg] = {layer, int(layers[layer].size())};
    layers[layer].push_back(member);
  }

  /// The layer and position of what defines `value`; layer -1 outside.
  std::pair<int, int> placeOf(Value value) const {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return argPlace.lookup_or(arg.getArgNumber(), {-1, -1});
    return opPlace.lookup_or(value.getDefiningOp(), {-1, -1});
  }

  static bool sameKind(Operation *a, Operation *b) {
    return a->getName() == b->getName() &&
           a->getNumOperands() == b->getNumOperands() &&
           a->getResultTypes() == b->getResultTypes() &&
           a->getOperandTypes() == b->getOperandTypes();
  }

  /// Whether operand `a` of layer `la` and operand `b` of layer `lb` come
  /// from the same place (see the file comment).
  bool sameSource(Value a, int la, Value b, int lb) const {
    if (a.getType() != b.getType())
      return false;
    auto [layerA, posA] = placeOf(a);
    auto [layerB, posB] = placeOf(b);
    auto resultNumber = [](Value v) {
      auto result = dyn_cast<OpResult>(v);
      return result ? int(result.getResultNumber()) : -1;
    };
    if (resultNumber(a) != resultNumber(b))
      return false;
    if (layerA >= 0 || layerB >= 0) {
      if (layerA < 0 || layerB < 0 || layerA - la != layerB - lb)
        return false;
      if (layerA == la)
        return posA == posB;
      Member ma = layers[layerA][posA], mb = layers[layerB][posB];
      return ma.op ? mb.op && sameKind(ma.op, mb.op) : !mb.op;
    }
    if (a == b)
      return true;
    Operation *da = a.getDefiningOp(), *db = b.getDefiningOp();
    return da && db && da->hasTrait<OpTrait::ConstantLike>() &&
           db->hasTrait<OpTrait::ConstantLike>() && sameKind(da, db) &&
           da->getAttrDictionary() == db->getAttrDictionary();
  }

  bool sameArgument(unsigned a, int la, unsigned b, int lb) const {
    auto role = [&](unsigned i) {
      return fn.getArgAttrOfType<StringAttr>(i, kRoleAttr);
    };
    auto name = [&](unsigned i, int layer) {
      auto attr = fn.getArgAttrOfType<StringAttr>(i, kNameAttr);
      return attr ? withoutLayer(attr.getValue(), layer) : std::string();
    };
    return fn.getArgument(a).getType() == fn.getArgument(b).getType() &&
           role(a) == role(b) && name(a, la) == name(b, lb);
  }

  bool sameLayer(int la, int lb) const {
    if (layers[la].size() != layers[lb].size())
      return false;
    for (auto [ma, mb] : llvm::zip_equal(layers[la], layers[lb])) {
      if (bool(ma.op) != bool(mb.op))
        return false;
      if (!ma.op) {
        if (!sameArgument(ma.arg, la, mb.arg, lb))
          return false;
        continue;
      }
      if (!sameKind(ma.op, mb.op) ||
          ma.op->getNumRegions() + mb.op->getNumRegions() != 0)
        return false;
      for (auto [a, b] :
           llvm::zip_equal(ma.op->getOperands(), mb.op->getOperands()))
        if (!sameSource(a, la, b, lb))
          return false;
    }
    return true;
  }

  mutable func::FuncOp fn; // its accessors are not const
  /// Each layer's members: arguments in order, then ops in block order.
  std::vector<std::vector<Member>> layers;
  llvm::DenseMap<Operation *, std::pair<int, int>> opPlace;
  llvm::DenseMap<unsigned, std::pair<int, int>> argPlace;
};

} // namespace

LayerTies findRepeatedLayers(func::FuncOp fn) { return LayerFinder(fn).run(); }

} // namespace loom::autoshard
