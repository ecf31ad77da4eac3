//===- CommStream.h - The stream NcclComm communicates on -------*- C++ -*-===//
//
// The CUDA half of NcclComm (NcclComm.h): a non-blocking communication
// stream of its own beside the session's compute stream, and the events
// that order the two. Nothing here knows NCCL; NcclComm enqueues its
// collectives between the calls below.
//
// Before a transfer, an event recorded on the compute stream makes the
// communication stream wait for the work enqueued so far (the transfer's
// operand, the kernels that last used its buffers). After it, either the
// compute stream waits at once for an event recorded on the communication
// stream (a blocking collective), or the event of the transfer's slot is
// recorded there and the compute stream waits for it only at wait(slot),
// so that the kernels enqueued in between run beside the transfer. Each
// wait is enqueued right after its record (cudaStreamWaitEvent uses the
// record current at the call), so one event each way serves every
// blocking collective, and a slot's event serves every start under it.
// A slot's event is created on its first start and kept.
//
// Every method returns "" or a message naming the CUDA call, what it was
// for and CUDA's text, for example "cudaEventRecord before ncclAllReduce
// on group 1 (axes [0]) failed: invalid resource handle".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_COMM_COMMSTREAM_H
#define LOOM_RUNTIME_CUDA_COMM_COMMSTREAM_H

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace loom::cuda_rt {

class CommStream {
public:
  CommStream() = default;
  /// Destroys the events and the stream; one the device still uses (a
  /// transfer a failed function left in flight) is released once the
  /// device is done with it.
  ~CommStream();
  CommStream(const CommStream &) = delete;
  CommStream &operator=(const CommStream &) = delete;

  /// Creates the communication stream and its two events on the current
  /// device, beside `compute` (which must outlive the CommStream); the
  /// message names `where`.
  std::string create(cudaStream_t compute, const std::string &where);
  cudaStream_t compute() const { return computeStream; }
  cudaStream_t communication() const { return commStream; }

  /// Makes the communication stream wait for the work enqueued on the
  /// compute stream so far, before the transfer `name`.
  std::string waitForCompute(const std::string &name);
  /// Makes the compute stream wait for everything enqueued on the
  /// communication stream so far, after the transfer `name`.
  std::string computeWaits(const std::string &name);

  /// Takes `slot` for a start of `what`: fails when the slot is negative
  /// or still has a start in flight; creates its event the first time.
  std::string claim(int32_t slot, const std::string &what);
  /// Records `slot`'s event after the transfer `name` (a start of `what`,
  /// claimed) and marks the slot in flight.
  std::string recordStart(int32_t slot, const std::string &what,
                          const std::string &name);
  /// Makes the compute stream wait for the start in flight under `slot`
  /// and frees the slot.
  std::string wait(int32_t slot);

  /// Looks at both streams without waiting: sets `done` when both have run
  /// everything enqueued on them; the message says which one failed.
  std::string poll(bool &done);

private:
  /// The session's compute stream, and the communication stream (ours).
  cudaStream_t computeStream = nullptr;
  cudaStream_t commStream = nullptr;
  /// Recorded on the compute stream before a transfer, and on the
  /// communication stream after a blocking one.
  cudaEvent_t computed = nullptr;
  cudaEvent_t communicated = nullptr;
  /// The split collectives by slot: the event recorded after the start's
  /// transfer, whether one is in flight, and which (for messages).
  struct Slot {
    cudaEvent_t done = nullptr;
    bool busy = false;
    std::string what;
  };
  std::vector<Slot> slots;
};

} // namespace loom::cuda_rt

#endif // LOOM_RUNTIME_CUDA_COMM_COMMSTREAM_H
