//===- GraphImporter.cpp - Analysis and emission of an ONNX graph ---------===//
//
// The driver of an import (see GraphImporter.h): the graph's inputs, the
// analysis pass that types and folds every node, the demand-driven
// emission from the output, and the final @forward with its parameters
// first (in the weights file's order when one is given, else the graph's).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/thread.h"

using namespace mlir;
using llvm::createStringError;
using llvm::Error;
using llvm::Expected;
using llvm::inconvertibleErrorCode;

namespace loom::onnx_import {

std::vector<float> Parameter::values() const {
  if (weights)
    return weights->values;
  return initializer->decodeFloats();
}

GraphImporter::GraphImporter(MLIRContext &context, const OnnxGraph &graph,
                             StringRef path, const OnnxImportOptions &options)
    : graph(graph), options(options), context(context), path(path.str()),
      b(&context) {
  context.loadDialect<func::FuncDialect, arith::ArithDialect, LoomDialect>();
  compute = options.precision == Precision::BF16 ? Type(b.getBF16Type())
                                                 : Type(b.getF32Type());
}

//===----------------------------------------------------------------------===//
// Errors and small helpers
//===----------------------------------------------------------------------===//

std::string GraphImporter::nodeText(const OnnxNode &node) const {
  return llvm::formatv("node '{0}' ({1}, opset {2})", node.name, node.opType,
                       graph.opset);
}

Value GraphImporter::fail(const OnnxNode &node, const Twine &message) {
  return fail(nodeText(node) + ": " + message);
}

Value GraphImporter::fail(const Twine &message) {
  if (!error)
    error = (path + ": " + message).str();
  return Value();
}

void GraphImporter::noteUnfused(StringRef kind, const OnnxNode &node,
                                const Twine &why) {
  report.unfused.push_back(
      (kind + " at node '" + node.name + "': " + why).str());
}

ValueState *GraphImporter::state(StringRef name) {
  if (name.empty())
    return nullptr;
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

const OnnxNode *GraphImporter::producer(StringRef name) {
  ValueState *s = state(name);
  if (!s || s->kind != ValueKind::Computed || s->producer < 0)
    return nullptr;
  return &graph.nodes[s->producer];
}

const HostTensor *GraphImporter::constant(StringRef name) {
  ValueState *s = state(name);
  if (!s || !s->known)
    return nullptr;
  // A weight-like value is known but trains: patterns must not take it
  // as a constant.
  if (s->weightLike || s->kind == ValueKind::Parameter)
    return nullptr;
  return dataOf(*s);
}

SmallVector<Operand, 4> GraphImporter::operandsOf(const OnnxNode &node) {
  SmallVector<Operand, 4> operands;
  for (const std::string &name : node.inputs) {
    Operand operand;
    if (ValueState *s = state(name)) {
      operand.present = true;
      operand.type = s->type;
      operand.data = constant(name);
    }
    operands.push_back(operand);
  }
  return operands;
}

std::optional<double> GraphImporter::scalar(StringRef name) {
  const HostTensor *data = constant(name);
  if (!data || data->numElements() == 0 || !data->isSplat())
    return std::nullopt;
  return data->value(0);
}

Location GraphImporter::locationOf(const OnnxNode &node) {
  return NameLoc::get(b.getStringAttr(node.name),
                      FileLineColLoc::get(&context, path, 0, 0));
}

Type GraphImporter::elementType(DType type) {
  if (isFloat(type))
    return compute;
  return b.getI32Type();
}

RankedTensorType GraphImporter::tensorType(const ValueType &type) {
  return RankedTensorType::get(type.shape, elementType(type.dtype));
}

Value GraphImporter::constantOf(const HostTensor &data, const ValueType &type,
                                Location loc) {
  if (type.dtype == DType::Bool)
    return fail("a boolean tensor is needed at run time (Loom keeps masks as "
                "constants folded into the ops that read them)");
  RankedTensorType tensor = tensorType(type);
  DenseElementsAttr attr;
  if (data.isFloat()) {
    const llvm::fltSemantics &semantics =
        cast<FloatType>(tensor.getElementType()).getFloatSemantics();
    auto toAPFloat = [&](double v) {
      APFloat value(v);
      bool lost;
      value.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
      return value;
    };
    if (data.numElements() > 0 && data.isSplat()) {
      attr = DenseElementsAttr::get(tensor, toAPFloat(data.f[0]));
    } else {
      SmallVector<APFloat> elements;
      for (double v : data.f)
        elements.push_back(toAPFloat(v));
      attr = DenseElementsAttr::get(tensor, elements);
    }
  } else {
    SmallVector<int32_t> elements;
    for (int64_t v : data.i) {
      if (v < INT32_MIN || v > INT32_MAX)
        return fail("an integer constant needed at run time does not fit "
                    "in int32");
      elements.push_back(static_cast<int32_t>(v));
    }
    attr = DenseElementsAttr::get(tensor, ArrayRef<int32_t>(elements));
  }
  return arith::ConstantOp::create(b, loc, attr);
}

Value GraphImporter::splat(double value, ArrayRef<int64_t> shape,
                           Location loc) {
  HostTensor t =
      HostTensor::floats(DType::F32, shape, std::vector<double>(1, value));
  t.f.assign(t.numElements(), value);
  return constantOf(t, {DType::F32, SmallVector<int64_t, 4>(shape)}, loc);
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

Error GraphImporter::setUpInputs() {
  llvm::StringSet<> initialized;
  for (const RawTensor &t : graph.initializers)
    initialized.insert(t.name);
  const TensorInfo *ids = nullptr, *labelInfo = nullptr;
  for (const TensorInfo &input : graph.inputs) {
    if (initialized.contains(input.name) || isFloat(input.dtype))
      continue; // a parameter (Parameters.cpp)
    if (input.dtype == DType::Unsupported || isFloat(input.dtype))
      continue;
    StringRef name = input.name;
    if (name.contains_insensitive("mask") ||
        name.contains_insensitive("position") ||
        name.contains_insensitive("token_type"))
      return createStringError(
          inconvertibleErrorCode(),
          "%s: graph input '%s': Loom feeds token ids and labels only "
          "(export the model without attention masks, position or token "
          "type ids)",
          path.c_str(), input.name.c_str());
    if (!ids)
      ids = &input;
    else if (!labelInfo)
      labelInfo = &input;
    else
      return createStringError(
          inconvertibleErrorCode(),
          "%s: graph input '%s' (%s): the graph may take token ids and "
          "labels, nothing else (export it without attention masks or "
          "position ids)",
          path.c_str(), input.name.c_str(), dtypeName(input.dtype).data());
  }
  if (!ids)
    return createStringError(inconvertibleErrorCode(),
                             "%s: the graph takes no integer input (token "
                             "ids [batch, sequence])",
                             path.c_str());
  for (const TensorInfo *input : {ids, labelInfo}) {
    if (!input)
      continue;
    if (!input->hasShape || input->dims.size() != 2)
      return createStringError(
          inconvertibleErrorCode(),
          "%s: graph input '%s' must be [batch, sequence], not of rank %zu",
          path.c_str(), input->name.c_str(), input->dims.size());
  }
  // The batch and sequence axes: static ones as exported, dynamic ones
  // from the options.
  auto axis = [&](size_t d, int64_t option, StringRef flag,
                  StringRef what) -> Expected<int64_t> {
    const std::optional<int64_t> &size = ids->dims[d];
    if (size) {
      if (option && option != *size)
        return createStringError(
            inconvertibleErrorCode(),
            "%s: graph input '%s' has a static %s of %lld; %s %lld needs a "
            "graph exported with a dynamic %s axis",
            path.c_str(), ids->name.c_str(), what.data(), (long long)*size,
            flag.data(), (long long)option, what.data());
      return *size;
    }
    if (option)
      return option;
    if (d == 0)
      return 1;
    return createStringError(
        inconvertibleErrorCode(),
        "%s: graph input '%s' has a dynamic %s axis ('%s'): give %s",
        path.c_str(), ids->name.c_str(), what.data(), ids->dimNames[d].c_str(),
        flag.data());
  };
  auto batch = axis(0, options.microBatch, "--micro-batch", "batch");
  if (!batch)
    return batch.takeError();
  auto seq = axis(1, options.seqLen, "--seq-len", "sequence");
  if (!seq)
    return seq.takeError();
  microBatch = report.microBatch = *batch;
  seqLen = report.seqLen = *seq;
  for (const TensorInfo *input : {ids, labelInfo}) {
    if (!input)
      continue;
    for (size_t d = 0; d < 2; ++d)
      if (input->dims[d] && *input->dims[d] != (d ? seqLen : microBatch))
        return createStringError(
            inconvertibleErrorCode(),
            "%s: graph inputs '%s' and '%s' differ in shape", path.c_str(),
            ids->name.c_str(), input->name.c_str());
    ValueState s;
    s.kind = ValueKind::Input;
    s.type = {input->dtype, {microBatch, seqLen}};
    values[input->name] = std::move(s);
  }
  tokensName = ids->name;
  labelsName = labelInfo ? labelInfo->name : "";
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

const HostTensor *GraphImporter::dataOf(ValueState &value) {
  if (value.data)
    return &*value.data;
  if (!value.known || failed())
    return nullptr;
  if (value.kind == ValueKind::Parameter) {
    Parameter &p = parameters[value.parameter];
    p.readByFolding = true;
    std::vector<float> floats = p.values();
    HostTensor t;
    t.dtype = DType::F32;
    t.shape = value.type.shape;
    t.f.assign(floats.begin(), floats.end());
    if (value.transposedView) { // the graph's [in, out] view of [out, in]
      int64_t rows = p.shape[0], cols = p.shape[1];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          t.f[c * rows + r] = floats[r * cols + c];
    }
    value.data = std::move(t);
    return &*value.data;
  }
  // A weight-like layout result: evaluate its producer on its operands'
  // data.
  const OnnxNode &node = graph.nodes[value.producer];
  SmallVector<Operand> operands;
  for (const std::string &name : node.inputs) {
    Operand operand;
    if (ValueState *s = state(name)) {
      operand.present = true;
      operand.type = s->type;
      operand.data = dataOf(*s);
      if (!operand.data)
        return nullptr;
    }
    operands.push_back(operand);
  }
  auto evaluation = evaluate(node, operands, graph.opset, /*wantData=*/true);
  if (!evaluation || !evaluation->data) {
    if (!evaluation)
      fail(node, toString(evaluation.takeError()));
    return nullptr;
  }
  for (auto [name, data] : llvm::zip(node.outputs, *evaluation->data))
    if (ValueState *s = state(name))
      s->data = std::move(data);
  return value.data ? &*value.data : nullptr;
}

Error GraphImporter::analyzeNode(int index) {
  const OnnxNode &node = graph.nodes[index];
  auto nodeError = [&](const Twine &message) {
    fail(node, message);
    return createStringError(inconvertibleErrorCode(), *error);
  };
  if (!node.domain.empty() && node.domain != "ai.onnx")
    return nodeError("op domain '" + node.domain + "' is not supported");
  if (!isSupportedOp(node.opType))
    return nodeError("op type not supported by Loom's importer");

  SmallVector<Operand> operands;
  bool allKnown = true, anyWeightLike = false;
  for (const std::string &name : node.inputs) {
    Operand operand;
    if (!name.empty()) {
      ValueState *s = state(name);
      if (!s)
        return nodeError("reads '" + name +
                         "', which no earlier node, input or initializer "
                         "defines");
      ++s->uses;
      operand.present = true;
      operand.type = s->type;
      operand.data = s->data ? &*s->data : nullptr;
      allKnown &= s->known;
      anyWeightLike |= s->weightLike;
    }
    operands.push_back(operand);
  }
  if (node.opType == "Dropout" && operands.size() > 2 && operands[2].present) {
    if (!operands[2].data || operands[2].data->integer(0) != 0)
      return nodeError("dropout in training mode is not supported (export "
                       "the model in eval mode)");
  }
  bool tableKnown = !node.inputs.empty() && !node.inputs[0].empty() &&
                    state(node.inputs[0])->known;
  if (Error e = checkSequenceFits(node, operands, seqLen, tableKnown))
    return nodeError(toString(std::move(e)));
  bool weightLikeOut = allKnown && anyWeightLike && isLayoutOp(node.opType);
  bool fold = allKnown && !weightLikeOut && isFoldableOp(node.opType);
  if (fold)
    for (auto [name, operand] : llvm::zip(node.inputs, operands))
      if (operand.present && !operand.data &&
          !(operand.data = dataOf(*state(name))))
        return createStringError(inconvertibleErrorCode(), *error);
  auto evaluation = evaluate(node, operands, graph.opset, fold);
  if (!evaluation)
    return nodeError(toString(evaluation.takeError()));
  if (evaluation->types.size() < node.outputs.size())
    return nodeError("has more outputs than Loom knows of");
  for (auto [k, name] : llvm::enumerate(node.outputs)) {
    if (name.empty())
      continue;
    if (values.count(name))
      return nodeError("redefines '" + name + "'");
    ValueState s;
    s.type = evaluation->types[k];
    s.producer = index;
    if (evaluation->data) {
      s.kind = ValueKind::Constant;
      s.known = true;
      s.data = std::move((*evaluation->data)[k]);
    } else {
      s.kind = ValueKind::Computed;
      s.known = weightLikeOut;
      s.weightLike = weightLikeOut;
    }
    values[name] = std::move(s);
  }
  return Error::success();
}

Error GraphImporter::analyze() {
  for (int i = 0, n = graph.nodes.size(); i < n; ++i)
    if (Error e = analyzeNode(i))
      return e;
  for (const TensorInfo &output : graph.outputs)
    if (ValueState *s = state(output.name))
      ++s->uses;
  for (Parameter &p : parameters)
    if (p.readByFolding)
      report.foldedInitializers.push_back(p.name);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

Value GraphImporter::parameterIR(ValueState &value) {
  Parameter &p = parameters[value.parameter];
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  if (!p.argument) {
    p.argument =
        body->addArgument(RankedTensorType::get(p.shape, b.getF32Type()), loc);
    p.compute = p.argument;
    if (compute != b.getF32Type())
      p.compute = CastOp::create(b, loc, p.argument, compute);
  }
  if (!value.transposedView)
    return p.compute;
  return TransposeOp::create(b, loc, p.compute, ArrayRef<int64_t>{1, 0});
}

void GraphImporter::define(StringRef name, Value value) {
  if (ValueState *s = state(name))
    s->ir = value;
}

Value GraphImporter::ir(StringRef name) {
  ValueState *s = state(name);
  if (!s)
    return fail("value '" + name + "' is not defined");
  if (s->ir || failed())
    return s->ir;
  switch (s->kind) {
  case ValueKind::Input:
    return fail("graph input '" + name + "' is not the token ids or labels");
  case ValueKind::Parameter:
    return s->ir = parameterIR(*s);
  case ValueKind::Constant: // a folded node's result, or an initializer
    return s->ir = constantOf(
               *s->data, s->type,
               s->producer >= 0
                   ? locationOf(graph.nodes[s->producer])
                   : Location(FileLineColLoc::get(&context, path, 0, 0)));
  case ValueKind::Computed:
    break;
  }
  const OnnxNode &node = graph.nodes[s->producer];
  if (s->weightLike || !fusePatterns(*this, node))
    if (!failed())
      lowerNode(*this, node);
  if (!failed() && !s->ir)
    return fail(node, "internal error: output '" + name + "' was not built");
  return s->ir;
}

Value GraphImporter::lossOf(StringRef output) {
  ValueState *s = state(output);
  if (!s)
    return fail("graph output '" + output + "' is not computed by any node");
  const ValueType &type = s->type;
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  if (isFloat(type.dtype) && type.shape.empty()) {
    if (labelsName.empty())
      return fail("graph output '" + output +
                  "' is a scalar, but the graph takes no labels input");
    report.returnsLoss = true;
    Value loss = ir(output);
    if (loss && getElementTypeOrSelf(loss.getType()) != b.getF32Type())
      loss = CastOp::create(b, loc, loss, b.getF32Type());
    return loss;
  }
  if (isFloat(type.dtype) && type.shape.size() == 3 &&
      type.shape[0] == microBatch && type.shape[1] == seqLen) {
    Value logits = ir(output);
    if (!logits)
      return Value();
    noteFused("cross_entropy");
    return CrossEntropyOp::create(b, loc, logits, labels);
  }
  return fail("graph output '" + output + "' has shape " +
              shapeText(type.shape) +
              ": Loom takes logits [batch, sequence, vocabulary] or a scalar "
              "loss");
}

Error GraphImporter::buildFunction() {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto draft =
      func::FuncOp::create(b, loc, "forward", b.getFunctionType({}, {}));
  body = draft.addEntryBlock();
  auto idsType = RankedTensorType::get({microBatch, seqLen}, b.getI32Type());
  tokens = body->addArgument(idsType, loc);
  labels = body->addArgument(idsType, loc);
  values[tokensName].ir = tokens;
  if (!labelsName.empty())
    values[labelsName].ir = labels;
  b.setInsertionPointToEnd(body);
  Value loss = lossOf(graph.outputs.front().name);
  if (!loss || failed()) {
    draft.erase();
    return createStringError(inconvertibleErrorCode(), *error);
  }
  func::ReturnOp::create(b, loc, loss);
  return finish(draft);
}

Error GraphImporter::finish(func::FuncOp draft) {
  Location loc = draft.getLoc();
  SmallVector<Parameter *> used;
  for (Parameter &p : parameters)
    if (p.argument)
      used.push_back(&p);
  llvm::sort(used, [&](Parameter *x, Parameter *y) {
    if (weights && x->weightsIndex != y->weightsIndex)
      return x->weightsIndex < y->weightsIndex;
    return x->graphIndex < y->graphIndex;
  });
  SmallVector<Type> inputs;
  for (Parameter *p : used)
    inputs.push_back(p->argument.getType());
  inputs.append({tokens.getType(), labels.getType()});
  b.setInsertionPointToEnd(module->getBody());
  auto forward = func::FuncOp::create(
      b, loc, "forward",
      b.getFunctionType(inputs, {RankedTensorType::get({}, b.getF32Type())}));
  Block *entry = forward.addEntryBlock();
  for (auto [i, p] : llvm::enumerate(used)) {
    p->argument.replaceAllUsesWith(entry->getArgument(i));
    forward.setArgAttr(i, kNameAttr, b.getStringAttr(p->name));
  }
  tokens.replaceAllUsesWith(entry->getArgument(used.size()));
  labels.replaceAllUsesWith(entry->getArgument(used.size() + 1));
  forward.setArgAttr(used.size(), kNameAttr, b.getStringAttr("tokens"));
  forward.setArgAttr(used.size() + 1, kNameAttr, b.getStringAttr("labels"));
  entry->getOperations().splice(entry->end(), body->getOperations());
  draft.erase();
  simplifyImported(forward);
  markLayers(forward);
  if (mlir::failed(verify(*module)))
    return createStringError(inconvertibleErrorCode(),
                             "%s: internal error: the imported module does "
                             "not verify",
                             path.c_str());
  return Error::success();
}

Expected<OnnxImport> GraphImporter::run() {
  report.producer = graph.producer;
  report.opset = graph.opset;
  report.graphNodes = graph.nodes.size();
  if (graph.opset < 13)
    return createStringError(inconvertibleErrorCode(),
                             "%s: opset %lld: Loom imports opsets 13 and "
                             "later (export with opset_version=17)",
                             path.c_str(), (long long)graph.opset);
  if (Error e = setUpInputs())
    return std::move(e);
  if (Error e = setUpParameters())
    return std::move(e);
  if (Error e = analyze())
    return std::move(e);
  if (Error e = buildFunction())
    return std::move(e);
  OnnxImport result;
  result.module = std::move(module);
  auto forward = result.module->lookupSymbol<func::FuncOp>("forward");
  for (BlockArgument arg : forward.getArguments()) {
    auto name =
        forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    for (const Parameter &p : parameters)
      if (p.argument && p.name == name.getValue())
        result.parameters.push_back(
            {p.name, SmallVector<int64_t>(p.shape.begin(), p.shape.end()),
             options.parameterValues ? p.values() : std::vector<float>()});
  }
  result.report = std::move(report);
  return result;
}

} // namespace loom::onnx_import

namespace loom {

bool isOnnxPath(StringRef path) {
  return llvm::sys::path::extension(path).equals_insensitive(".onnx");
}

Expected<OnnxImport> importOnnx(MLIRContext &context, StringRef path,
                                const OnnxImportOptions &options) {
  auto graph = onnx_import::readOnnxModel(path);
  if (!graph)
    return graph.takeError();
  // The emission recurses along the graph's dependences (a few dozen
  // frames per layer): run it on a thread with a large stack.
  std::optional<Expected<OnnxImport>> result;
  llvm::thread worker(std::optional<unsigned>(256u << 20), [&] {
    onnx_import::GraphImporter importer(context, *graph, path, options);
    result.emplace(importer.run());
  });
  worker.join();
  return std::move(*result);
}

} // namespace loom
