//===- Compiled.cpp - loom-run on a compiled artifact under MPI -----------===//
//
//   mpirun -np N loom-run model.loom --init CKPT --data TOKENS --steps K
//   loom-run --np N model.loom ...     (starts mpirun itself, one machine)
//   ... --backend=cuda [--comm nccl|staged] (one GPU per rank, or shared)
//   ... --save DIR [--save-every S]    (sharded checkpoint directory)
//   ... --resume DIR                   (instead of --init: K more steps)
//
// Every rank loads the artifact, creates its communicators and its session
// (RankSession.h: the CPU runtime, or the CUDA runtime), takes its shard of the
// initial parameters (or of a checkpoint's state, SessionCheckpoint.h) and of
// every batch, and runs the steps; rank 0 prints one line per step. The
// token file's ids are checked against the vocabulary plan.json records
// before the first step. A watchdog thread on each rank ends the whole job
// (MPI_Abort) when a step makes no progress for --timeout seconds, naming
// the rank and what it was running; a rank that dies is reported by
// mpirun, which ends the others. Under --np, what can be checked before the
// job starts is checked in the launching process (checkBeforeLaunch), where
// an error is one line and not every rank's under OpenMPI's abort banner.
//
//===----------------------------------------------------------------------===//

#include "Compiled.h"
#include "RankSession.h"
#include "SessionCheckpoint.h"

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Checkpoint/ShardedCheckpoint.h"
#include "loom/Data/Batch.h"
#include "loom/Data/TokenFile.h"
#include "loom/Support/AtomicFile.h"
#include "loom/Training/TrainStep.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <unistd.h>

using namespace llvm;

namespace loom::run {

namespace {

using Clock = std::chrono::steady_clock;

/// Prints "loom-run: error: <message>" in one write: several ranks, and
/// mpirun's abort banner, write to the same stream at once, and a line
/// written in pieces comes out interleaved with theirs.
void printError(const Twine &message) {
  std::string line;
  raw_string_ostream os(line);
  os << "loom-run: error: " << message << "\n";
  errs() << line;
  errs().flush();
}

/// Aborts the job when a step makes no progress for `seconds`.
class Watchdog {
public:
  Watchdog(int rank, double seconds, const RankSession &session)
      : rank(rank), seconds(seconds), session(session) {
    if (seconds > 0)
      thread = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    stop = true;
    if (thread.joinable())
      thread.join();
  }
  /// Marks the start (or end, `busy` false) of a step.
  void mark(bool busy) {
    since.store(Clock::now().time_since_epoch().count());
    running.store(busy);
  }

private:
  void watch() {
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!running)
        continue;
      auto start = Clock::time_point(Clock::duration(since.load()));
      double waited =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (waited < seconds)
        continue;
      const char *what = session.current();
      printError(formatv("rank {0}: no progress for {1:f0} s (--timeout) "
                         "while running '{2}'; ending the job",
                         rank, waited, what));
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }

  int rank;
  double seconds;
  const RankSession &session;
  std::atomic<bool> stop{false}, running{false};
  std::atomic<Clock::rep> since{0};
  std::thread thread;
};

} // namespace

std::string nonFiniteLossMessage(int64_t step, double loss) {
  return formatv("step {0}: the loss is {1}; stopping (the parameters or "
                 "the data hold a NaN or an infinity, or training diverged; "
                 "--allow-non-finite-loss trains on)",
                 step, loss)
      .str();
}

Error checkTokenVocabulary(StringRef dataPath, ArrayRef<uint32_t> ids,
                           int64_t vocab) {
  if (vocab <= 0)
    return Error::success();
  if (Error error = checkTokenIds(
          ids, static_cast<uint32_t>(std::min<int64_t>(vocab, UINT32_MAX))))
    return createStringError(dataPath + ": " + toString(std::move(error)));
  return Error::success();
}

namespace {

/// A message of this rank; rank 0 prints errors of every rank it sees.
int failRank(int rank, const Twine &message) {
  printError("rank " + Twine(rank) + ": " + message);
  return 1;
}

/// Loads the initial parameters into the session (m and v stay zero).
Error loadInit(RankSession &session, StringRef path) {
  Expected<Checkpoint> ckpt = readSafetensors(path);
  if (!ckpt)
    return ckpt.takeError();
  std::vector<TrainedParam> params;
  std::vector<int32_t> indices;
  for (int32_t i = 0, e = session.stateCount(); i < e; ++i) {
    loom_state_info info = session.stateInfo(i);
    StringRef key(info.key);
    if (!key.consume_front("param:"))
      continue;
    params.push_back(
        {key.str(), SmallVector<int64_t>(info.global_shape,
                                         info.global_shape + info.rank)});
    indices.push_back(i);
  }
  auto bound = bindParameters(params, *ckpt, path);
  if (!bound)
    return bound.takeError();
  for (auto [index, tensor] : llvm::zip_equal(indices, *bound))
    if (std::string error =
            session.setStateGlobal(index, tensor->values.data());
        !error.empty())
      return createStringError(error);
  return Error::success();
}

} // namespace

