//===- Rendezvous.cpp - Where the ranks of the interpreter meet -----------===//

#include "Rendezvous.h"

#include "Kernels.h"

#include "llvm/ADT/STLExtras.h"

namespace loom::interp {

Rendezvous::Rendezvous(int64_t numRanks)
    : numRanks(numRanks), slots{std::vector<Contribution>(numRanks),
                                std::vector<Contribution>(numRanks)},
      states(numRanks, State::Running), waitGeneration(numRanks, 0),
      waitSource(numRanks, 0), waitOp(numRanks, nullptr) {}

bool Rendezvous::canProceed(int64_t r) const {
  switch (states[r]) {
  case State::Running:
    return true;
  case State::AtCollective:
    return generation != waitGeneration[r];
  case State::AtReceive: {
    auto it = mailboxes.find({waitSource[r], r});
    return it != mailboxes.end() && !it->second.empty();
  }
  case State::Done:
    return false;
  }
  return false;
}

/// "at <location>: 'op.name'" for a waiting rank.
static std::string describeWait(mlir::Operation *op, const char *what) {
  return std::string(what) + " " + llvm::toString(opError(op, ""));
}

std::optional<std::string> Rendezvous::deadlock() const {
  for (int64_t r = 0; r < numRanks; ++r)
    if (states[r] != State::Done && canProceed(r))
      return std::nullopt;
  std::string text = "the ranks wait for each other forever:";
  for (int64_t r = 0; r < numRanks; ++r) {
    text += " rank " + std::to_string(r) + " ";
    switch (states[r]) {
    case State::Done:
      text += "has returned";
      break;
    case State::AtCollective:
      text += describeWait(waitOp[r], "waits for every rank at");
      break;
    case State::AtReceive:
      text += describeWait(
          waitOp[r],
          ("waits for rank " + std::to_string(waitSource[r]) + " at").c_str());
      break;
    case State::Running:
      break;
    }
    text += r + 1 < numRanks ? ";" : "";
  }
  return text;
}

llvm::Error Rendezvous::waitUntil(std::unique_lock<std::mutex> &lock,
                                  int64_t rank,
                                  const std::function<bool()> &ready) {
  while (true) {
    if (firstFailure)
      return llvm::createStringError("aborted: another rank failed");
    if (ready())
      return llvm::Error::success();
    if (std::optional<std::string> stuck = deadlock()) {
      // A deadlock is nobody's failure in particular; it is reported as
      // seen by the rank that found it.
      firstFailure = "rank " + std::to_string(rank) + ": " + *stuck;
      changed.notify_all();
      return llvm::createStringError(*firstFailure);
    }
    changed.wait(lock);
  }
}

llvm::Expected<const std::vector<Contribution> *>
Rendezvous::exchange(int64_t rank, mlir::Operation *op, Tensor input) {
  std::unique_lock<std::mutex> lock(mutex);
  if (firstFailure)
    return llvm::createStringError("aborted: another rank failed");
  int64_t mine = generation;
  std::vector<Contribution> &deposits = slots[mine % 2];
  deposits[rank] = Contribution{op, std::move(input)};
  if (++arrived == numRanks) {
    arrived = 0;
    ++generation;
    changed.notify_all();
    return &deposits;
  }
  states[rank] = State::AtCollective;
  waitGeneration[rank] = mine;
  waitOp[rank] = op;
  changed.notify_all(); // a rank in deadlock() may need to see this state
  llvm::Error error = waitUntil(lock, rank, [&] { return generation != mine; });
  states[rank] = State::Running;
  if (error)
    return std::move(error);
  return &deposits;
}

void Rendezvous::send(int64_t from, int64_t to, Tensor message) {
  std::lock_guard<std::mutex> lock(mutex);
  mailboxes[{from, to}].push_back(std::move(message));
  changed.notify_all();
}

llvm::Expected<Tensor> Rendezvous::receive(int64_t rank, int64_t from,
                                           mlir::Operation *op) {
  std::unique_lock<std::mutex> lock(mutex);
  std::deque<Tensor> &mailbox = mailboxes[{from, rank}];
  states[rank] = State::AtReceive;
  waitSource[rank] = from;
  waitOp[rank] = op;
  changed.notify_all();
  llvm::Error error = waitUntil(lock, rank, [&] { return !mailbox.empty(); });
  states[rank] = State::Running;
  if (error)
    return std::move(error);
  Tensor message = std::move(mailbox.front());
  mailbox.pop_front();
  return message;
}

void Rendezvous::fail(int64_t rank, const std::string &message) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!firstFailure)
    firstFailure = "rank " + std::to_string(rank) + ": " + message;
  changed.notify_all();
}

void Rendezvous::finish(int64_t rank) {
  std::lock_guard<std::mutex> lock(mutex);
  states[rank] = State::Done;
  changed.notify_all();
}

std::optional<std::string> Rendezvous::failure() {
  std::lock_guard<std::mutex> lock(mutex);
  return firstFailure;
}

} // namespace loom::interp
