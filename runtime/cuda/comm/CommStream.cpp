//===- CommStream.cpp - Communication stream beside the compute stream ----===//

#include "CommStream.h"

#include "Status.h"

namespace loom::cuda_rt {
namespace {

/// "" or "`what` failed: <CUDA's text> (CommStream.cpp:<the caller's
/// line>)".
std::string check(cudaError_t code, const std::string &what,
                  int line = __builtin_LINE()) {
  if (code == cudaSuccess)
    return "";
  return what + " failed: " + cudaGetErrorString(code) +
         rt::foreignWhere(__FILE__, line);
}

/// Makes stream `to` wait for the work enqueued on `from` so far, through
/// `event`; CUDA's status, and in `call` the call that returned it.
cudaError_t follow(cudaStream_t to, cudaStream_t from, cudaEvent_t event,
                   const char *&call) {
  call = "cudaEventRecord";
  if (cudaError_t code = cudaEventRecord(event, from))
    return code;
  call = "cudaStreamWaitEvent";
  return cudaStreamWaitEvent(to, event, 0);
}

} // namespace

CommStream::~CommStream() {
  for (Slot &slot : slots)
    if (slot.done)
      cudaEventDestroy(slot.done);
  for (cudaEvent_t event : {computed, communicated})
    if (event)
      cudaEventDestroy(event);
  if (commStream)
    cudaStreamDestroy(commStream);
}

std::string CommStream::create(cudaStream_t compute, const std::string &where) {
  computeStream = compute;
  // Each handle stays null until created, for the destructor.
  const char *call = "cudaStreamCreateWithFlags";
  cudaStream_t created = nullptr;
  cudaError_t code = cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
  if (code == cudaSuccess) {
    commStream = created;
    call = "cudaEventCreateWithFlags";
    for (cudaEvent_t *event : {&computed, &communicated}) {
      cudaEvent_t made = nullptr;
      code = cudaEventCreateWithFlags(&made, cudaEventDisableTiming);
      if (code != cudaSuccess)
        break;
      *event = made;
    }
  }
  return check(code,
               std::string(call) + " for the communication stream" + where);
}

std::string CommStream::waitForCompute(const std::string &name) {
  const char *call = nullptr;
  cudaError_t code = follow(commStream, computeStream, computed, call);
  return check(code, std::string(call) + " before " + name);
}

std::string CommStream::computeWaits(const std::string &name) {
  const char *call = nullptr;
  cudaError_t code = follow(computeStream, commStream, communicated, call);
  return check(code, std::string(call) + " after " + name);
}

std::string CommStream::claim(int32_t slot, const std::string &what) {
  std::string named = "slot " + std::to_string(slot);
  if (slot < 0)
    return what + ": negative " + named;
  if (static_cast<size_t>(slot) >= slots.size())
    slots.resize(static_cast<size_t>(slot) + 1);
  Slot &claimed = slots[slot];
  if (claimed.busy)
    return what + ": " + named + " still has " + claimed.what + " in flight";
  if (claimed.done)
    return "";
  cudaEvent_t made = nullptr;
  if (cudaError_t code =
          cudaEventCreateWithFlags(&made, cudaEventDisableTiming))
    return check(code,
                 "cudaEventCreateWithFlags for " + named + " (" + what + ")");
  claimed.done = made;
  return "";
}

std::string CommStream::recordStart(int32_t slot, const std::string &what,
                                    const std::string &name) {
  Slot &started = slots[slot];
  if (cudaError_t code = cudaEventRecord(started.done, commStream))
    return check(code, "cudaEventRecord after " + name);
  started.busy = true;
  started.what = what;
  return "";
}

std::string CommStream::wait(int32_t slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots.size() ||
      !slots[slot].busy)
    return "wait: nothing is in flight under slot " + std::to_string(slot);
  Slot &started = slots[slot];
  started.busy = false;
  return check(cudaStreamWaitEvent(computeStream, started.done, 0),
               "cudaStreamWaitEvent for " + started.what + " under slot " +
                   std::to_string(slot));
}

std::string CommStream::poll(bool &done) {
  cudaError_t compute = cudaStreamQuery(computeStream);
  cudaError_t communication = cudaStreamQuery(commStream);
  // "Not ready" is an answer, not a failure, but the runtime keeps it as
  // this thread's last error, where the next kernel's launch check
  // (cudaGetLastError) would take it for its own.
  if (compute == cudaErrorNotReady || communication == cudaErrorNotReady)
    cudaGetLastError();
  done = compute == cudaSuccess && communication == cudaSuccess;
  if (compute != cudaSuccess && compute != cudaErrorNotReady)
    return check(compute, "the compute stream");
  if (communication != cudaSuccess && communication != cudaErrorNotReady)
    return check(communication, "the communication stream");
  return "";
}

} // namespace loom::cuda_rt
