//===- Modes.h - loom-calibrate's two modes ---------------------*- C++ -*-===//
//
// Both run on every rank (the measurements are collective) and return the
// process's exit status; only rank 0 prints and writes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_CALIBRATE_MODES_H
#define LOOM_TOOLS_LOOM_CALIBRATE_MODES_H

#include "Measure.h"

#include <string>

namespace loom::calibrate {

struct CalibrateOptions {
  std::string outputPath;
  std::string name;
  /// Fewer sizes and samples.
  bool quick = false;
};

/// Measures, fits a cluster spec (docs/cluster-spec.md, "Calibrating"),
/// prints a summary and writes the spec atomically.
int runCalibration(const Topology &topology, const CalibrateOptions &options);

struct CheckOptions {
  /// FILE.json or a preset (resolveClusterSpec).
  std::string spec;
  /// GEMM shapes ("N" or "MxNxK", comma-separated) and message sizes
  /// (bytes, comma-separated); empty: defaults unlike the fit's sizes.
  std::string shapes, bytes;
};

/// Prints the times `options.spec` predicts next to measured ones.
int runCheck(const Topology &topology, const CheckOptions &options);

} // namespace loom::calibrate

#endif // LOOM_TOOLS_LOOM_CALIBRATE_MODES_H
