//===- LoomOps.h - The loom ops ---------------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOMOPS_H
#define LOOM_DIALECT_LOOMOPS_H

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/OpCost.h"
#include "dialects/Loom/ShapeInference.h"
#include "dialects/Loom/ShardingRule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Loom/CostInterface.h.inc"
#include "dialects/Loom/GradientInterface.h.inc"
#include "dialects/Loom/ShardingRuleInterface.h.inc"

#define GET_OP_CLASSES
#include "dialects/Loom/LoomOps.h.inc"

#endif // LOOM_DIALECT_LOOMOPS_H
