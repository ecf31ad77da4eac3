//===- Fit.cpp - Least-squares fits of measured times ---------------------===//
//
// Weighted linear least squares with weights w = 1/t² (relative residuals),
// solved through the 2x2 normal equations.
//
//===----------------------------------------------------------------------===//

#include "Fit.h"

#include <cmath>

namespace loom::calibrate {

namespace {

double relativeError(llvm::ArrayRef<Sample> samples, double theta0,
                     double theta1) {
  double sum = 0;
  for (const Sample &s : samples) {
    double r = (s.x0 * theta0 + s.x1 * theta1 - s.t) / s.t;
    sum += r * r;
  }
  return std::sqrt(sum / samples.size());
}

} // namespace

std::optional<Fit> fitSlope(llvm::ArrayRef<Sample> samples, double theta0) {
  double xy = 0, xx = 0;
  for (const Sample &s : samples) {
    double w = 1 / (s.t * s.t);
    xy += w * s.x1 * (s.t - s.x0 * theta0);
    xx += w * s.x1 * s.x1;
  }
  if (samples.empty() || xx <= 0 || !(xy / xx > 0))
    return std::nullopt;
  double theta1 = xy / xx;
  return Fit{theta0, theta1, relativeError(samples, theta0, theta1)};
}

std::optional<Fit> fitNonNegative(llvm::ArrayRef<Sample> samples) {
  if (samples.size() < 2)
    return std::nullopt;
  double a00 = 0, a01 = 0, a11 = 0, b0 = 0, b1 = 0;
  for (const Sample &s : samples) {
    double w = 1 / (s.t * s.t);
    a00 += w * s.x0 * s.x0;
    a01 += w * s.x0 * s.x1;
    a11 += w * s.x1 * s.x1;
    b0 += w * s.x0 * s.t;
    b1 += w * s.x1 * s.t;
  }
  double det = a00 * a11 - a01 * a01;
  if (std::fabs(det) > 1e-12 * a00 * a11) {
    double theta0 = (b0 * a11 - b1 * a01) / det;
    double theta1 = (a00 * b1 - a01 * b0) / det;
    if (theta0 >= 0 && theta1 > 0)
      return Fit{theta0, theta1, relativeError(samples, theta0, theta1)};
  }
  return fitSlope(samples, 0);
}

} // namespace loom::calibrate
