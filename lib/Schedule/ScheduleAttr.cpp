//===- ScheduleAttr.cpp - A schedule as an MLIR attribute -----------------===//

#include "loom/Schedule/ScheduleAttr.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace loom::sched {

DictionaryAttr scheduleToAttr(MLIRContext *context, const Schedule &schedule) {
  Builder b(context);
  SmallVector<Attribute> streams;
  for (const std::vector<Instr> &stream : schedule.streams) {
    SmallVector<Attribute> instrs;
    for (const Instr &instr : stream)
      instrs.push_back(b.getStringAttr(describeInstr(instr)));
    streams.push_back(b.getArrayAttr(instrs));
  }
  return b.getDictionaryAttr(
      {b.getNamedAttr("kind",
                      b.getStringAttr(stringifyScheduleKind(schedule.kind))),
       b.getNamedAttr("ranks", b.getI64IntegerAttr(schedule.numRanks)),
       b.getNamedAttr("micro_batches",
                      b.getI64IntegerAttr(schedule.numMicroBatches)),
       b.getNamedAttr("virtual_stages",
                      b.getI64IntegerAttr(schedule.virtualStages)),
       b.getNamedAttr("streams", b.getArrayAttr(streams))});
}

llvm::Expected<Schedule> scheduleFromAttr(Attribute attr) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  auto dict = dyn_cast_or_null<DictionaryAttr>(attr);
  if (!dict)
    return error("expected a dictionary");
  auto kindAttr = dict.getAs<StringAttr>("kind");
  if (!kindAttr)
    return error("kind: missing");
  std::optional<ScheduleKind> kind = parseScheduleKind(kindAttr.getValue());
  if (!kind)
    return error("kind: unknown schedule \"" + kindAttr.getValue() + "\"");
  Schedule schedule{*kind};
  for (auto [name, slot] :
       {std::pair<StringRef, int *>{"ranks", &schedule.numRanks},
        {"micro_batches", &schedule.numMicroBatches},
        {"virtual_stages", &schedule.virtualStages}}) {
    auto value = dict.getAs<IntegerAttr>(name);
    if (!value || value.getInt() < 1)
      return error(name + ": expected a positive integer");
    *slot = value.getInt();
  }
  auto streams = dict.getAs<ArrayAttr>("streams");
  if (!streams || int64_t(streams.size()) != schedule.numRanks)
    return error("streams: expected one stream per rank");
  for (auto [r, streamAttr] : llvm::enumerate(streams)) {
    auto stream = dyn_cast<ArrayAttr>(streamAttr);
    if (!stream)
      return error("streams[" + llvm::Twine(r) + "]: expected an array");
    std::vector<Instr> &instrs = schedule.streams.emplace_back();
    for (auto [i, entry] : llvm::enumerate(stream)) {
      auto text = dyn_cast<StringAttr>(entry);
      std::optional<Instr> instr =
          text ? parseInstr(text.getValue()) : std::nullopt;
      if (!instr) {
        std::string what =
            text ? (": \"" + text.getValue() + "\"").str() : std::string();
        return error("streams[" + llvm::Twine(r) + "][" + llvm::Twine(i) +
                     "]: not an instruction" + what);
      }
      instrs.push_back(*instr);
    }
  }
  return schedule;
}

} // namespace loom::sched
