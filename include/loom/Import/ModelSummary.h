//===- ModelSummary.h - Size and cost of an imported model ------*- C++ -*-===//

#ifndef LOOM_IMPORT_MODELSUMMARY_H
#define LOOM_IMPORT_MODELSUMMARY_H

#include "loom/Import/ModelImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {

/// What `loom-import --summary` reports.
struct ModelSummary {
  int64_t parameters = 0;
  /// Thousands separators: 124439808 -> "124,439,808".
  std::string groupThousands(int64_t n);

  /// Matmul and attention FLOPs of forward + backward (3x the forward) per
  /// token, the convention of Narayanan et al. 2021 (SC'21, eq. 3):
  /// elementwise ops are not counted and causal attention counts the full
  /// S x S score matrix.
  double flopsPerToken = 0;
};

/// Thousands separators: 124439808 -> "124,439,808".
std::string groupThousands(int64_t n);

/// Matmul and attention FLOPs of forward + backward per token of `forward`
/// (3x the forward's; see ModelSummary).
double trainingFlopsPerToken(mlir::func::FuncOp forward);

/// Counts the parameters of `config` and the FLOPs of `forward`.
ModelSummary summarizeModel(const ModelConfig &config,
                            mlir::func::FuncOp forward);

/// Human-readable summary: the configuration, the totals, the parameters of
/// layer 0 (every layer is the same) and those outside the layers.
void printSummary(llvm::raw_ostream &os, const ModelConfig &config,
                  const ImportOptions &options, const ModelSummary &summary);

/// The same as one JSON object, with at least `parameters` and
/// `flops_per_token`.
void printSummaryJSON(llvm::raw_ostream &os, const ModelConfig &config,
                      const ImportOptions &options,
                      const ModelSummary &summary);

} // namespace loom

#endif // LOOM_IMPORT_MODELSUMMARY_H
