//===- Artifact.cpp - Loading model.loom ----------------------------------===//

#include "Artifact.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace loom::rt {

using nlohmann::json;

int64_t TensorSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t TensorSpec::bytes() const {
  return numElements() * loom_dtype_bytes(dtype);
}

std::string TensorSpec::stepKey() const {
  if (!value.empty() || role.empty())
    return "";
  if (role == "loss")
    return "loss";
  return role + ":" + name;
}

std::string Instr::describe() const {
  std::string text = op;
  if (stage >= 0)
    text += " stage " + std::to_string(stage);
  if (microBatch >= 0)
    text += " mb " + std::to_string(microBatch);
  if (peer >= 0)
    text += " peer " + std::to_string(peer);
  return text;
}

int64_t Artifact::devices() const {
  int64_t n = 1;
  for (int64_t d : gridShape)
    n *= d;
  return n;
}

const Function *Artifact::find(const std::string &name) const {
  for (const Function &fn : functions)
    if (fn.name == name)
      return &fn;
  return nullptr;
}

const Function *Artifact::stageFunction(int64_t stage,
                                        const std::string &kind) const {
  for (const Function &fn : functions)
    if (fn.stage == stage && fn.kind == kind)
      return &fn;
  return nullptr;
}

Artifact::~Artifact() {
  if (library)
    dlclose(library);
}

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

loom_dtype parseDtype(const std::string &name) {
  if (name == "f32")
    return LOOM_DTYPE_F32;
  if (name == "f64")
    return LOOM_DTYPE_F64;
  if (name == "i32")
    return LOOM_DTYPE_I32;
  if (name == "i64")
    return LOOM_DTYPE_I64;
  if (name == "bf16")
    return LOOM_DTYPE_BF16;
  throw std::runtime_error("unknown dtype \"" + name + "\"");
}

TensorSpec parseTensor(const json &j) {
  TensorSpec spec;
  spec.role = j.value("role", "");
  spec.name = j.value("name", "");
  spec.value = j.value("value", "");
  spec.dtype = parseDtype(j.at("dtype").get<std::string>());
  spec.shape = j.at("shape").get<std::vector<int64_t>>();
  spec.globalShape = j.at("global_shape").get<std::vector<int64_t>>();
  spec.splitAxes = j.at("split_axes").get<std::vector<std::vector<int64_t>>>();
  if (j.contains("tied_stages"))
    spec.tiedStages = j.at("tied_stages").get<std::vector<int64_t>>();
  if (spec.globalShape.size() != spec.shape.size())
    throw std::runtime_error("global_shape and shape differ in rank");
  return spec;
}

} // namespace

std::string Artifact::load(const std::string &dir, const std::string &backend) {
  path = dir;
  try {
    std::string planPath = dir + "/plan.json";
    json plan = json::parse(readFile(planPath));
    if (plan.value("format", "") != "loom-plan")
      return planPath + ": not a Loom plan (no \"format\": \"loom-plan\")";
    if (plan.at("abi_version").get<int>() != LOOM_PROGRAM_ABI_VERSION)
      return planPath + ": compiled for ABI version " +
             plan.at("abi_version").dump() + ", this runtime takes " +
             std::to_string(LOOM_PROGRAM_ABI_VERSION) + " (recompile)";
    // Each runtime runs the artifacts of its own --target (plan.json's
    // "backend"; older artifacts have none and are cpu).
    if (std::string compiled = plan.value("backend", "cpu");
        compiled != backend)
      return planPath + ": compiled for the " + compiled +
             " backend (loom-compile --target=" + compiled +
             "); this runtime runs --target=" + backend + " artifacts";
    if (plan.contains("grid"))
      gridShape = plan.at("grid").at("shape").get<std::vector<int64_t>>();
    groups = plan.at("groups").get<std::vector<std::vector<int64_t>>>();
    for (const json &f : plan.at("functions")) {
      Function fn;
      fn.name = f.at("name").get<std::string>();
      fn.kind = f.value("kind", "");
      fn.stage = f.value("stage", int64_t(-1));
      for (const json &a : f.at("args"))
        fn.args.push_back(parseTensor(a));
      for (const json &r : f.at("results"))
        fn.results.push_back(parseTensor(r));
      fn.workspaceBytes = f.at("workspace_bytes").get<int64_t>();
      fn.peakLiveBytes = f.at("peak_live_bytes").get<int64_t>();
      functions.push_back(std::move(fn));
    }
    if (functions.empty())
      return planPath + ": lists no function";

    std::string schedulePath = dir + "/schedule.json";
    if (std::ifstream(schedulePath)) {
      json schedule = json::parse(readFile(schedulePath));
      pipelineRanks = schedule.at("ranks").get<int64_t>();
      microBatches = schedule.at("micro_batches").get<int64_t>();
      for (const json &stream : schedule.at("streams")) {
        std::vector<Instr> instrs;
        for (const json &i : stream)
          instrs.push_back(
              {i.at("op").get<std::string>(), i.value("stage", int64_t(-1)),
               i.value("mb", int64_t(-1)), i.value("peer", int64_t(-1))});
        streams.push_back(std::move(instrs));
      }
      if (int64_t(streams.size()) != pipelineRanks)
        return schedulePath + ": " + std::to_string(streams.size()) +
               " streams for " + std::to_string(pipelineRanks) + " ranks";
    } else if (!find("train_step")) {
      return dir + ": no schedule.json and no train_step function";
    }
  } catch (const std::exception &e) {
    return dir + ": " + e.what();
  }
  for (const Function &fn : functions)
    for (const TensorSpec &arg : fn.args)
      if (arg.role == "data" && arg.globalShape.size() == 2) {
        batchRows = arg.globalShape[0] * (streams.empty() ? 1 : microBatches);
        seqLen = arg.globalShape[1];
      }

  std::string libraryPath = dir + "/program.so";
  library = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return std::string("cannot load ") + libraryPath + ": " + dlerror();
  auto version = reinterpret_cast<int32_t (*)()>(
      dlsym(library, "loom_program_abi_version"));
  if (!version || version() != LOOM_PROGRAM_ABI_VERSION)
    return libraryPath + ": not compiled for ABI version " +
           std::to_string(LOOM_PROGRAM_ABI_VERSION);
  for (Function &fn : functions) {
    std::string symbol = "loom_fn_" + fn.name;
    fn.symbol = dlsym(library, symbol.c_str());
    if (!fn.symbol)
      return libraryPath + ": no symbol " + symbol;
    if (backend == "cpu")
      fn.entry = reinterpret_cast<EntryFn>(fn.symbol);
  }
  return "";
}

} // namespace loom::rt
