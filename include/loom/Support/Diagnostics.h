//===- Diagnostics.h - One-line errors of Loom's passes ---------*- C++ -*-===//
//
// An error about a pass's options, or about a module or function as a whole
// (a precondition the input does not meet), is one line: the file and line
// it concerns, the message, nothing after it. Op::emitError() does not give
// that: MLIR's tools print the op the error is attached to after it (the
// whole module, in generic form, for a module), and the source manager's
// handler quotes the source line under it, which for a function is its
// signature (kilobytes for a real model).
//
// emitLineError emits at the location's file and line with column 0, the
// location MLIR's convention reads as "this line, no column": the handler
// prints it without a source excerpt, no op is attached, and
// -verify-diagnostics still matches it by line (`expected-error @+1`).
// Errors about one op inside a body, which the user wants to see, keep
// op->emitError().
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_DIAGNOSTICS_H
#define LOOM_SUPPORT_DIAGNOSTICS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

namespace loom {

/// `loc`'s file and line, without its column; `loc` itself when it names no
/// file (an unknown location prints as one line already).
inline mlir::Location lineOf(mlir::Location loc) {
  if (auto file = loc->findInstanceOf<mlir::FileLineColLoc>())
    return mlir::FileLineColLoc::get(file.getFilename(), file.getLine(), 0);
  return loc;
}

/// A one-line error at `loc`'s file and line.
inline mlir::InFlightDiagnostic emitLineError(mlir::Location loc) {
  return mlir::emitError(lineOf(loc));
}

/// A one-line error at `op`'s file and line, without `op` printed after it.
inline mlir::InFlightDiagnostic emitLineError(mlir::Operation *op) {
  return emitLineError(op->getLoc());
}

/// A one-line warning at `loc`'s file and line.
inline mlir::InFlightDiagnostic emitLineWarning(mlir::Location loc) {
  return mlir::emitWarning(lineOf(loc));
}

/// A one-line remark at `loc`'s file and line (a pass's report on a
/// function, which would otherwise print the function after it).
inline mlir::InFlightDiagnostic emitLineRemark(mlir::Location loc) {
  return mlir::emitRemark(lineOf(loc));
}

} // namespace loom

#endif // LOOM_SUPPORT_DIAGNOSTICS_H
