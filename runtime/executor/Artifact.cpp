//===- Artifact.cpp - Loading model.loom ----------------------------------===//

#include "Artifact.h"

#include "loom/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <set>
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

/// plan.json and schedule.json are small; a file past this is not one.
constexpr int64_t kMaxPlanBytes = int64_t(256) << 20;
/// Limits that keep every size the session computes inside int64_t (and
/// every allocation sensible): at most this many bytes in one buffer...
constexpr int64_t kMaxBufferBytes = int64_t(1) << 48;
/// ...tensors of at most this rank, grids of at most this many axes and
/// devices.
constexpr size_t kMaxRank = 16;
constexpr size_t kMaxGridAxes = 8;
constexpr int64_t kMaxDevices = int64_t(1) << 20;

[[noreturn]] void invalid(const std::string &where, const std::string &what) {
  throw std::runtime_error(where + ": " + what);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, size_t(in.gcount()));
    if (int64_t(text.size()) > kMaxPlanBytes)
      invalid(path, "larger than " + std::to_string(kMaxPlanBytes >> 20) +
                        " MiB: not a plan Loom wrote");
  }
  return text;
}

/// nlohmann's parser recurses once per level: bounded first.
json parseBounded(const std::string &text, const std::string &path) {
  if (std::optional<size_t> at = findJsonTooDeep(text))
    invalid(path, "JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels (at byte " + std::to_string(*at) + ")");
  // nlohmann keeps the last of two equal keys: refused, as the tools'
  // parseJson does, so that an edited plan never takes a hidden value.
  std::vector<std::set<std::string>> objects;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start)
      objects.emplace_back();
    else if (event == json::parse_event_t::object_end && !objects.empty())
      objects.pop_back();
    else if (event == json::parse_event_t::key && !objects.empty() &&
             !objects.back().insert(parsed.get<std::string>()).second &&
             duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json value = json::parse(text, callback, /*allow_exceptions=*/false);
  if (value.is_discarded())
    invalid(path, "not valid JSON");
  if (!duplicate.empty())
    invalid(path, "duplicate key \"" + duplicate + "\"");
  return value;
}

const json &member(const json &object, const char *key,
                   const std::string &where) {
  if (!object.is_object())
    invalid(where, "not a JSON object");
  auto it = object.find(key);
  if (it == object.end())
    invalid(where, std::string("missing \"") + key + "\"");
  return *it;
}

/// An integer written as one (not 2.0, not "2") in [low, high].
int64_t integer(const json &value, int64_t low, int64_t high,
                const std::string &where) {
  if (!value.is_number_integer())
    invalid(where, "must be an integer, not " + value.dump());
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
    invalid(where, value.dump() + " is out of range");
  int64_t n = value.get<int64_t>();
  if (n < low || n > high)
    invalid(where, value.dump() + " is outside [" + std::to_string(low) + ", " +
                       std::to_string(high) + "]");
  return n;
}

std::string stringValue(const json &value, const std::string &where) {
  if (!value.is_string())
    invalid(where, "must be a string, not " + value.dump());
  return value.get<std::string>();
}

const json &array(const json &value, const std::string &where,
                  size_t maxSize = SIZE_MAX) {
  if (!value.is_array())
    invalid(where, "must be an array");
  if (value.size() > maxSize)
    invalid(where, "has " + std::to_string(value.size()) +
                       " entries, more than " + std::to_string(maxSize));
  return value;
}

std::string optionalString(const json &object, const char *key,
                           const std::string &where) {
  auto it = object.find(key);
  return it == object.end() ? "" : stringValue(*it, where + "." + key);
}

loom_dtype parseDtype(const std::string &name, const std::string &where) {
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
  invalid(where, "unknown dtype \"" + name + "\"");
}

/// Positive dimensions whose product, times `elementBytes`, stays within
/// kMaxBufferBytes.
std::vector<int64_t> shape(const json &value, int64_t elementBytes,
                           const std::string &where) {
  std::vector<int64_t> dims;
  int64_t bytes = elementBytes;
  for (size_t d = 0; d < array(value, where, kMaxRank).size(); ++d) {
    int64_t dim = integer(value[d], 1, kMaxBufferBytes,
                          where + "[" + std::to_string(d) + "]");
    if (bytes > kMaxBufferBytes / dim)
      invalid(where, value.dump() + " holds more than 2^48 bytes");
    bytes *= dim;
    dims.push_back(dim);
  }
  return dims;
}

