//===- Profile.cu - Device time per kernel call, on request ---------------===//
//
// With LOOM_CUDA_PROFILE set when a context is created, every kernel entry
// point (a ProfileScope at its top) records a CUDA event on the context's
// stream before and after what it enqueues. loom_cuda_context_synchronize,
// once the stream is idle, adds each pair's elapsed time to its label's
// total (the op's name; matmul adds its GEMM's shape), and
// loom_cuda_context_destroy writes the table: per label, calls and device
// milliseconds per step, microseconds per call and share of the total,
// largest first (under a launcher of several ranks, FILE.rankN per rank).
// A step is one synchronize (the runtime synchronizes once
// per training step); the first is a warm-up (cuBLASLt's set-up, first
// touches) and only its total is shown. The value is where the table goes:
// a file path, or 1 for standard error.
//
// Every kernel entry point but the collectives' is timed. An interval
// spans from the moment the stream reaches the first event to
// the moment it reaches the second: the kernels' time, plus any wait for
// the host to launch them when the host is behind (so a host-bound step
// shows as time in its cheapest kernels). Collectives run on the
// communication stream and are not timed.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace loom::cuda {

class Profile {
public:
  explicit Profile(std::string destination)
      : destination(std::move(destination)) {}
  Profile(const Profile &) = delete;
  Profile &operator=(const Profile &) = delete;
  ~Profile() {
    for (const Pending &p : pending) {
      cudaEventDestroy(p.start);
      cudaEventDestroy(p.stop);
    }
    for (cudaEvent_t event : spare)
      cudaEventDestroy(event);
  }

  /// Records the start of a call labelled `op`; returns its index, or -1
  /// when no event could be had (the call goes untimed).
  int begin(cudaStream_t stream, const char *op) {
    Pending p{op, event(), event()};
    if (!p.start || !p.stop ||
        cudaEventRecord(p.start, stream) != cudaSuccess) {
      release(p);
      cudaGetLastError();
      return -1;
    }
    pending.push_back(std::move(p));
    return static_cast<int>(pending.size() - 1);
  }
  void label(int index, const std::string &text) {
    if (index >= 0)
      pending[index].label = text;
  }
  void end(int index, cudaStream_t stream) {
    if (index < 0)
      return;
    if (cudaEventRecord(pending[index].stop, stream) != cudaSuccess) {
      cudaGetLastError();
      pending[index].label.clear(); // dropped at the next resolve
    }
  }

  /// Adds the finished calls' times (the stream is idle) and ends a step.
  void resolve() {
    for (Pending &p : pending) {
      float ms = 0.0f;
      if (!p.label.empty() &&
          cudaEventElapsedTime(&ms, p.start, p.stop) == cudaSuccess) {
        Total &total = (steps == 0 ? warmUp : totals)[p.label];
        total.calls += 1;
        total.ms += ms;
      }
      cudaGetLastError();
      release(p);
    }
    pending.clear();
    ++steps;
  }

  /// Writes the table (see the banner).
  void report() const {
    FILE *out = stderr;
    if (destination != "1") {
      out = std::fopen(destination.c_str(), "w");
      if (!out) {
        std::fprintf(stderr, "loom: LOOM_CUDA_PROFILE: cannot write %s: %s\n",
                     destination.c_str(), std::strerror(errno));
        return;
      }
    }
    double warmMs = 0.0, allMs = 0.0;
    for (const auto &[name, total] : warmUp)
      warmMs += total.ms;
    std::vector<std::pair<std::string, Total>> rows(totals.begin(),
                                                    totals.end());
    for (const auto &row : rows)
      allMs += row.second.ms;
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.ms > b.second.ms;
    });
    double perStep = steps > 1 ? 1.0 / static_cast<double>(steps - 1) : 0.0;
    std::fprintf(out,
                 "loom CUDA profile: %lld steps timed after a warm-up step "
                 "of %.3f ms; %.3f ms of kernel calls per step\n",
                 static_cast<long long>(std::max<int64_t>(steps - 1, 0)),
                 warmMs, allMs * perStep);
    int width = 44; // the label column: the longest label's width
    for (const auto &row : rows)
      width = std::max(width, static_cast<int>(row.first.size()));
    std::fprintf(out, "%-*s %10s %10s %10s %7s\n", width, "call", "calls/step",
                 "ms/step", "us/call", "share");
    for (const auto &[name, total] : rows)
      std::fprintf(out, "%-*s %10.1f %10.3f %10.1f %6.1f%%\n", width,
                   name.c_str(), total.calls * perStep, total.ms * perStep,
                   1e3 * total.ms / static_cast<double>(total.calls),
                   allMs > 0.0 ? 100.0 * total.ms / allMs : 0.0);
    if (out != stderr)
      std::fclose(out);
  }

private:
  struct Pending {
    std::string label;
    cudaEvent_t start, stop;
  };
  struct Total {
    int64_t calls = 0;
    double ms = 0.0;
  };

  cudaEvent_t event() {
    if (!spare.empty()) {
      cudaEvent_t e = spare.back();
      spare.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return e;
  }
  void release(const Pending &p) {
    for (cudaEvent_t e : {p.start, p.stop})
      if (e)
        spare.push_back(e);
  }

  std::string destination;
  std::vector<Pending> pending;
  std::vector<cudaEvent_t> spare;
  std::map<std::string, Total> totals, warmUp;
  int64_t steps = 0;
};

/// The launcher's rank and world size (Open MPI, MPICH/PMI, Slurm), or
/// {0, 1}.
std::pair<long, long> launcherRank() {
  // Slurm's step size, not SLURM_NTASKS: a batch script's single process
  // sees the allocation's task count there.
  const char *names[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}};
  for (const auto &name : names) {
    const char *rank = std::getenv(name[0]), *size = std::getenv(name[1]);
    if (rank && size)
      return {std::atol(rank), std::atol(size)};
  }
  return {0, 1};
}

Profile *profileFromEnvironment() {
  const char *value = std::getenv("LOOM_CUDA_PROFILE");
  if (!value || !*value || std::strcmp(value, "0") == 0)
    return nullptr;
  std::string destination = value;
  // One file per rank: FILE.rankN when the launcher started several.
  auto [rank, size] = launcherRank();
  if (destination != "1" && size > 1)
    destination += ".rank" + std::to_string(rank);
  return new Profile(destination);
}

void resolveProfile(Profile *profile) {
  if (profile)
    profile->resolve();
}

void finishProfile(Profile *profile) {
  if (!profile)
    return;
  profile->report();
  delete profile;
}

ProfileScope::ProfileScope(loom_cuda_context *context, const char *op)
    : context(context) {
  if (context && context->profile)
    index = context->profile->begin(context->stream, op);
}

ProfileScope::~ProfileScope() {
  if (index >= 0)
    context->profile->end(index, context->stream);
}

void ProfileScope::label(const char *format, ...) {
  if (index < 0)
    return;
  char text[160];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  context->profile->label(index, text);
}

} // namespace loom::cuda
