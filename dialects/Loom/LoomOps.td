//===- LoomOps.td - The loom ops --------------------------------*- tablegen -*-===//
//
// Every op is pure (dropout draws from a counter-based RNG keyed by its
// operands and attributes, so it is a function too), has a verifier with
// precise messages, a builder that infers the result types, and a sharding
// rule. The exceptions are loom.fused and loom.yield (FusionOps.td), which
// hold ops --loom-fuse groups after partitioning: no rule, no inference.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMOPS_TD
#define LOOM_DIALECT_LOOMOPS_TD

include "dialects/Loom/LoomBase.td"
include "dialects/Loom/GradientInterface.td"
include "dialects/Loom/ShardingRuleInterface.td"
include "dialects/Loom/CostInterface.td"

/// Base class of all loom ops. `verify()` and `getShardingRule()` are
/// defined per op in the C++ file of its group. Every op has the cost
/// interface's defaults unless its traits name the methods it defines
/// (`Loom_Cost<[...]>`, CostInterface.td).
class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic,
         !listconcat(traits, [Pure,
             DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>],
             !if(!empty(!filter(t, traits, !isa<Loom_Cost>(t))),
                 [Loom_OpCostInterface], []))> {
  let hasVerifier = 1;
}

include "dialects/Loom/ElementwiseOps.td"
include "dialects/Loom/LayoutOps.td"
include "dialects/Loom/NeuralOps.td"
include "dialects/Loom/GradientOps.td"
include "dialects/Loom/OptimizerOps.td"
include "dialects/Loom/FusionOps.td"

#endif // LOOM_DIALECT_LOOMOPS_TD
