// Rank tables (HCCL 1.0 and 1.2) and the SVG picture.
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "ascend/npu/profiles.h"
#include "ascend/topology/ranktable.h"
#include "ascend/topology/svg.h"
#include "test_util.h"

namespace ascend::topology {
namespace {

using testing::job;
using testing::make;
using testing::node;

TEST(RankTable, Version10) {
  // Two servers; the job's ranks land on node index 2 first (nodes 0, 1 are full), then node 3.
  Cluster c =
      make({node("n0", "atlas800t-a2", "l0", "s0", {0, 1, 2, 3, 4, 5, 6, 7}),
            node("n1", "atlas800t-a2", "l0", "s0", {0, 1, 2, 3, 4, 5, 6, 7}),
            node("n2", "atlas800t-a2", "l0", "s0", {0, 1, 2, 3}), node("n3", "atlas800t-a2", "l0", "s0")});
  Placement p;
  p.job = "x";
  p.pod_size = 4;
  // Ranks 0-3 on n3 (slots 4..7), ranks 4-7 on n2 (slots 7, 6, 5, 4): servers sorted by first rank, devices
  // by rank.
  p.chips = {{3, 4}, {3, 5}, {3, 6}, {3, 7}, {2, 7}, {2, 6}, {2, 5}, {2, 4}};
  auto t = rank_table(c, p);
  EXPECT_EQ(t["status"], "completed");
  EXPECT_EQ(t["version"], "1.0");
  EXPECT_EQ(t["server_count"], "2");
  EXPECT_FALSE(t.contains("super_pod_list"));
  ASSERT_EQ(t["server_list"].size(), 2U);
  EXPECT_EQ(t["server_list"][0]["server_id"], "n3");
  EXPECT_EQ(t["server_list"][1]["server_id"], "n2");
  const auto& d0 = t["server_list"][0]["device"][0];
  EXPECT_EQ(d0["device_id"], "4");
  EXPECT_EQ(d0["device_ip"], npu::device_ip(3, 4));
  EXPECT_EQ(d0["rank_id"], "0");
  const auto& d = t["server_list"][1]["device"];
  ASSERT_EQ(d.size(), 4U);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(d[static_cast<std::size_t>(k)]["rank_id"], std::to_string(4 + k));
    EXPECT_EQ(d[static_cast<std::size_t>(k)]["device_id"], std::to_string(7 - k));
    EXPECT_EQ(d[static_cast<std::size_t>(k)]["device_ip"], npu::device_ip(2, 7 - k));
  }
  // Every value is a string (HCCL reads them as strings).
  for (const auto& s : t["server_list"]) {
    EXPECT_TRUE(s["server_id"].is_string());
    for (const auto& dev : s["device"]) {
      for (auto it = dev.begin(); it != dev.end(); ++it) EXPECT_TRUE(it->is_string()) << it.key();
    }
  }
  std::vector<std::string> keys;
  for (auto it = t.begin(); it != t.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"status", "version", "server_count", "server_list"}));
}

TEST(RankTable, Version12ForA3) {
  Cluster c = make({node("a", "atlas800t-a3", "l0", "sp0"), node("b", "atlas800t-a3", "l1", "sp1"),
                    node("c", "atlas800t-a3", "l1", "sp1")});
  auto p = place(c, ClusterState::initial(c), job(32, 16, 1, 2), Policy::kFirstFit);
  ASSERT_TRUE(p.ok());
  auto t = rank_table(c, *p);
  EXPECT_EQ(t["version"], "1.2");
  ASSERT_EQ(t["server_list"].size(), 2U);
  const auto& dev = t["server_list"][1]["device"];
  ASSERT_EQ(dev.size(), 16U);
  EXPECT_EQ(dev[3]["device_id"], "3");
  EXPECT_EQ(dev[3]["super_device_id"], std::to_string(0 * 16 + 3));  // node b is first in super pod sp1
  EXPECT_EQ(dev[3]["rank_id"], "19");
  EXPECT_EQ(t["server_list"][0]["device"][5]["super_device_id"], "5");
  ASSERT_EQ(t["super_pod_list"].size(), 2U);
  EXPECT_EQ(t["super_pod_list"][0]["super_pod_id"], "0");
  EXPECT_EQ(t["super_pod_list"][0]["server_list"][0]["server_id"], "a");
  EXPECT_EQ(t["super_pod_list"][1]["super_pod_id"], "1");
  EXPECT_EQ(t["super_pod_list"][1]["server_list"][0]["server_id"], "b");
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

TEST(Svg, DrawsNodesChipsStagesRanksAndTpGroups) {
  Cluster c =
      make({node("node-a", "atlas800t-a2", "leaf-0", "s0", {0}, {1}),
            node("node-b", "atlas800t-a2", "leaf-0", "s0"), node("node-c", "atlas800-9000", "leaf-1")});
  ClusterState s = ClusterState::initial(c);
  Job j = job(16, 4, 2, 2, 8);
  auto p = place(c, s, j, Policy::kTopo);
  ASSERT_TRUE(p.ok());
  std::string svg = render_svg(c, s, j, *p);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0U);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Every node is a box with its name; every rank is written on its chip with a tooltip.
  for (const char* n : {"node-a", "node-b", "node-c", "leaf-0", "leaf-1"})
    EXPECT_NE(svg.find(n), std::string::npos) << n;
  for (int r = 0; r < 16; ++r) {
    EXPECT_NE(svg.find("<title>rank " + std::to_string(r) + ", stage " + std::to_string(coord_of(j, r).p)),
              std::string::npos)
        << r;
  }
  // Stage colours: stage 0 and stage 1 chips use the first two palette colours, 8 chips each.
  EXPECT_EQ(count(svg, "fill=\"#1f77b4\" stroke=\"#333\""), 8);
  EXPECT_EQ(count(svg, "fill=\"#ff7f0e\" stroke=\"#333\""), 8);
  // One outline per TP group (4 groups, none split), busy and unhealthy chips drawn as such.
  EXPECT_EQ(count(svg, "fill=\"none\" stroke=\"#111\" stroke-width=\"2.5\"/>"), 4 + 1 /* legend */);
  EXPECT_EQ(count(svg, "fill=\"#f6d5d5\" stroke=\"#c33\""), 1);
  // Well-formed enough: every opened <g> closes, tags balance.
  EXPECT_EQ(count(svg, "<g>"), count(svg, "</g>"));
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<"), count(svg, ">"));
}

TEST(Svg, SplitTpGroupIsDashedRed) {
  Cluster c = make({node("a1", "atlas800-9000", "l0", "s0", {2, 3})});
  ClusterState s = ClusterState::initial(c);
  Job j = job(4, 4, 1, 1);
  auto p = place(c, s, j, Policy::kFirstFit);
  ASSERT_TRUE(p.ok());
  std::string svg = render_svg(c, s, j, *p);
  // The group straddles both rings of one node: one dashed red outline around it (plus the legend's).
  EXPECT_EQ(count(svg, "stroke=\"#d00\" stroke-width=\"2.5\" stroke-dasharray=\"5,3\""), 2);
}

}  // namespace
}  // namespace ascend::topology
