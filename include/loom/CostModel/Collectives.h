//===- Collectives.h - α–β costs of collectives on a cluster ----*- C++ -*-===//
//
// Collectives over a group of devices (one logical mesh axis), placed on the
// physical links of a ClusterSpec: ring and tree forms, and the hierarchical
// form (inside nodes, then across, then inside) when a group spans nodes.
// Each formula cites its source in Collectives.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COSTMODEL_COLLECTIVES_H
#define LOOM_COSTMODEL_COLLECTIVES_H

#include "loom/CostModel/ClusterSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace loom::cost {

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  SendRecv,
};
llvm::StringRef stringifyCollective(Collective kind);

enum class Algorithm { Ring, Tree, Hierarchical, PointToPoint };
llvm::StringRef stringifyAlgorithm(Algorithm algorithm);

/// One axis of a group: `size` members, consecutive ones `stride` ranks
/// apart.
struct GroupAxis {
  int64_t size = 1;
  int64_t stride = 1;
};

/// Where the members of a group sit: `size` devices, `perNode` of them in
/// each node they touch (size when the group fits in one node, 1 when every
/// member is on its own node). A group whose nodes hold different numbers
/// of its members has perNode 1: the hierarchical form needs equal shares
/// per node, so its collectives run flat over the inter-node link.
struct GroupPlacement {
  int64_t size = 1;
  int64_t perNode = 1;

  /// The nodes its collectives cross (as costed: `size` when perNode is 1).
  int64_t numNodes() const { return size / perNode; }
  /// The slowest group of a kind. Ranks fill node 0 first; a group is the
  /// ranks that differ only in their coordinates along `axes` (a mixed-radix
  /// rank layout such as Megatron-LM's, e.g. {{T, 1}} for tensor groups), and
  /// every such group of the layout is placed. All of them run their
  /// collectives at once and the step waits for the slowest: one that spans
  /// nodes, with the fewest members in a node (most traffic across), before
  /// one that stays inside a node, as the inter-node link is the slower.
  /// Tensor groups of T ranks, T not dividing the devices per node, straddle
  /// nodes in some places: they are costed there.
  static GroupPlacement of(llvm::ArrayRef<GroupAxis> axes,
                           int64_t devicesPerNode);
  /// The groups of `size` devices whose consecutive members are `stride`
  /// ranks apart.
  static GroupPlacement strided(int64_t size, int64_t stride,
                                int64_t devicesPerNode) {
    return of({GroupAxis{size, stride}}, devicesPerNode);
  }
  /// The slowest pair of neighbours in such groups (a step of a ring around
  /// the group, a send between pipeline stages): across nodes wherever the
  /// group spans nodes, since somewhere a member's neighbour is on the next
  /// node.
  GroupPlacement neighbours() const { return {2, numNodes() > 1 ? 1 : 2}; }
};

struct CollectiveCost {
  double seconds = 0;
  /// Bytes each device sends (e.g. 2(p-1)/p·n for a ring all-reduce).
  double bytesSentPerDevice = 0;
  Algorithm algorithm = Algorithm::Ring;
};

/// The cheapest form of `kind` over `group`, or its reduction arithmetic
/// (reductionTime) where that takes longer (the two overlap chunk by
/// chunk), plus one kernel launch (DeviceSpec::launchOverhead). `bytes` is
/// the size n of the
/// full tensor: the buffer reduced (all-reduce), the gathered result
/// (all-gather), the input of reduce-scatter, each device's send buffer
/// (all-to-all), the broadcast or sent message.
CollectiveCost collectiveCost(Collective kind, double bytes,
                              const GroupPlacement &group,
                              const ClusterSpec &cluster);

/// The single-link forms, for one link class (tests and calibration compare
/// against these directly).
CollectiveCost ringCost(Collective kind, double bytes, int64_t size,
                        const LinkSpec &link);
CollectiveCost treeCost(Collective kind, double bytes, int64_t size,
                        const LinkSpec &link);

/// Seconds `device` spends combining the data of a reducing collective
/// (all-reduce, reduce-scatter; 0 for the others): (p-1)/p·n bytes reduced,
/// each reading two operands and writing one (the γ term of Thakur et al.).
/// collectiveCost includes it; ringCost and treeCost are the link's part.
double reductionTime(Collective kind, double bytes, int64_t size,
                     const DeviceSpec &device);

/// The part of a collective the schedule cannot hide behind `overlappable`
/// seconds of independent compute.
double exposedTime(double collectiveSeconds, double overlappableSeconds);

} // namespace loom::cost

#endif // LOOM_COSTMODEL_COLLECTIVES_H
