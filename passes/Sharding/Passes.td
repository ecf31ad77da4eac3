//===- Passes.td - Sharding passes ------------------------------*- tablegen -*-===//

#ifndef LOOM_PASSES_SHARDING_PASSES_TD
#define LOOM_PASSES_SHARDING_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomPrintShardingRules : Pass<"loom-print-sharding-rules"> {
  let summary = "Report the sharding rule of every op as a remark";
  let description = [{
    Emits, at each op that implements `ShardingRuleOpInterface`, a remark
    with its rule in Shardy's notation: the factors of every operand and
    result dimension, the factor sizes, which factors are reductions
    (splitting them leaves partial sums) and which must stay whole. This is
    exactly what the sharding planner sees of the op.

    ```
    remark: sharding rule ([i, k], [k, j]) -> ([i, j]) {i=4, j=16, k=8} reduction={k}
    ```

    The pass also checks each rule against the op's shapes and fails with
    an error naming the op if a rule is inconsistent.
  }];
}

#endif // LOOM_PASSES_SHARDING_PASSES_TD
