//===- Artifact.h - A loaded model.loom artifact ----------------*- C++ -*-===//
//
// plan.json and schedule.json read into plain structs, and program.so
// opened with its functions resolved. Built with exceptions (nlohmann
// json); every error becomes a message at the C ABI boundary.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_ARTIFACT_H
#define LOOM_RUNTIME_EXECUTOR_ARTIFACT_H

#include "loom/loom_program.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::rt {

/// An argument or result of a compiled function.
struct TensorSpec {
  std::string role, name, value; ///< loom.role, loom.name, loom.value
  loom_dtype dtype = LOOM_DTYPE_F32;
  std::vector<int64_t> shape, globalShape;
  std::vector<std::vector<int64_t>> splitAxes; ///< grid axes per dimension
  std::vector<int64_t> tiedStages;

  int64_t numElements() const;
  int64_t bytes() const;
  /// "<role>:<name>" for the step's own tensors, "" for stage values.
  std::string stepKey() const;
};

/// The CPU signature of a compiled function; other backends' take more
/// (the CUDA one, a context) and cast Function::symbol themselves.
using EntryFn = int32_t (*)(const loom_call_frame *);

struct Function {
  std::string name, kind; ///< kind: "" or a stage function kind
  int64_t stage = -1;
  std::vector<TensorSpec> args, results;
  int64_t workspaceBytes = 0, peakLiveBytes = 0;
  void *symbol = nullptr;  ///< loom_fn_<name> in program.so
  EntryFn entry = nullptr; ///< symbol, for a "cpu" artifact only
};

/// One instruction of a pipeline rank's stream (loom/Schedule/Schedule.h).
struct Instr {
  std::string op;
  int64_t stage = -1, microBatch = -1, peer = -1;
  std::string describe() const;
};

struct Artifact {
  std::string path;
  std::string backend = "cpu";    ///< plan.json's "backend": "cpu" or "cuda"
  std::vector<int64_t> gridShape; ///< empty: one device per stage
  std::vector<std::vector<int64_t>> groups;
  std::vector<Function> functions;
  /// Pipelined steps: the schedule; else empty and `train_step` runs.
  int64_t pipelineRanks = 1, microBatches = 1;
  /// The global batch of a step (all micro-batches): rows x sequence length,
  /// from the functions' token arguments; 0 when none takes tokens.
  int64_t batchRows = 0, seqLen = 0;
  /// plan.json's "vocab_size": every token id must be below it; 0 when the
  /// plan does not say (an older artifact, or one compiled from LLVM IR).
  int64_t vocabSize = 0;
  std::vector<std::vector<Instr>> streams;
  void *library = nullptr;

  int64_t devices() const;
  int64_t worldSize() const { return pipelineRanks * devices(); }
  const Function *find(const std::string &name) const;
  const Function *stageFunction(int64_t stage, const std::string &kind) const;

  /// Opens what a backend's program.so calls (its kernel library) before
  /// program.so loads: "" or why the backend cannot run here.
  using OpenBackend = std::function<std::string(const std::string &backend)>;
  /// Reads `dir`, an artifact plan.json says was compiled for `backend`
  /// (loom-compile --target; "": either, kept in `backend`); returns "" or
  /// an error message. program.so's kernel calls must resolve against a
  /// kernel library loaded already, or one `openBackend` loads.
  std::string load(const std::string &dir, const std::string &backend = "cpu",
                   const OpenBackend &openBackend = nullptr);
  /// Reads plan.json's text alone (what load does first): "" or an error
  /// message. Never throws.
  std::string parsePlanText(const std::string &planPath,
                            const std::string &planText,
                            const std::string &backend);
  ~Artifact();

private:
  /// Read and check plan.json / schedule.json: every field's type and range,
  /// shapes against the grid; throw or return a message.
  std::string parsePlan(const std::string &planPath,
                        const std::string &planText,
                        const std::string &backend);
  std::string parseSchedule(const std::string &schedulePath,
                            const std::string &scheduleText);
};

/// "" when `path` is an ELF shared object for this machine whose headers
/// and segments lie inside the file; else what is wrong (SharedObject.cpp).
std::string checkSharedObject(const std::string &path);

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTOR_ARTIFACT_H
