//===- GroupPlacementTest.cpp - Where a kind of group sits on nodes -------===//
//
// GroupPlacement::of reasons about base ranks modulo the node size. The
// reference here lays out every rank of a concrete cluster instead: each
// rank's coordinates in the mixed-radix order, its node, the groups as
// sets of ranks, and the slowest group by counting its members per node.
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/Collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

using namespace loom::cost;

namespace {

/// Every rank of `radices` (fastest first; devices = their product) on
/// nodes of `node`; the groups are the ranks that agree on every axis not
/// in `groupAxes`. Returns the members per node of the slowest group: the
/// fewest of a group spanning nodes with equal shares, 1 for a group with
/// unequal shares, the group size when every group stays in a node.
int64_t referencePerNode(const std::vector<int64_t> &radices,
                         const std::vector<int> &groupAxes, int64_t node) {
  int64_t devices = 1, size = 1;
  for (int64_t r : radices)
    devices *= r;
  for (int axis : groupAxes)
    size *= radices[axis];
  // group key -> (node -> members)
  std::map<std::vector<int64_t>, std::map<int64_t, int64_t>> groups;
  for (int64_t rank = 0; rank < devices; ++rank) {
    std::vector<int64_t> key;
    int64_t rest = rank;
    for (size_t axis = 0; axis < radices.size(); ++axis) {
      int64_t coordinate = rest % radices[axis];
      rest /= radices[axis];
      bool inGroup = std::find(groupAxes.begin(), groupAxes.end(), int(axis)) !=
                     groupAxes.end();
      key.push_back(inGroup ? -1 : coordinate);
    }
    ++groups[key][rank / node];
  }
  int64_t worst = size;
  for (const auto &[key, perNode] : groups) {
    if (perNode.size() == 1)
      continue;
    int64_t fewest = size, most = 0;
    for (const auto &[at, count] : perNode) {
      fewest = std::min(fewest, count);
      most = std::max(most, count);
    }
    worst = std::min(worst, fewest == most ? fewest : 1);
  }
  return worst;
}

/// The group's axes as GroupPlacement::of takes them (size, stride).
std::vector<GroupAxis> axesOf(const std::vector<int64_t> &radices,
                              const std::vector<int> &groupAxes) {
  std::vector<GroupAxis> axes;
  for (int axis : groupAxes) {
    int64_t stride = 1;
    for (int inner = 0; inner < axis; ++inner)
      stride *= radices[inner];
    axes.push_back({radices[axis], stride});
  }
  return axes;
}

TEST(GroupPlacementTest, FollowsTheStride) {
  GroupPlacement tensor = GroupPlacement::strided(8, 1, 8);
  EXPECT_EQ(tensor.perNode, 8);
  GroupPlacement data = GroupPlacement::strided(16, 8, 8);
  EXPECT_EQ(data.perNode, 1);
  EXPECT_EQ(data.numNodes(), 16);
  GroupPlacement mixed = GroupPlacement::strided(8, 2, 8);
  EXPECT_EQ(mixed.perNode, 4);
  EXPECT_EQ(GroupPlacement::strided(16, 1, 8).perNode, 8);
}

TEST(GroupPlacementTest, TensorGroupsThatStraddleNodesAreTheSlowest) {
  // T = 6 on 8-device nodes: ranks 0-5 fit node 0, but 6-11 put 2 on node
  // 0 and 4 on node 1, unequal shares: flat across nodes.
  EXPECT_EQ(GroupPlacement::strided(6, 1, 8).perNode, 1);
  EXPECT_EQ(GroupPlacement::strided(6, 1, 8).numNodes(), 6);
  // T = 3: ranks 6-8 are 2 + 1.
  EXPECT_EQ(GroupPlacement::strided(3, 1, 8).perNode, 1);
  // T = 12: ranks 0-11 are 8 + 4.
  EXPECT_EQ(GroupPlacement::strided(12, 1, 8).perNode, 1);
  // T = 4 on 6-device nodes: ranks 4-7 are 2 + 2, equal shares across two
  // nodes, slower than the groups inside a node.
  GroupPlacement even = GroupPlacement::strided(4, 1, 6);
  EXPECT_EQ(even.perNode, 2);
  EXPECT_EQ(even.numNodes(), 2);
}

TEST(GroupPlacementTest, NeighboursCrossNodesWhereTheGroupSpansThem) {
  // Four pipeline stages 4 ranks apart on 8-device nodes: stages 1 and 2
  // are on different nodes, so a send between stages crosses somewhere.
  GroupPlacement pipeline = GroupPlacement::strided(4, 4, 8);
  EXPECT_EQ(pipeline.numNodes(), 2);
  EXPECT_EQ(pipeline.neighbours().perNode, 1);
  // Two stages 4 apart share a node.
  EXPECT_EQ(GroupPlacement::strided(2, 4, 8).neighbours().perNode, 2);
  // A context ring of 4 ranks 4 apart (T = 4, CP = 4) spans two nodes.
  EXPECT_EQ(GroupPlacement::strided(4, 4, 8).neighbours().numNodes(), 2);
}

TEST(GroupPlacementTest, MatchesEveryRankLaidOut) {
  // Mixed-radix layouts (T, CP, D, P) and (T, CP, P, D): every kind of
  // group (tensor, context, data, pipeline, data x context) on nodes of
  // 2, 4, 6 and 8 devices.
  int checked = 0;
  for (int64_t node : {2, 4, 6, 8})
    for (int64_t t : {1, 2, 3, 4, 6})
      for (int64_t c : {1, 2, 3})
        for (int64_t d : {1, 2, 3, 4})
          for (int64_t p : {1, 2, 3}) {
            if (t * c * d * p % node != 0)
              continue;
            // tp-dp-pp, then tp-pp-dp; the last kind is data x context.
            for (bool dataInner : {true, false}) {
              std::vector<int64_t> radices =
                  dataInner ? std::vector<int64_t>{t, c, d, p}
                            : std::vector<int64_t>{t, c, p, d};
              int dataAxis = dataInner ? 2 : 3;
              std::vector<std::vector<int>> kinds{
                  {0}, {1}, {2}, {3}, {1, dataAxis}};
              for (const std::vector<int> &kind : kinds) {
                GroupPlacement placed =
                    GroupPlacement::of(axesOf(radices, kind), node);
                EXPECT_EQ(placed.perNode, referencePerNode(radices, kind, node))
                    << "radices " << radices[0] << "," << radices[1] << ","
                    << radices[2] << "," << radices[3] << " group axes "
                    << kind.front() << (kind.size() > 1 ? "+" : "") << " node "
                    << node;
                EXPECT_EQ(placed.size % placed.perNode, 0);
                ++checked;
              }
            }
          }
  EXPECT_GT(checked, 1000);
}

} // namespace
