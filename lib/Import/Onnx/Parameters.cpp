//===- Parameters.cpp - Initializers as named parameters ------------------===//
//
// A float initializer is a parameter under its own name. PyTorch's
// TorchScript exporter, with constant folding on (its default), replaces a
// Linear layer's weight W by a new initializer holding W^T under a
// generated name (`onnx::MatMul_123`), and a tied weight read in two
// layouts by two initializers. Their names and ties are recovered by value:
// an initializer equal, as is or transposed, to a tensor of the weights
// file takes that tensor's name (and layout); one equal to another
// initializer with a proper name is that parameter. The values must match
// bit for bit and must not be all equal (a zero bias matches every zero
// bias), so a match is a copy, not a coincidence.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringSet.h"

#include <cstring>
#include <deque>
#include <map>
#include <set>

using namespace llvm;

namespace loom::onnx_import {
namespace {

/// A content key: the shape and a hash of the float bits.
using ContentKey = std::pair<SmallVector<int64_t, 4>, uint64_t>;

uint64_t hashFloats(ArrayRef<float> values) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

std::vector<float> transposed(ArrayRef<float> values, int64_t rows,
                              int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = values[r * cols + c];
  return out;
}

bool allEqual(ArrayRef<float> values) {
  return llvm::all_of(values, [&](float v) { return v == values.front(); });
}

/// A tensor a renamed initializer may be a copy of.
struct Reference {
  std::string name;
  SmallVector<int64_t, 4> shape;
  const std::vector<float> *values;
  int parameter = -1;        ///< an initializer's parameter
  int64_t weightsIndex = -1; ///< a weights-file tensor
};

} // namespace

Error GraphImporter::setUpParameters() {
  auto fail = [&](const Twine &message) {
    return createStringError(inconvertibleErrorCode(),
                             (path + ": " + message).str());
  };
  if (!options.weightsPath.empty()) {
    auto read = readSafetensors(options.weightsPath);
    if (!read)
      return read.takeError();
    weights = std::move(*read);
  }
  StringMap<int64_t> weightsIndex;
  if (weights)
    for (auto [i, t] : llvm::enumerate(weights->tensors))
      if (t.isFloat())
        weightsIndex[t.name] = i;

  auto addParameter = [&](StringRef valueName, Parameter p, bool known) {
    ValueState s;
    s.kind = ValueKind::Parameter;
    s.type = {DType::F32, p.shape};
    s.known = known;
    s.weightLike = true;
    s.parameter = parameters.size();
    parameters.push_back(std::move(p));
    values[valueName] = std::move(s);
  };

  auto addConstant = [&](const RawTensor &init) {
    ValueState s;
    s.kind = ValueKind::Constant;
    s.known = true;
    s.data = init.decode();
    s.type = {init.dtype, init.shape};
    values[init.name] = std::move(s);
  };

  // Initializers: floats are parameters, the rest constants. A float of
  // one element (an epsilon, an exponent, a scale some exporters store as
  // an initializer) is a constant too.
  std::vector<int> renameable; // parameters not named in the weights file
  for (auto [i, init] : llvm::enumerate(graph.initializers)) {
    if (!isFloat(init.dtype) || init.numElements() == 1) {
      if (init.dtype != DType::Unsupported) // an error only where read
        addConstant(init);
      continue;
    }
    Parameter p;
    p.name = init.name;
    p.shape = init.shape;
    p.graphIndex = i;
    auto found = weightsIndex.find(init.name);
    if (found != weightsIndex.end()) {
      const CheckpointTensor &w = weights->tensors[found->second];
      if (ArrayRef<int64_t>(w.shape) != ArrayRef<int64_t>(init.shape))
        return fail("tensor '" + init.name + "' of the weights file is " +
                    shapeText(w.shape) + ", the graph's initializer " +
                    shapeText(init.shape));
      p.weights = &w;
      p.weightsIndex = found->second;
      addParameter(init.name, std::move(p), /*known=*/false);
      continue;
    }
    p.initializer = &init;
    renameable.push_back(parameters.size());
    addParameter(init.name, std::move(p), /*known=*/true);
  }
  // Float graph inputs without an initializer: the weights file's.
  llvm::StringSet<> initialized;
  for (const RawTensor &t : graph.initializers)
    initialized.insert(t.name);
  for (auto [i, input] : llvm::enumerate(graph.inputs)) {
    if (!isFloat(input.dtype) || initialized.contains(input.name))
      continue;
    auto found = weightsIndex.find(input.name);
    if (found == weightsIndex.end())
      return fail("graph input '" + input.name +
                  "' is a float tensor without an initializer: give its "
                  "value with --weights");
    const CheckpointTensor &w = weights->tensors[found->second];
    bool fits = input.hasShape && input.dims.size() == w.shape.size();
    for (size_t d = 0; fits && d < input.dims.size(); ++d)
      fits = input.dims[d] && *input.dims[d] == w.shape[d];
    if (!fits)
      return fail("graph input '" + input.name +
                  "' does not have the shape of the weights file's tensor " +
                  shapeText(w.shape));
    Parameter p;
    p.name = input.name;
    p.shape.assign(w.shape.begin(), w.shape.end());
    p.weights = &w;
    p.weightsIndex = found->second;
    p.graphIndex = graph.initializers.size() + i;
    addParameter(input.name, std::move(p), /*known=*/false);
  }

  // Renames and ties, by content. Only tensors shaped like a candidate (as
  // is or transposed) are hashed: a model's weights are big.
  StringRef generated = "onnx::";
  auto isCandidate = [&](const Parameter &p) {
    return weights || StringRef(p.name).starts_with(generated);
  };
  std::set<SmallVector<int64_t, 4>> shapes;
  for (int index : renameable) {
    const Parameter &p = parameters[index];
    if (!isCandidate(p))
      continue;
    shapes.insert(p.shape);
    if (p.shape.size() == 2)
      shapes.insert({p.shape[1], p.shape[0]});
  }
  std::deque<std::vector<float>> decoded; // the initializers' values
  std::map<ContentKey, std::vector<Reference>> references;
  auto addReference = [&](Reference r) {
    if (r.values->empty() || allEqual(*r.values))
      return;
    ContentKey key{r.shape, hashFloats(*r.values)};
    references[key].push_back(std::move(r));
  };
  if (weights)
    for (auto [i, t] : llvm::enumerate(weights->tensors)) {
      SmallVector<int64_t, 4> shape(t.shape.begin(), t.shape.end());
      if (t.isFloat() && shapes.count(shape))
        addReference({t.name, shape, &t.values, -1, int64_t(i)});
    }
  for (auto [i, p] : llvm::enumerate(parameters))
    if (!StringRef(p.name).starts_with(generated) && shapes.count(p.shape) &&
        p.initializer) {
      decoded.push_back(p.values());
      addReference({p.name, p.shape, &decoded.back(), int(i), -1});
    }

  for (int index : renameable) {
    Parameter &p = parameters[index];
    // Only generated names are taken for copies of other initializers;
    // any initializer the weights file does not name may be a renamed one.
    bool isGenerated = StringRef(p.name).starts_with(generated);
    if (!isCandidate(p))
      continue;
    std::vector<float> v = p.values();
    if (v.empty() || allEqual(v))
      continue;
    std::optional<std::pair<const Reference *, bool>> match;
    auto lookUp = [&](ArrayRef<int64_t> shape, ArrayRef<float> data,
                      bool isTransposed) {
      auto it =
          references.find({SmallVector<int64_t, 4>(shape), hashFloats(data)});
      if (it == references.end())
        return;
      for (const Reference &r : it->second) {
        if (r.parameter == index || ArrayRef<float>(*r.values) != data)
          continue;
        if (r.weightsIndex < 0 && !isGenerated)
          continue;
        // Prefer an initializer of the graph (a tie) over a file tensor.
        if (!match || (match->first->parameter < 0 && r.parameter >= 0))
          match = {{&r, isTransposed}};
      }
    };
    lookUp(p.shape, v, false);
    if (p.shape.size() == 2)
      lookUp({p.shape[1], p.shape[0]}, transposed(v, p.shape[0], p.shape[1]),
             true);
    if (!match)
      continue;
    const Reference &r = *match->first;
    bool isTransposed = match->second;
    // An initializer of the graph, or a parameter already renamed to the
    // file tensor's name: a tie.
    int target = r.parameter;
    if (target < 0)
      for (auto [j, q] : llvm::enumerate(parameters))
        if (q.name == r.name && int(j) != index)
          target = j;
    ValueState &s = values[p.name];
    std::string how = isTransposed && target >= 0 ? " (transposed, tied)"
                      : isTransposed              ? " (transposed)"
                      : target >= 0               ? " (tied)"
                                                  : "";
    report.renamed.push_back(p.name + " -> " + r.name + how);
    if (target >= 0) {
      s.parameter = target;
      s.transposedView = isTransposed;
      s.known = values[parameters[target].name].known;
      continue;
    }
    p.name = r.name;
    p.shape = r.shape;
    p.weights = &weights->tensors[r.weightsIndex];
    p.weightsIndex = r.weightsIndex;
    p.initializer = nullptr;
    s.transposedView = isTransposed;
    s.known = false; // named in the weights file: a parameter for sure
  }
  // With a weights file, the parameters are its tensors: an initializer
  // it does not hold (a mask, a rotary table) is a constant.
  if (weights)
    for (int index : renameable) {
      Parameter &p = parameters[index];
      if (p.weights || !p.initializer)
        continue;
      ValueState &s = values[p.initializer->name];
      if (s.parameter != index)
        continue; // tied to another parameter
      addConstant(*p.initializer);
      p.initializer = nullptr;
    }
  // A weights file none of whose tensors is the graph's is another model's.
  if (weights && llvm::none_of(parameters, [](const Parameter &p) {
        return p.weights != nullptr;
      }))
    return fail("no tensor of the weights file " + options.weightsPath +
                " is a parameter of the graph (by name, or by value as the "
                "graph's initializers hold them)");
  return Error::success();
}

} // namespace loom::onnx_import
