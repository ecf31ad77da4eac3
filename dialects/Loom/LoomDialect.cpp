//===- LoomDialect.cpp - The loom dialect and its generated code ----------===//
//
// Registers the ops and instantiates what TableGen generated for the
// dialect, its ops and the sharding-rule interface. The verifiers and
// sharding rules live in one file per op group (ElementwiseOps.cpp, ...).
//
//===----------------------------------------------------------------------===//

#include "dialects/Loom/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace loom;

#include "dialects/Loom/LoomDialect.cpp.inc"
#include "dialects/Loom/ShardingRuleInterface.cpp.inc"

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Loom/LoomOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/Loom/LoomOps.cpp.inc"