TensorSpec parseTensor(const json &j, const std::vector<int64_t> &grid,
                       const std::string &where) {
  TensorSpec spec;
  spec.role = optionalString(j, "role", where);
  spec.name = optionalString(j, "name", where);
  spec.value = optionalString(j, "value", where);
  spec.dtype = parseDtype(
      stringValue(member(j, "dtype", where), where + ".dtype"), where);
  int64_t element = loom_dtype_bytes(spec.dtype);
  spec.shape = shape(member(j, "shape", where), element, where + ".shape");
  spec.globalShape =
      shape(member(j, "global_shape", where), element, where + ".global_shape");
  if (spec.globalShape.size() != spec.shape.size())
    invalid(where, "global_shape and shape differ in rank");
  const json &split = array(member(j, "split_axes", where),
                            where + ".split_axes", spec.shape.size());
  std::vector<bool> used(grid.size(), false);
  for (size_t d = 0; d < split.size(); ++d) {
    std::string at = where + ".split_axes[" + std::to_string(d) + "]";
    std::vector<int64_t> axes;
    int64_t parts = 1;
    if (!array(split[d], at).empty() && grid.empty())
      invalid(at, "splits over a grid axis, but the plan has no grid");
    for (const json &axis : array(split[d], at, grid.size())) {
      int64_t a = integer(axis, 0, int64_t(grid.size()) - 1, at);
      if (used[a])
        invalid(at, "grid axis " + std::to_string(a) + " splits twice");
      used[a] = true;
      axes.push_back(a);
      parts *= grid[a];
    }
    spec.splitAxes.push_back(std::move(axes));
    if (spec.shape[d] > spec.globalShape[d] / parts ||
        spec.shape[d] * parts != spec.globalShape[d])
      invalid(where, "dimension " + std::to_string(d) + ": global size " +
                         std::to_string(spec.globalShape[d]) + " is not " +
                         std::to_string(spec.shape[d]) + " x " +
                         std::to_string(parts) + " shards");
  }
  for (size_t d = split.size(); d < spec.shape.size(); ++d)
    if (spec.shape[d] != spec.globalShape[d])
      invalid(where, "dimension " + std::to_string(d) +
                         " is not split but its global size differs");
  if (auto it = j.find("tied_stages"); it != j.end())
    for (const json &stage : array(*it, where + ".tied_stages", 1 << 16))
      spec.tiedStages.push_back(
          integer(stage, 0, 1 << 16, where + ".tied_stages"));
  return spec;
}

/// A C identifier: loom_fn_<name> must be a symbol.
bool isIdentifier(const std::string &name) {
  if (name.empty() || name.size() > 256 || std::isdigit((unsigned char)name[0]))
    return false;
  for (char c : name)
    if (!std::isalnum((unsigned char)c) && c != '_')
      return false;
  return true;
}

Function parseFunction(const json &f, const std::vector<int64_t> &grid,
                       const std::string &where) {
  Function fn;
  fn.name = stringValue(member(f, "name", where), where + ".name");
  if (!isIdentifier(fn.name))
    invalid(where, "function name \"" + fn.name + "\" is not an identifier");
  std::string at = where + " (" + fn.name + ")";
  fn.kind = optionalString(f, "kind", at);
  static const char *const kinds[] = {
      "",         "forward", "backward", "backward_input", "backward_weight",
      "optimizer"};
  if (std::find(std::begin(kinds), std::end(kinds), fn.kind) == std::end(kinds))
    invalid(at, "unknown kind \"" + fn.kind + "\"");
  if (auto it = f.find("stage"); it != f.end())
    fn.stage = integer(*it, 0, 1 << 16, at + ".stage");
  if (fn.kind.empty() != (fn.stage < 0))
    invalid(at, "a stage function has both a kind and a stage");
  for (const char *list : {"args", "results"}) {
    const json &entries =
        array(member(f, list, at), at + "." + list, size_t(1) << 20);
    for (size_t i = 0; i < entries.size(); ++i)
      (list[0] == 'a' ? fn.args : fn.results)
          .push_back(
              parseTensor(entries[i], grid,
                          at + "." + list + "[" + std::to_string(i) + "]"));
  }
  fn.workspaceBytes = integer(member(f, "workspace_bytes", at), 0,
                              kMaxBufferBytes, at + ".workspace_bytes");
  fn.peakLiveBytes = integer(member(f, "peak_live_bytes", at), 0,
                             kMaxBufferBytes, at + ".peak_live_bytes");
  return fn;
}

} // namespace

