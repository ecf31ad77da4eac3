//===- Session.cpp - One GPU's executor, behind the C ABI -----------------===//
//
// A one-device, unpipelined step: `train_step` reads the state (parameters,
// optimizer moments) from one set of device buffers and writes the next
// (compiled code never updates in place), so the two swap after each step
// as in the CPU session. Tokens and labels are copied to the device by
// set_batch, the step number before each call; the compiled function
// enqueues every kernel on the session's stream, the step then waits for
// it (loom_cuda_context_synchronize, which also reports what only the
// device saw: an id outside the vocabulary) and reads the loss back.
//
//===----------------------------------------------------------------------===//

#include "Session.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace loom::cuda_rt {

DeviceBuffer::~DeviceBuffer() {
  if (pointer)
    cudaFree(pointer);
}

std::string DeviceBuffer::allocate(int64_t bytes) {
  if (pointer)
    cudaFree(pointer);
  pointer = nullptr;
  size = bytes;
  // At least one byte, so that empty tensors still have an address.
  if (cudaError_t status = cudaMalloc(&pointer, std::max<int64_t>(bytes, 1));
      status != cudaSuccess) {
    pointer = nullptr;
    return "cudaMalloc of " + std::to_string(bytes) +
           " bytes: " + cudaGetErrorString(status);
  }
  if (cudaError_t status = cudaMemset(pointer, 0, std::max<int64_t>(bytes, 1));
      status != cudaSuccess)
    return std::string("cudaMemset: ") + cudaGetErrorString(status);
  return "";
}

std::string Session::check(int status, const std::string &what) {
  if (status == cudaSuccess)
    return "";
  return what + ": " + cudaGetErrorString(static_cast<cudaError_t>(status));
}

Session::~Session() {
  if (stream)
    cudaStreamSynchronize(stream);
  loom_cuda_context_destroy(context);
  if (stream)
    cudaStreamDestroy(stream);
}

std::string Session::init(int32_t device) {
  if (!artifact.streams.empty())
    return "a pipelined artifact (schedule.json): the CUDA runtime runs one "
           "unpipelined train_step so far";
  if (artifact.devices() != 1)
    return "an artifact of " + std::to_string(artifact.devices()) +
           " devices: the CUDA runtime runs one device so far (no NCCL yet)";
  fn = artifact.find("train_step");
  if (!fn)
    return "the artifact has no train_step";
  entry = reinterpret_cast<CudaEntryFn>(fn->symbol);
  if (artifact.batchRows == 0)
    return "the artifact's functions take no token batch";

  if (std::string e = check(cudaSetDevice(device),
                            "cudaSetDevice(" + std::to_string(device) + ")");
      !e.empty())
    return e;
  cudaStream_t created = nullptr;
  if (std::string e = check(cudaStreamCreate(&created), "cudaStreamCreate");
      !e.empty())
    return e;
  stream = created;
  if (std::string e = workspace.allocate(fn->workspaceBytes); !e.empty())
    return "workspace: " + e;

  for (const rt::TensorSpec &arg : fn->args) {
    std::string key = arg.stepKey();
    if (arg.role == "param" || arg.role == "m" || arg.role == "v") {
      if (stateIndex.count(key))
        return "train_step takes " + key + " twice";
      argState.push_back(static_cast<int64_t>(state.size()));
      stateIndex[key] = state.size();
      state.push_back(std::make_unique<StateEntry>());
      StateEntry &entry = *state.back();
      entry.key = key;
      entry.spec = arg;
      entry.offsets.assign(arg.shape.size(), 0);
      if (std::string e = entry.current.allocate(arg.bytes()); !e.empty())
        return key + ": " + e;
      if (std::string e = entry.next.allocate(arg.bytes()); !e.empty())
        return key + ": " + e;
      argSlots.emplace_back();
      continue;
    }
    if (arg.role == "data" && arg.name != "tokens" && arg.name != "labels")
      return "unknown data argument \"" + arg.name + "\"";
    if (arg.role != "step" && arg.role != "data")
      return "train_step: argument \"" + arg.role + ":" + arg.name +
             "\" is neither state, step nor data";
    if (arg.role == "data" &&
        (arg.dtype != LOOM_DTYPE_I32 ||
         arg.shape !=
             std::vector<int64_t>{artifact.batchRows, artifact.seqLen}))
      return "train_step: data argument \"" + arg.name +
             "\" is not i32 [rows, seq_len]";
    argState.push_back(-1);
    argSlots.push_back(std::make_unique<Slot>());
    argSlots.back()->spec = &arg;
    if (std::string e = argSlots.back()->buffer.allocate(arg.bytes());
        !e.empty())
      return arg.name + ": " + e;
  }
  for (const rt::TensorSpec &result : fn->results) {
    auto it = stateIndex.find(result.stepKey());
    if (it != stateIndex.end()) {
      if (result.shape != state[it->second]->spec.shape ||
          result.dtype != state[it->second]->spec.dtype)
        return "train_step: result " + it->first +
               " has another shape or type than the argument";
      state[it->second]->updated = true;
      resultState.push_back(static_cast<int64_t>(it->second));
      resultSlots.emplace_back();
      continue;
    }
    if (result.role != "loss" || result.dtype != LOOM_DTYPE_F32)
      return "train_step: result \"" + result.role + ":" + result.name +
             "\" is neither state nor an f32 loss";
    resultState.push_back(-1);
    resultSlots.push_back(std::make_unique<Slot>());
    resultSlots.back()->spec = &result;
    if (std::string e = resultSlots.back()->buffer.allocate(result.bytes());
        !e.empty())
      return "loss: " + e;
  }

  // The kernels' scratch (loom_cuda_kernels.h): 64 MiB covers all but a
  // bf16 embedding_grad, which accumulates its table in f32 there (4 * V * D
  // bytes: 154 MB for GPT-2's 50257 x 768). The table is a parameter, so
  // 4 bytes per element of the largest one covers it.
  int64_t scratchBytes = int64_t(64) << 20;
  for (const auto &entry : state)
    scratchBytes = std::max(scratchBytes, 4 * entry->spec.numElements());
  if (loom_cuda_context_create(stream, scratchBytes, &context))
    return std::string("loom_cuda_context_create: ") + loom_cuda_last_error();
  return "";
}

