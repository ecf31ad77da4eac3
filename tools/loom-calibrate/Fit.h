//===- Fit.h - Least-squares fits of measured times -------------*- C++ -*-===//
//
// Every model loom-calibrate fits is linear in two unknowns,
//   t ≈ x0·θ0 + x1·θ1
// (GEMM: t = a + b·W; memory: t = L + bytes·b; a collective: t = c_α·α +
// c_β·n·β). Residuals are relative (each weighted by 1/t²): the samples span
// microseconds to seconds, and an absolute fit would let the largest one
// decide everything.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_CALIBRATE_FIT_H
#define LOOM_TOOLS_LOOM_CALIBRATE_FIT_H

#include "llvm/ADT/ArrayRef.h"

#include <optional>

namespace loom::calibrate {

/// One measurement: seconds `t` at regressors (x0, x1).
struct Sample {
  double x0 = 0, x1 = 0, t = 0;
};

struct Fit {
  double theta0 = 0, theta1 = 0;
  /// Root mean square of the relative residuals (t_fit - t) / t.
  double relativeError = 0;
};

/// θ0 ≥ 0 and θ1 > 0 minimizing Σ ((x0·θ0 + x1·θ1 - t) / t)²: an
/// unconstrained fit, refitted with θ0 = 0 when it comes out negative (a
/// latency or overhead below the noise). None when θ1 is not positive (the
/// times do not grow with x1) or there are fewer than two samples.
std::optional<Fit> fitNonNegative(llvm::ArrayRef<Sample> samples);

/// θ1 > 0 for a fixed θ0, same weights; none when not positive.
std::optional<Fit> fitSlope(llvm::ArrayRef<Sample> samples, double theta0);

} // namespace loom::calibrate

#endif // LOOM_TOOLS_LOOM_CALIBRATE_FIT_H
