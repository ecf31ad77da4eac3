//===- Collectives.cpp - α–β costs of collectives -------------------------===//
//
// Notation: p devices, n bytes (see collectiveCost in the header for what n
// is per collective), α the per-message latency and B the per-device
// bandwidth of the link the messages cross.
//
// Sources:
//  [T05] R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective
//        Communication Operations in MPICH", IJHPCA 19(1), 2005.
//  [PY09] P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms
//        for clusters of workstations", JPDC 69(2), 2009.
//  [SST09] P. Sanders, J. Speck, J. L. Träff, "Two-tree algorithms for full
//        bandwidth broadcast, reduction and scan", Parallel Computing 35(12),
//        2009 (NCCL's double binary tree).
//  [J18] X. Jia et al., "Highly Scalable Deep Learning Training System with
//        Mixed-Precision: Training ImageNet in Four Minutes", 2018 (the
//        hierarchical all-reduce: reduce-scatter inside the node, all-reduce
//        across nodes, all-gather inside).
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/Collectives.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <vector>

namespace loom::cost {

llvm::StringRef stringifyCollective(Collective kind) {
  switch (kind) {
  case Collective::AllReduce:
    return "all-reduce";
  case Collective::AllGather:
    return "all-gather";
  case Collective::ReduceScatter:
    return "reduce-scatter";
  case Collective::AllToAll:
    return "all-to-all";
  case Collective::Broadcast:
    return "broadcast";
  case Collective::SendRecv:
    return "send/recv";
  }
  return "?";
}

llvm::StringRef stringifyAlgorithm(Algorithm algorithm) {
  switch (algorithm) {
  case Algorithm::Ring:
    return "ring";
  case Algorithm::Tree:
    return "tree";
  case Algorithm::Hierarchical:
    return "hierarchical";
  case Algorithm::PointToPoint:
    return "point-to-point";
  }
  return "?";
}

namespace {

/// GroupPlacement::of without the cache.
GroupPlacement placeGroups(llvm::ArrayRef<GroupAxis> axes,
                           int64_t devicesPerNode) {
  // A group's members are its first rank (its base) plus these offsets.
  std::vector<int64_t> offsets{0};
  int64_t block = 1;
  for (const GroupAxis &axis : axes) {
    assert(axis.size >= 1 && axis.stride >= 1 && devicesPerNode >= 1);
    std::vector<int64_t> next;
    next.reserve(offsets.size() * size_t(axis.size));
    for (int64_t i = 0; i < axis.size; ++i)
      for (int64_t offset : offsets)
        next.push_back(offset + i * axis.stride);
    offsets = std::move(next);
    block = std::max(block, axis.size * axis.stride);
  }
  std::sort(offsets.begin(), offsets.end());
  const int64_t size = int64_t(offsets.size());
  if (size <= 1)
    return {1, 1};
  // The groups tile blocks of `block` ranks: the bases are the ranks of the
  // first block whose coordinates along the axes are all 0, repeated every
  // block. How a group lies on nodes depends only on its base modulo the
  // node size, and those residues repeat every lcm(block, node) ranks.
  const int64_t node = devicesPerNode;
  std::vector<char> residues(size_t(node), 0);
  const int64_t repeats = node / std::gcd(block, node);
  int64_t found = 0;
  for (int64_t base = 0; base < block && found < node; ++base) {
    bool isBase = llvm::all_of(axes, [&](const GroupAxis &axis) {
      return (base / axis.stride) % axis.size == 0;
    });
    for (int64_t j = 0; isBase && j < repeats; ++j) {
      char &seen = residues[size_t((base + j * block) % node)];
      found += !seen;
      seen = 1;
    }
  }
  // Each distinct residue: how many members each node it touches holds.
  int64_t worst = size; // members per node of the slowest group so far
  for (int64_t residue = 0; residue < node; ++residue) {
    if (!residues[size_t(residue)])
      continue;
    int64_t fewest = size, most = 0, count = 0, nodes = 0;
    int64_t current = -1;
    for (int64_t offset : offsets) {
      int64_t at = (residue + offset) / node;
      if (at != current) {
        if (count) {
          fewest = std::min(fewest, count);
          most = std::max(most, count);
        }
        current = at;
        count = 0;
        ++nodes;
      }
      ++count;
    }
    fewest = std::min(fewest, count);
    most = std::max(most, count);
    if (nodes == 1)
      continue;
    worst = std::min(worst, fewest == most ? fewest : 1);
  }
  return {size, worst};
}

} // namespace

GroupPlacement GroupPlacement::of(llvm::ArrayRef<GroupAxis> axes,
                                  int64_t devicesPerNode) {
  // A search asks for the same few layouts for each of its 10^5 plans.
  using Key = std::pair<std::vector<std::pair<int64_t, int64_t>>, int64_t>;
  static std::mutex mutex;
  static std::map<Key, GroupPlacement> cache;
  Key key{{}, devicesPerNode};
  for (const GroupAxis &axis : axes)
    key.first.push_back({axis.size, axis.stride});
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (inserted)
    it->second = placeGroups(axes, devicesPerNode);
  return it->second;
}

namespace {

double log2Ceil(int64_t p) { return std::ceil(std::log2(double(p))); }

CollectiveCost cost(double seconds, double bytes, Algorithm algorithm) {
  return {seconds, bytes, algorithm};
}

} // namespace

CollectiveCost ringCost(Collective kind, double n, int64_t p,
                        const LinkSpec &link) {
  if (p <= 1)
    return cost(0, 0, Algorithm::Ring);
  double a = link.latency, b = link.bandwidth, steps = double(p - 1);
  double share = steps / double(p) * n; // (p-1)/p·n
  switch (kind) {
  case Collective::AllReduce:
    // Ring reduce-scatter then ring all-gather: 2(p-1) steps of n/p bytes
    // [PY09 §3, T05 §4.4]: 2(p-1)α + 2(p-1)/p·n/B.
    return cost(2 * steps * a + 2 * share / b, 2 * share, Algorithm::Ring);
  case Collective::AllGather:
  case Collective::ReduceScatter:
    // Ring: p-1 steps of n/p bytes [T05 §4.1, §4.3]: (p-1)α + (p-1)/p·n/B.
    return cost(steps * a + share / b, share, Algorithm::Ring);
  case Collective::AllToAll:
    // Pairwise exchange, p-1 steps of n/p bytes [T05 §4.5].
    return cost(steps * a + share / b, share, Algorithm::Ring);
  case Collective::Broadcast:
    // Scatter then ring all-gather (van de Geijn) [T05 §4.2]:
    // (log p + p - 1)α + 2(p-1)/p·n/B.
    return cost((log2Ceil(p) + steps) * a + 2 * share / b, 2 * share,
                Algorithm::Ring);
  case Collective::SendRecv:
    // One message [Hockney's model]: α + n/B.
    return cost(a + n / b, n, Algorithm::PointToPoint);
  }
  return cost(0, 0, Algorithm::Ring);
}

CollectiveCost treeCost(Collective kind, double n, int64_t p,
                        const LinkSpec &link) {
  if (p <= 1)
    return cost(0, 0, Algorithm::Tree);
  double a = link.latency, b = link.bandwidth, depth = log2Ceil(p);
  double share = double(p - 1) / double(p) * n;
  switch (kind) {
  case Collective::AllReduce:
    // Recursive-halving reduce-scatter then recursive-doubling all-gather
    // (Rabenseifner) [T05 §4.4]: 2⌈log p⌉α + 2(p-1)/p·n/B, the two phases
    // below, so that an all-reduce never costs more than the reduce-scatter
    // and all-gather it can be split into. It beats the pipelined two-tree
    // reduce and broadcast [SST09] (2⌈log p⌉α + 2n/B) at every size.
    return cost(2 * depth * a + 2 * share / b, 2 * share, Algorithm::Tree);
  case Collective::AllGather:
  case Collective::ReduceScatter:
    // Recursive doubling / halving [T05 §4.1, §4.3]: ⌈log p⌉α + (p-1)/p·n/B.
    return cost(depth * a + share / b, share, Algorithm::Tree);
  case Collective::AllToAll:
    // Bruck's algorithm [T05 §4.5]: ⌈log p⌉α + ⌈log p⌉·n/2/B.
    return cost(depth * a + depth * n / 2 / b, depth * n / 2, Algorithm::Tree);
  case Collective::Broadcast:
    // Pipelined two-tree broadcast [SST09]: ⌈log p⌉α + n/B.
    return cost(depth * a + n / b, n, Algorithm::Tree);
  case Collective::SendRecv:
    return ringCost(kind, n, p, link);
  }
  return cost(0, 0, Algorithm::Tree);
}

namespace {

CollectiveCost cheapest(Collective kind, double n, int64_t p,
                        const LinkSpec &link) {
  CollectiveCost ring = ringCost(kind, n, p, link),
                 tree = treeCost(kind, n, p, link);
  return tree.seconds < ring.seconds ? tree : ring;
}

CollectiveCost sum(std::initializer_list<CollectiveCost> phases) {
  CollectiveCost total{0, 0, Algorithm::Hierarchical};
  for (const CollectiveCost &phase : phases) {
    total.seconds += phase.seconds;
    total.bytesSentPerDevice += phase.bytesSentPerDevice;
  }
  return total;
}

/// A group with m members in each of k nodes: phases inside the node on
/// intra, across nodes on inter (k concurrent groups, one per local index).
CollectiveCost hierarchicalCost(Collective kind, double n, int64_t m, int64_t k,
                                const LinkSpec &intra, const LinkSpec &inter) {
  switch (kind) {
  case Collective::AllReduce:
    // [J18]: reduce-scatter inside, all-reduce of n/m across, all-gather
    // inside.
    return sum({cheapest(Collective::ReduceScatter, n, m, intra),
                cheapest(Collective::AllReduce, n / m, k, inter),
                cheapest(Collective::AllGather, n, m, intra)});
  case Collective::AllGather:
    // Gather the n/m of each node's members across nodes, then inside.
    return sum({cheapest(Collective::AllGather, n / m, k, inter),
                cheapest(Collective::AllGather, n, m, intra)});
  case Collective::ReduceScatter:
    return sum({cheapest(Collective::ReduceScatter, n, m, intra),
                cheapest(Collective::ReduceScatter, n / m, k, inter)});
  case Collective::Broadcast:
    return sum({cheapest(Collective::Broadcast, n, k, inter),
                cheapest(Collective::Broadcast, n, m, intra)});
  case Collective::AllToAll: {
    // Pairwise exchange over all p = m·k members [T05 §4.5]: of each
    // device's n bytes, (p-m)/p go to other nodes, (m-1)/p stay inside.
    int64_t p = m * k;
    double out = n * double(p - m) / double(p),
           in = n * double(m - 1) / double(p);
    double seconds = double(p - m) * inter.latency + out / inter.bandwidth +
                     double(m - 1) * intra.latency + in / intra.bandwidth;
    return {seconds, out + in, Algorithm::Hierarchical};
  }
  case Collective::SendRecv:
    return ringCost(kind, n, 2, inter);
  }
  return {};
}

} // namespace

double reductionTime(Collective kind, double n, int64_t p,
                     const DeviceSpec &device) {
  if (p <= 1 ||
      (kind != Collective::AllReduce && kind != Collective::ReduceScatter))
    return 0;
  // [T05 §2]: γ per byte reduced; a streaming add moves 3 bytes per byte.
  double reduced = double(p - 1) / double(p) * n;
  return 3 * reduced / (device.memoryEfficiency * device.memoryBandwidth);
}

namespace {

CollectiveCost linkCost(Collective kind, double n, const GroupPlacement &group,
                        const ClusterSpec &cluster) {
  int64_t p = group.size, m = group.perNode, k = group.numNodes();
  if (k == 1)
    return cheapest(kind, n, p, cluster.intraNode);
  LinkSpec inter = cluster.interNodePerDevice();
  // A flat algorithm over p members spanning nodes runs at the pace of its
  // slowest link; with several members per node the hierarchical form keeps
  // most traffic inside the node. Take whichever is cheaper.
  CollectiveCost flat = cheapest(kind, n, p, inter);
  if (m == 1)
    return flat;
  CollectiveCost hier =
      hierarchicalCost(kind, n, m, k, cluster.intraNode, inter);
  return hier.seconds < flat.seconds ? hier : flat;
}

} // namespace

CollectiveCost collectiveCost(Collective kind, double n,
                              const GroupPlacement &group,
                              const ClusterSpec &cluster) {
  if (group.size <= 1)
    return {0, 0, Algorithm::Ring};
  CollectiveCost cost = linkCost(kind, n, group, cluster);
  // The reduction arithmetic runs on each chunk as it arrives while the
  // next chunk is on the wire (NCCL's ring and tree kernels are pipelined
  // over chunks), so the slower of the two bounds the time. One kernel
  // launch per collective (NCCL runs every algorithm, the hierarchical ones
  // included, in one kernel) makes one all-reduce cheaper than the
  // reduce-scatter and all-gather it equals on the links.
  cost.seconds = std::max(cost.seconds,
                          reductionTime(kind, n, group.size, cluster.device)) +
                 cluster.device.launchOverhead;
  return cost;
}

double exposedTime(double collectiveSeconds, double overlappableSeconds) {
  // A collective on its own stream/communicator runs concurrently with
  // independent compute; only what outlasts that compute is on the critical
  // path (the overlap model of Megatron-LM's and DeepSpeed's gradient
  // bucketing: Narayanan et al. 2021 §3.2 / Rajbhandari et al. 2020 §5).
  return std::max(0.0, collectiveSeconds - std::max(0.0, overlappableSeconds));
}

} // namespace loom::cost
