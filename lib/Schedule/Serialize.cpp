//===- Serialize.cpp - A schedule as JSON ---------------------------------===//

#include "loom/Schedule/Serialize.h"
#include "loom/Support/Json.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace llvm;

namespace loom::sched {

std::string scheduleToJson(const Schedule &schedule) {
  // Written by hand rather than through json::Value so that every
  // instruction sits on its own line: the files are read by people too.
  std::string text;
  raw_string_ostream os(text);
  os << formatv("{{\"format\": \"loom-schedule\", \"version\": 1, "
                "\"kind\": \"{0}\", \"ranks\": {1}, \"micro_batches\": {2}, "
                "\"virtual_stages\": {3},\n \"streams\": [",
                stringifyScheduleKind(schedule.kind), schedule.numRanks,
                schedule.numMicroBatches, schedule.virtualStages);
  for (auto [r, stream] : enumerate(schedule.streams)) {
    os << (r ? ",\n  [" : "\n  [");
    for (auto [i, instr] : enumerate(stream)) {
      // Keys in reading order: op, stage, mb, peer.
      os << (i ? ",\n   " : "\n   ") << "{\"op\": \""
         << stringifyInstrKind(instr.kind) << "\"";
      if (instr.kind != InstrKind::AllReduceGradients &&
          instr.kind != InstrKind::Optimizer)
        os << ", \"stage\": " << instr.stage
           << ", \"mb\": " << instr.microBatch;
      if (isTransfer(instr.kind))
        os << ", \"peer\": " << instr.peer;
      os << "}";
    }
    os << "]";
  }
  os << "]}\n";
  return text;
}

namespace {

/// An integer member `key` of `object` at path `path`.
Expected<int> getInt(const json::Object &object, StringRef key,
                     const Twine &path) {
  const json::Value *value = object.get(key);
  if (!value)
    return createStringError((path + "." + key + ": missing").str());
  std::optional<int64_t> number = value->getAsInteger();
  if (!number || *number < INT32_MIN || *number > INT32_MAX)
    return createStringError(
        (path + "." + key + ": expected an integer").str());
  return int(*number);
}

Expected<Instr> parseInstr(const json::Value &value, const Twine &path) {
  const json::Object *object = value.getAsObject();
  if (!object)
    return createStringError((path + ": expected an object").str());
  std::optional<StringRef> op = object->getString("op");
  if (!op)
    return createStringError((path + ".op: expected a string").str());
  std::optional<InstrKind> kind = parseInstrKind(*op);
  if (!kind)
    return createStringError(
        (path + ".op: unknown instruction \"" + *op + "\"").str());
  Instr instr{*kind};
  if (*kind == InstrKind::AllReduceGradients || *kind == InstrKind::Optimizer)
    return instr;
  Expected<int> stage = getInt(*object, "stage", path);
  if (!stage)
    return stage.takeError();
  Expected<int> mb = getInt(*object, "mb", path);
  if (!mb)
    return mb.takeError();
  instr.stage = *stage;
  instr.microBatch = *mb;
  if (isTransfer(*kind)) {
    Expected<int> peer = getInt(*object, "peer", path);
    if (!peer)
      return peer.takeError();
    instr.peer = *peer;
  }
  return instr;
}

} // namespace

Expected<Schedule> parseSchedule(StringRef text) {
  Expected<json::Value> root = parseJson(text);
  if (!root)
    return createStringError("invalid JSON: " + toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  if (!object)
    return createStringError("expected a JSON object");
  if (object->getString("format") != StringRef("loom-schedule"))
    return createStringError("format: expected \"loom-schedule\"");
  Expected<int> version = getInt(*object, "version", "");
  if (!version)
    return version.takeError();
  if (*version != 1)
    return createStringError(
        formatv("version: unsupported version {0}, expected 1", *version));
  std::optional<StringRef> kindName = object->getString("kind");
  if (!kindName)
    return createStringError("kind: expected a string");
  std::optional<ScheduleKind> kind = parseScheduleKind(*kindName);
  if (!kind)
    return createStringError("kind: unknown schedule \"" + *kindName + "\"");
  Schedule schedule{*kind, 1, 1, 1, {}};
  for (auto [key, field] :
       {std::pair<StringRef, int *>{"ranks", &schedule.numRanks},
        {"micro_batches", &schedule.numMicroBatches},
        {"virtual_stages", &schedule.virtualStages}}) {
    Expected<int> value = getInt(*object, key, "");
    if (!value)
      return value.takeError();
    *field = *value;
  }
  const json::Array *streams = object->getArray("streams");
  if (!streams)
    return createStringError("streams: expected an array");
  for (auto [r, streamValue] : enumerate(*streams)) {
    const json::Array *stream = streamValue.getAsArray();
    std::string path = formatv("streams[{0}]", r).str();
    if (!stream)
      return createStringError(path + ": expected an array");
    schedule.streams.emplace_back();
    for (auto [i, value] : enumerate(*stream)) {
      Expected<Instr> instr = parseInstr(value, formatv("{0}[{1}]", path, i));
      if (!instr)
        return instr.takeError();
      schedule.streams.back().push_back(*instr);
    }
  }
  return schedule;
}

} // namespace loom::sched