std::string Artifact::parsePlan(const std::string &planPath,
                                const std::string &planText,
                                const std::string &backend) {
  json plan = parseBounded(planText, planPath);
  if (!plan.is_object() || plan.value("format", json()) != "loom-plan")
    return planPath + ": not a Loom plan (no \"format\": \"loom-plan\")";
  const json &abi = member(plan, "abi_version", planPath);
  if (!abi.is_number_integer() ||
      abi.get<int64_t>() != LOOM_PROGRAM_ABI_VERSION)
    return planPath + ": compiled for ABI version " + abi.dump() +
           ", this runtime takes " + std::to_string(LOOM_PROGRAM_ABI_VERSION) +
           " (recompile)";
  // Each runtime runs the artifacts of its own --target (plan.json's
  // "backend"; older artifacts have none and are cpu).
  std::string compiled = "cpu";
  if (plan.contains("backend"))
    compiled = stringValue(plan["backend"], planPath + ": backend");
  if (!backend.empty() && compiled != backend)
    return planPath + ": compiled for the " + compiled +
           " backend (loom-compile --target=" + compiled +
           "); this runtime runs --target=" + backend + " artifacts";
  if (compiled != "cpu" && compiled != "cuda")
    return planPath + ": unknown backend \"" + compiled + "\"";
  this->backend = compiled;
  // Optional: without it the tools cannot check a token file's ids before
  // the first step, and an id past the table fails inside the step.
  if (plan.contains("vocab_size"))
    vocabSize =
        integer(plan["vocab_size"], 1, INT64_MAX, planPath + ": vocab_size");
  if (plan.contains("grid")) {
    std::string at = planPath + ": grid.shape";
    const json &dims = array(member(plan["grid"], "shape", planPath + ": grid"),
                             at, kMaxGridAxes);
    int64_t devices = 1;
    for (const json &dim : dims) {
      gridShape.push_back(integer(dim, 1, kMaxDevices, at));
      if (devices > kMaxDevices / gridShape.back())
        invalid(at, "more than 2^20 devices");
      devices *= gridShape.back();
    }
  }
  const json &groupList = array(member(plan, "groups", planPath),
                                planPath + ": groups", size_t(1) << 8);
  for (size_t g = 0; g < groupList.size(); ++g) {
    std::string at = planPath + ": groups[" + std::to_string(g) + "]";
    std::vector<int64_t> axes;
    for (const json &axis : array(groupList[g], at, gridShape.size())) {
      axes.push_back(integer(axis, 0, int64_t(gridShape.size()) - 1, at));
      if (std::count(axes.begin(), axes.end(), axes.back()) > 1)
        invalid(at, "names an axis twice");
    }
    groups.push_back(std::move(axes));
  }
  const json &list = array(member(plan, "functions", planPath),
                           planPath + ": functions", size_t(1) << 16);
  for (size_t i = 0; i < list.size(); ++i) {
    Function fn =
        parseFunction(list[i], gridShape,
                      planPath + ": functions[" + std::to_string(i) + "]");
    if (find(fn.name))
      return planPath + ": function " + fn.name + " appears twice";
    functions.push_back(std::move(fn));
  }
  if (functions.empty())
    return planPath + ": lists no function";
  return "";
}

