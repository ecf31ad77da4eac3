//===- Rendezvous.h - Where the ranks of the interpreter meet ---*- C++ -*-===//
//
// The in-process communicator of the multi-rank interpreter. Every rank
// runs the same straight-line code, so every collective is a barrier of all
// ranks: each deposits its input, the last one to arrive advances the
// generation, and each then computes its own result from the deposits of
// its group. Deposits alternate between two sets of slots by generation, so
// a rank that runs ahead to the next collective never overwrites a deposit
// another rank is still reading (it cannot pass that next barrier before
// every rank is done with the previous one). send and recv go through
// per-(source, destination) mailboxes instead.
//
// Nothing waits forever: a rank's failure wakes everybody with an abort,
// and a rank that finds every other rank returned or waiting on something
// that cannot come reports a deadlock.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_INTERPRETER_RENDEZVOUS_H
#define LOOM_LIB_INTERPRETER_RENDEZVOUS_H

#include "loom/Interpreter/Tensor.h"

#include "mlir/IR/Operation.h"
#include "llvm/Support/Error.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace loom::interp {

/// What one rank brings to a collective.
struct Contribution {
  mlir::Operation *op = nullptr;
  Tensor input;
};

class Rendezvous {
public:
  explicit Rendezvous(int64_t numRanks);

  /// Deposits `rank`'s `input` to the collective `op`, waits for every rank
  /// and returns all deposits by rank; they stay valid until `rank` calls
  /// exchange again.
  llvm::Expected<const std::vector<Contribution> *>
  exchange(int64_t rank, mlir::Operation *op, Tensor input);

  /// Queues `message` from `from` to `to`; never waits.
  void send(int64_t from, int64_t to, Tensor message);
  /// The oldest message from `from` to `rank`, waiting for one.
  llvm::Expected<Tensor> receive(int64_t rank, int64_t from,
                                 mlir::Operation *op);

  /// Records that `rank` failed with `message` (the first failure is the one
  /// reported) and wakes every waiting rank to abort.
  void fail(int64_t rank, const std::string &message);
  /// Records that `rank` returned from the function.
  void finish(int64_t rank);
  /// The first failure, "rank R: message", if any.
  std::optional<std::string> failure();

private:
  enum class State { Running, AtCollective, AtReceive, Done };

  /// Waits (with `lock` held on entry and exit) until `ready()`, a failure
  /// or a deadlock; `rank`'s waiting state is set by the caller.
  llvm::Error waitUntil(std::unique_lock<std::mutex> &lock, int64_t rank,
                        const std::function<bool()> &ready);
  /// Whether waiting rank `r` can go on.
  bool canProceed(int64_t r) const;
  /// A description of a deadlock, when every rank has returned or waits for
  /// something that cannot come.
  std::optional<std::string> deadlock() const;

  int64_t numRanks;
  std::mutex mutex;
  std::condition_variable changed;
  int64_t generation = 0;
  int64_t arrived = 0;
  std::vector<Contribution> slots[2];
  std::map<std::pair<int64_t, int64_t>, std::deque<Tensor>> mailboxes;
  std::vector<State> states;
  /// The generation a rank at a collective waits to see end, the source a
  /// rank at a receive waits for, and the op it waits at.
  std::vector<int64_t> waitGeneration, waitSource;
  std::vector<mlir::Operation *> waitOp;
  std::optional<std::string> firstFailure;
};

} // namespace loom::interp

#endif // LOOM_LIB_INTERPRETER_RENDEZVOUS_H
