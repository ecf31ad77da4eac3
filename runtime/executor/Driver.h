//===- Driver.h - A backend behind the one session API ----------*- C++ -*-===//
//
// loom_runtime.h is one C ABI for every backend. What differs per backend
// is a Driver: it gives one rank of a job its Device (Device.h) and its
// communication (a loom_comm table), set up from the session's options.
// The CPU driver is part of libloom_runtime; the CUDA driver lives in its
// own library (libloom_cuda_driver.so), which libloom_runtime opens when a
// session asks for the cuda backend, so that a machine without CUDA builds
// and runs the CPU backend. The session API (runtime/cpu/runtime/CApi.cpp)
// runs the one executor (Session.h) on whatever the driver returns.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_DRIVER_H
#define LOOM_RUNTIME_EXECUTOR_DRIVER_H

#include "Device.h"

#include "loom/loom_runtime.h"

#include <memory>
#include <string>

namespace loom::rt {

class Session;

/// One rank's Device and communication, alive as long as its session.
class RankBackend {
public:
  virtual ~RankBackend() = default;
  virtual Device &device() = 0;
  /// The communication table compiled code calls (null: none, one rank).
  virtual const loom_comm *comm() const = 0;
  /// "mpi", "nccl", "staged" or "none".
  virtual const char *commName() const = 0;
  /// What the backend sets up once the session's state is allocated (the
  /// CUDA kernels' context, sized by the largest parameter).
  virtual Status prepare(const Session &session) { return Status(); }
  /// The communicator's own message of its last failure ("" if none),
  /// added to a communication error's message at the C boundary.
  virtual std::string commDetail() const { return ""; }
};

class Driver {
public:
  virtual ~Driver() = default;
  /// "cpu" or "cuda": plan.json's "backend" this driver runs.
  virtual const char *name() const = 0;
  /// Makes this process's rank of `artifact`'s job: with MPI initialized,
  /// world rank = the MPI_COMM_WORLD rank and the communication of
  /// `options.comm`, created collectively (every rank calls this
  /// together); without MPI, rank 0 of a one-rank job.
  virtual Status createRank(const Artifact &artifact,
                            const loom_session_options &options,
                            int32_t &worldRank,
                            std::unique_ptr<RankBackend> &out) = 0;
};

/// The CPU driver (libloom_runtime).
Driver &cpuDriver();

} // namespace loom::rt

/// The symbol a driver library exports, `extern "C" loom::rt::Driver
/// *loom_driver_v1()`: its Driver. The interface is C++, so a driver comes
/// from the same build as libloom_runtime; the version in the name changes
/// with this header.
#define LOOM_DRIVER_ENTRY "loom_driver_v1"
using LoomDriverEntry = loom::rt::Driver *(*)();

#endif // LOOM_RUNTIME_EXECUTOR_DRIVER_H