std::string countOf(int64_t count, StringRef noun) {
  return formatv("{0} {1}{2}", count, noun, count == 1 ? "" : "s").str();
}

json::Value jsonNumber(double value) {
  if (!std::isfinite(value))
    return nullptr;
  return value;
}

Error checkLogOutsideSave(StringRef logPath, StringRef savePath) {
  if (logPath.empty() || savePath.empty() || loom::isStreamOutput(logPath))
    return Error::success();
  auto normal = [](StringRef path) {
    SmallString<256> result(path);
    sys::fs::make_absolute(result);
    sys::path::remove_dots(result, /*remove_dot_dot=*/true);
    return std::string(result);
  };
  std::string log = normal(logPath), save = normal(savePath);
  if (log == save || StringRef(log).starts_with(save + "/"))
    return createStringError(
        formatv("--log-json {0}: is --save {1} or inside it, which the save "
                "replaces",
                logPath, savePath));
  return Error::success();
}

Error checkOutputs(const CompiledOptions &options) {
  if (Error err = checkLogOutsideSave(options.logPath, options.savePath))
    return err;
  if (!options.savePath.empty())
    if (Error err = checkCheckpointTarget(options.savePath))
      return err;
  if (!options.logPath.empty())
    return checkOutputFile(options.logPath);
  return Error::success();
}

Error checkBeforeLaunch(const CompiledOptions &options, int np) {
  // The artifact whole (plan.json, schedule.json, program.so), as every
  // rank would load it.
  char message[1024] = "";
  loom_artifact *artifact = nullptr;
  if (loom_artifact_load(options.artifactPath.c_str(), &artifact, message,
                         sizeof message))
    return createStringError(message);
  int32_t ranks = loom_artifact_world_size(artifact);
  int64_t vocab = loom_artifact_vocab_size(artifact);
  std::string compiledFor = loom_artifact_backend(artifact);
  loom_artifact_free(artifact);
  if (compiledFor != options.backend)
    return createStringError(
        formatv("{0} was compiled for the {1} backend (plan.json \"backend\"; "
                "loom-compile --target={1}), but --backend asks for {2}",
                options.artifactPath, compiledFor, options.backend));
  if (ranks != np)
    return createStringError(
        formatv("{0}: the artifact runs on {1} rank{2}, not --np {3}",
                options.artifactPath, ranks, ranks == 1 ? "" : "s", np));
  sys::fs::file_status status;
  if (!options.initPath.empty()) {
    if (std::error_code error = sys::fs::status(options.initPath, status))
      return createStringError(options.initPath + ": " + error.message());
    // Its header only: every rank reads the whole file.
    if (!hasSafetensorsHeader(options.initPath))
      return createStringError(options.initPath +
                               ": not a safetensors file (--init)");
  }
  if (!options.resumePath.empty()) {
    Expected<ShardedCheckpointReader> reader =
        ShardedCheckpointReader::open(options.resumePath);
    if (!reader)
      return reader.takeError();
  }
  Expected<std::vector<uint32_t>> ids = readTokenFile(options.dataPath);
  if (!ids)
    return ids.takeError();
  if (Error err = checkTokenVocabulary(options.dataPath, *ids, vocab))
    return err;
  return checkOutputs(options);
}

int launchUnderMpirun(int np, int argc, char **argv) {
  auto mpirun = sys::findProgramByName("mpirun");
  if (!mpirun)
    return failRank(0, "--np needs mpirun on PATH (Debian: openmpi-bin)");
  std::vector<std::string> args = {*mpirun, "-np", std::to_string(np)};
  if (np > static_cast<int>(std::thread::hardware_concurrency()))
    args.push_back("--oversubscribe");
  if (::geteuid() == 0)
    args.push_back("--allow-run-as-root");
  auto self = sys::fs::getMainExecutable(argv[0], (void *)&launchUnderMpirun);
  args.push_back(self);
  for (int i = 1; i < argc; ++i) {
    StringRef arg(argv[i]);
    if (arg == "--np" || arg == "-np") {
      ++i; // and its value
      continue;
    }
    if (arg.starts_with("--np=") || arg.starts_with("-np="))
      continue;
    args.push_back(arg.str());
  }
  SmallVector<StringRef> argv2(args.begin(), args.end());
  std::string message;
  int rc =
      sys::ExecuteAndWait(*mpirun, argv2, std::nullopt, {}, 0, 0, &message);
  if (rc < 0)
    return failRank(0, "cannot run mpirun: " + message);
  return rc;
}