int64_t Session::stateBytes() const {
  int64_t bytes = 0;
  for (const auto &entry : state)
    bytes += entry->current.size + entry->next.size;
  return bytes;
}

std::string Session::setState(int32_t index, const float *global) {
  StateEntry &entry = *state[index];
  if (entry.spec.dtype != LOOM_DTYPE_F32)
    return entry.key + " is not f32";
  return check(cudaMemcpy(entry.current.data(), global, entry.spec.bytes(),
                          cudaMemcpyHostToDevice),
               entry.key);
}

std::string Session::getState(int32_t index, float *global) {
  StateEntry &entry = *state[index];
  if (entry.spec.dtype != LOOM_DTYPE_F32)
    return entry.key + " is not f32";
  return check(cudaMemcpy(global, entry.current.data(), entry.spec.bytes(),
                          cudaMemcpyDeviceToHost),
               entry.key);
}

std::string Session::setBatch(const int32_t *tokens, const int32_t *labels) {
  // Synchronous copies: the previous step has finished (step waits).
  for (auto &slot : argSlots)
    if (slot && slot->spec->role == "data")
      if (std::string e =
              check(cudaMemcpy(slot->buffer.data(),
                               slot->spec->name == "tokens" ? tokens : labels,
                               slot->spec->bytes(), cudaMemcpyHostToDevice),
                    slot->spec->name);
          !e.empty())
        return e;
  haveBatch = true;
  return "";
}

std::string Session::step(int64_t stepNumber, double &loss) {
  if (!haveBatch)
    return "no batch was set before the step";
  std::vector<void *> args, results;
  for (size_t i = 0; i < fn->args.size(); ++i) {
    if (argState[i] >= 0) {
      args.push_back(state[argState[i]]->current.data());
      continue;
    }
    Slot &slot = *argSlots[i];
    if (slot.spec->role == "step") {
      int32_t narrow = static_cast<int32_t>(stepNumber);
      const void *source = slot.spec->dtype == LOOM_DTYPE_I64
                               ? static_cast<const void *>(&stepNumber)
                               : static_cast<const void *>(&narrow);
      if (std::string e =
              check(cudaMemcpy(slot.buffer.data(), source, slot.spec->bytes(),
                               cudaMemcpyHostToDevice),
                    "step");
          !e.empty())
        return e;
    }
    args.push_back(slot.buffer.data());
  }
  const Slot *lossSlot = nullptr;
  for (size_t j = 0; j < fn->results.size(); ++j) {
    if (resultState[j] >= 0) {
      results.push_back(state[resultState[j]]->next.data());
      continue;
    }
    lossSlot = resultSlots[j].get();
    results.push_back(lossSlot->buffer.data());
  }
  loom_call_frame frame{args.data(), results.data(),
                        static_cast<uint8_t *>(workspace.data()), nullptr, 0};
  if (int32_t status = entry(&frame, context)) {
    std::string message = loom_cuda_last_error();
    loom_cuda_context_synchronize(context);
    return fn->name + ": " + message + " (status " + std::to_string(status) +
           ")";
  }
  if (loom_cuda_context_synchronize(context))
    return fn->name + ": " + loom_cuda_last_error();
  float value = 0.0f;
  if (lossSlot)
    if (std::string e = check(cudaMemcpy(&value, lossSlot->buffer.data(),
                                         sizeof value, cudaMemcpyDeviceToHost),
                              "reading the loss");
        !e.empty())
      return e;
  loss = value;
  for (auto &entry : state)
    if (entry->updated)
      entry->current.swap(entry->next);
  return "";
}

} // namespace loom::cuda_rt