std::string Artifact::parseSchedule(const std::string &schedulePath,
                                    const std::string &scheduleText) {
  json schedule = parseBounded(scheduleText, schedulePath);
  pipelineRanks = integer(member(schedule, "ranks", schedulePath), 1, 1 << 16,
                          schedulePath + ": ranks");
  microBatches = integer(member(schedule, "micro_batches", schedulePath), 1,
                         1 << 20, schedulePath + ": micro_batches");
  int64_t stages = 0;
  for (const Function &fn : functions)
    stages = std::max(stages, fn.stage + 1);
  const json &list = array(member(schedule, "streams", schedulePath),
                           schedulePath + ": streams", 1 << 16);
  for (size_t r = 0; r < list.size(); ++r) {
    std::string at = schedulePath + ": streams[" + std::to_string(r) + "]";
    std::vector<Instr> instrs;
    for (const json &i : array(list[r], at, size_t(1) << 24)) {
      Instr instr{stringValue(member(i, "op", at), at + ".op"), -1, -1, -1};
      if (i.contains("stage"))
        instr.stage = integer(i["stage"], 0, stages - 1, at + ".stage");
      if (i.contains("mb"))
        instr.microBatch = integer(i["mb"], 0, microBatches - 1, at + ".mb");
      if (i.contains("peer"))
        instr.peer = integer(i["peer"], 0, pipelineRanks - 1, at + ".peer");
      instrs.push_back(std::move(instr));
    }
    streams.push_back(std::move(instrs));
  }
  if (int64_t(streams.size()) != pipelineRanks)
    return schedulePath + ": " + std::to_string(streams.size()) +
           " streams for " + std::to_string(pipelineRanks) + " ranks";
  return "";
}

std::string Artifact::parsePlanText(const std::string &planPath,
                                    const std::string &planText,
                                    const std::string &backend) {
  try {
    return parsePlan(planPath, planText, backend);
  } catch (const std::exception &e) {
    return e.what();
  }
}

std::string Artifact::load(const std::string &dir, const std::string &backend,
                           const OpenBackend &openBackend) {
  path = dir;
  std::string planPath = dir + "/plan.json";
  std::string schedulePath = dir + "/schedule.json";
  uint64_t digest = LOOM_PLAN_DIGEST_SEED;
  try {
    // A directory without plan.json (a checkpoint, a build tree) is not
    // something loom-compile wrote: say so rather than "cannot read".
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec) &&
        !std::filesystem::exists(planPath, ec))
      throw std::runtime_error(
          "not a loom-compile artifact (it has no plan.json)");
    std::string planText = readFile(planPath);
    digest = loom_plan_digest_update(digest, planText.data(), planText.size());
    if (std::string error = parsePlan(planPath, planText, backend);
        !error.empty())
      return error;
    if (std::ifstream(schedulePath)) {
      std::string scheduleText = readFile(schedulePath);
      digest = loom_plan_digest_update(digest, scheduleText.data(),
                                       scheduleText.size());
      if (std::string error = parseSchedule(schedulePath, scheduleText);
          !error.empty())
        return error;
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

  if (openBackend)
    if (std::string error = openBackend(this->backend); !error.empty())
      return error;
  std::string libraryPath = dir + "/program.so";
  // dlopen maps the file's segments as its headers say: a truncated file
  // would fault (SIGBUS) on the first page past its end.
  if (std::string error = checkSharedObject(libraryPath); !error.empty())
    return libraryPath + ": " + error;
  library = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return std::string("cannot load ") + libraryPath + ": " + dlerror();
  auto version = reinterpret_cast<int32_t (*)()>(
      dlsym(library, "loom_program_abi_version"));
  if (!version || version() != LOOM_PROGRAM_ABI_VERSION)
    return libraryPath + ": not compiled for ABI version " +
           std::to_string(LOOM_PROGRAM_ABI_VERSION) + " (recompile)";
  auto planDigest = reinterpret_cast<uint64_t (*)()>(
      dlsym(library, "loom_program_plan_digest"));
  if (!planDigest || planDigest() != digest)
    return planPath + ": does not match " + libraryPath +
           " (edited, or from another compile): recompile the artifact";
  for (Function &fn : functions) {
    std::string symbol = "loom_fn_" + fn.name;
    fn.symbol = dlsym(library, symbol.c_str());
    if (!fn.symbol)
      return libraryPath + ": no symbol " + symbol;
    if (this->backend == "cpu")
      fn.entry = reinterpret_cast<EntryFn>(fn.symbol);
  }
  return "";
}

} // namespace loom::rt