int runCompiled(const CompiledOptions &options) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Any error below ends every rank: the others may wait in a collective.
  auto abortJob = [&](int rc) {
    MPI_Abort(MPI_COMM_WORLD, rc);
    return rc;
  };

  std::string error;
  std::unique_ptr<RankSession> opened = RankSession::open(
      options.backend, options.artifactPath, options.cuda, error);
  if (!opened)
    return abortJob(failRank(rank, error));
  RankSession &session = *opened;

  int64_t rows = session.batchRows();
  int64_t seqLen = session.seqLen();
  JobShape job{rank, size, rows, seqLen};
  // Steps already done: the checkpoint's, which fix the next batch and the
  // optimizer's bias correction.
  int64_t stepsDone = 0;
  if (!options.resumePath.empty()) {
    Expected<int64_t> resumed =
        resumeCheckpoint(session, job, options.resumePath);
    if (!resumed)
      return abortJob(failRank(rank, toString(resumed.takeError())));
    stepsDone = *resumed;
  } else if (Error err = loadInit(session, options.initPath)) {
    return abortJob(failRank(rank, toString(std::move(err))));
  }
  // Outputs that cannot be written fail now, not after the training.
  if (rank == 0)
    if (Error err = checkOutputs(options))
      return abortJob(failRank(rank, toString(std::move(err))));
  Expected<std::vector<uint32_t>> ids = readTokenFile(options.dataPath);
  if (!ids)
    return abortJob(failRank(rank, toString(ids.takeError())));
  // Every rank reads the same file and finds the same id: rank 0 reports
  // it once, without a rank, as the reference backend does, and ends the
  // job; the others wait for that.
  if (Error err =
          checkTokenVocabulary(options.dataPath, *ids, session.vocabSize())) {
    if (rank == 0) {
      printError(toString(std::move(err)));
      return abortJob(1);
    }
    consumeError(std::move(err));
    MPI_Barrier(MPI_COMM_WORLD);
    return 1;
  }

  if (rank == 0) {
    outs() << formatv(
        "loom-run: {0}, batch {1} x {2} tokens, workspace {3} "
        "KiB and state {4} KiB per rank, {5}\n",
        session.describe(), rows, seqLen, session.workspaceBytes() / 1024,
        session.stateBytes() / 1024, countOf(options.steps, "step"));
    if (!options.resumePath.empty())
      outs() << formatv("loom-run: resuming {0} after step {1}\n",
                        options.resumePath, stepsDone);
  }

  // A failed save ends the job: rank 0 prints what failed on which rank and
  // aborts; the others wait for that.
  auto save = [&](int64_t step) {
    std::string failure = saveCheckpoint(session, job, options.savePath, step);
    if (failure.empty()) {
      if (rank == 0) {
        outs() << formatv("loom-run: saved {0} after step {1}\n",
                          options.savePath, step);
        outs().flush();
      }
      return true;
    }
    if (rank == 0) {
      printError(failure);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return false;
  };

  Watchdog watchdog(rank, options.timeoutSeconds, session);
  std::string logText;
  raw_string_ostream log(logText);
  int64_t lastStep = stepsDone + options.steps, savedStep = -1;
  for (int64_t step = stepsDone + 1; step <= lastStep; ++step) {
    Expected<Batch> batch = makeBatch(*ids, step - 1, rows, seqLen);
    if (!batch)
      return abortJob(failRank(rank, options.dataPath + ": " +
                                         toString(batch.takeError())));
    std::vector<int32_t> tokens(batch->tokens.begin(), batch->tokens.end());
    std::vector<int32_t> labels(batch->labels.begin(), batch->labels.end());
    if (std::string error = session.setBatch(tokens.data(), labels.data());
        !error.empty())
      return abortJob(failRank(rank, error));
    auto start = Clock::now();
    watchdog.mark(true);
    double loss = 0.0;
    // The runtime's message names the rank and the step already.
    if (std::string error = session.step(step, loss); !error.empty()) {
      printError(error);
      return abortJob(1);
    }
    watchdog.mark(false);
    // Every rank holds the step's loss (the pipeline sends it to all).
    if (!std::isfinite(loss) && !options.allowNonFiniteLoss) {
      if (rank == 0)
        printError(nonFiniteLossMessage(step, loss));
      return abortJob(1);
    }
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (rank == 0) {
      double tokensPerSecond = double(rows * seqLen) / seconds;
      outs() << formatv("step {0,4}  loss {1:f6}  {2,9:f0} tokens/s  "
                        "{3,8:f1} ms\n",
                        step, loss, tokensPerSecond, seconds * 1e3);
      outs().flush();
      log << json::Value(json::Object{
                 {"step", step},
                 {"loss", jsonNumber(loss)},
                 {"tokens_per_second", jsonNumber(tokensPerSecond)},
                 {"step_ms", seconds * 1e3}})
          << "\n";
    }
    if (options.saveEvery > 0 && step % options.saveEvery == 0) {
      if (!save(step))
        return 1;
      savedStep = step;
    }
  }
  if (!options.savePath.empty() && savedStep != lastStep && !save(lastStep))
    return 1;
  if (rank == 0 && !options.logPath.empty())
    if (Error err = writeFileAtomically(
            options.logPath, [&](raw_ostream &os) { os << logText; }))
      return abortJob(failRank(rank, toString(std::move(err))));

  opened.reset();
  MPI_Finalize();
  return 0;
}

} // namespace loom::run
