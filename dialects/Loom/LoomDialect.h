//===- LoomDialect.h - The loom dialect -------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOMDIALECT_H
#define LOOM_DIALECT_LOOMDIALECT_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Dialect.h"

#include "dialects/Loom/LoomDialect.h.inc"

#endif // LOOM_DIALECT_LOOMDIALECT_H
