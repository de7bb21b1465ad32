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

// The whole picture of a small case, every coordinate worked out by hand from the drawing rules (chip 34,
// gap 5, padding 8, node header 18, gap between nodes 12, leaf label column 120, first leaf at y 96; an
// Atlas 800T A2 node has one HCCS domain of 8 single-chip cards: 2 rows of 4 chips, a box of 167 x 107):
// nodes a and b on leaf l0 (spine s0), chip 6 of a busy and chip 7 unhealthy; ranks 0-2 on chips 0-2 of a,
// rank 3 on chip 0 of b, so TP group {2, 3} leaves its node (dashed red, one outline on each node).
TEST(Svg, SmallPlacementByteForByte) {
  Cluster c = make({node("a", "atlas800t-a2", "l0", "s0", {6}, {7}), node("b", "atlas800t-a2", "l0", "s0")});
  ClusterState s = ClusterState::initial(c);
  Job j = job(4, 2, 2, 1);
  Placement p;
  p.job = "x<&\">";
  p.policy = Policy::kTopo;
  p.pod_size = 2;
  p.chips = {{0, 0}, {0, 1}, {0, 2}, {1, 0}};
  p.eval.cost = {0.25, 1, 0.25, 1.5};  // tp, pp, dp, total
  p.eval.tp_groups_outside_hccs = 1;
  const std::string want =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"235\" viewBox=\"0 0 760 235\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      "<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">test: job x&lt;&amp;&quot;&gt; (4 NPUs "
      "= "
      "tp 2 x pp 2 x dp 1, tp-dp-pp), policy topo</text>\n"
      "<text x=\"10\" y=\"42\" font-size=\"13\">cost total 1.5 s (tp 0.25, pp 1, dp 0.25); TP groups outside "
      "HCCS: 1</text>\n"
      // The legend: swatches 28 + 7 per label character apart.
      "<rect x=\"10\" y=\"56\" width=\"16\" height=\"16\" rx=\"3\" fill=\"#1f77b4\" stroke=\"#555\"/>"
      "<text x=\"31\" y=\"69\" font-size=\"12\">stage 0</text>\n"
      "<rect x=\"87\" y=\"56\" width=\"16\" height=\"16\" rx=\"3\" fill=\"#ff7f0e\" stroke=\"#555\"/>"
      "<text x=\"108\" y=\"69\" font-size=\"12\">stage 1</text>\n"
      "<rect x=\"164\" y=\"56\" width=\"16\" height=\"16\" rx=\"3\" fill=\"#ffffff\" stroke=\"#555\"/>"
      "<text x=\"185\" y=\"69\" font-size=\"12\">free</text>\n"
      "<rect x=\"220\" y=\"56\" width=\"16\" height=\"16\" rx=\"3\" fill=\"#c9c9c9\" stroke=\"#555\"/>"
      "<text x=\"241\" y=\"69\" font-size=\"12\">busy</text>\n"
      "<rect x=\"276\" y=\"56\" width=\"16\" height=\"16\" rx=\"3\" fill=\"#f6d5d5\" stroke=\"#555\"/>"
      "<text x=\"297\" y=\"69\" font-size=\"12\">unhealthy</text>\n"
      "<rect x=\"367\" y=\"54\" width=\"30\" height=\"20\" rx=\"5\" fill=\"none\" stroke=\"#111\" "
      "stroke-width=\"2.5\"/><text x=\"403\" y=\"69\" font-size=\"12\">TP group</text>\n"
      "<rect x=\"477\" y=\"54\" width=\"30\" height=\"20\" rx=\"5\" fill=\"none\" stroke=\"#d00\" "
      "stroke-width=\"2.5\" stroke-dasharray=\"5,3\"/><text x=\"513\" y=\"69\" font-size=\"12\">TP group "
      "outside HCCS</text>\n"
      // The leaf's band, 4 around its line of boxes (y 96, 107 high).
      "<rect x=\"4\" y=\"92\" width=\"752\" height=\"115\" rx=\"6\" fill=\"#f3f5f8\" stroke=\"#d5dae2\"/>\n"
      "<text x=\"12\" y=\"114\" font-size=\"13\" font-weight=\"bold\">l0</text>"
      "<text x=\"12\" y=\"132\" font-size=\"11\" fill=\"#555\">s0</text>\n"
      // Node a at (120, 96): chips at x 128 + 39 col, y 122 + 39 row.
      "<g><rect x=\"120\" y=\"96\" width=\"167\" height=\"107\" rx=\"6\" fill=\"#ffffff\" stroke=\"#8a94a6\" "
      "stroke-width=\"1.2\"/><text x=\"128\" y=\"110\" font-size=\"11\" fill=\"#333\">a</text>\n"
      "<rect x=\"128\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#1f77b4\" stroke=\"#333\" "
      "stroke-width=\"0.6\"><title>rank 0, stage 0, device 0</title></rect>"
      "<text x=\"145\" y=\"143\" font-size=\"12\" text-anchor=\"middle\" font-weight=\"bold\" "
      "fill=\"#ffffff\">0</text>\n"
      "<rect x=\"167\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#1f77b4\" stroke=\"#333\" "
      "stroke-width=\"0.6\"><title>rank 1, stage 0, device 1</title></rect>"
      "<text x=\"184\" y=\"143\" font-size=\"12\" text-anchor=\"middle\" font-weight=\"bold\" "
      "fill=\"#ffffff\">1</text>\n"
      // Orange is light (luma 152 of 255): dark text on it.
      "<rect x=\"206\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ff7f0e\" stroke=\"#333\" "
      "stroke-width=\"0.6\"><title>rank 2, stage 1, device 2</title></rect>"
      "<text x=\"223\" y=\"143\" font-size=\"12\" text-anchor=\"middle\" font-weight=\"bold\" "
      "fill=\"#111111\">2</text>\n"
      "<rect x=\"245\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"128\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"167\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"206\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#c9c9c9\" stroke=\"#999\"/>\n"
      "<rect x=\"245\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#f6d5d5\" stroke=\"#c33\"/>"
      "<path d=\"M252 168 L272 188 M272 168 L252 188\" stroke=\"#c33\" stroke-width=\"2\"/>\n"
      "</g>\n"
      // Node b at (299, 96).
      "<g><rect x=\"299\" y=\"96\" width=\"167\" height=\"107\" rx=\"6\" fill=\"#ffffff\" stroke=\"#8a94a6\" "
      "stroke-width=\"1.2\"/><text x=\"307\" y=\"110\" font-size=\"11\" fill=\"#333\">b</text>\n"
      "<rect x=\"307\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ff7f0e\" stroke=\"#333\" "
      "stroke-width=\"0.6\"><title>rank 3, stage 1, device 0</title></rect>"
      "<text x=\"324\" y=\"143\" font-size=\"12\" text-anchor=\"middle\" font-weight=\"bold\" "
      "fill=\"#111111\">3</text>\n"
      "<rect x=\"346\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"385\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"424\" y=\"122\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"307\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"346\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"385\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "<rect x=\"424\" y=\"161\" width=\"34\" height=\"34\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n"
      "</g>\n"
      // TP group {0, 1} on a: chips 0-1 with 3 around them. {2, 3}: one dashed outline on each node.
      "<rect x=\"125\" y=\"119\" width=\"79\" height=\"40\" rx=\"6\" fill=\"none\" stroke=\"#111\" "
      "stroke-width=\"2.5\"/>\n"
      "<rect x=\"203\" y=\"119\" width=\"40\" height=\"40\" rx=\"6\" fill=\"none\" stroke=\"#d00\" "
      "stroke-width=\"2.5\" stroke-dasharray=\"5,3\"/>\n"
      "<rect x=\"304\" y=\"119\" width=\"40\" height=\"40\" rx=\"6\" fill=\"none\" stroke=\"#d00\" "
      "stroke-width=\"2.5\" stroke-dasharray=\"5,3\"/>\n"
      "</svg>\n";
  EXPECT_EQ(render_svg(c, s, j, p), want);
}

// A cluster of more than 64 nodes shows only the leaves the job uses, says so, and wraps a leaf's nodes 16
// to a line; a pipeline of more than 12 stages shows 12 swatches and the count. Worked out by hand: 60 nodes
// on leaf l0 make 4 lines (16, 16, 16, 12) of 107 + 12 from y 96, so the band is 4 x 119 - 12 = 464 high and
// the picture 96 + 4 x 119 + 10 + 10 = 592; a line of 16 boxes ends at 120 + 16 x (167 + 12) = 2984, so
// the picture is 2994 wide. Swatches "stage 0".."stage 9" are 77 apart, "stage 10" and "stage 11" 84.
TEST(Svg, LargeClusterShowsTheJobsLeavesAndLongPipelinesTheirCount) {
  std::vector<NodeSpec> specs;
  for (int i = 0; i < 60; ++i) specs.push_back(node("n" + std::to_string(i), "atlas800t-a2", "l0", "s0"));
  for (int i = 60; i < 65; ++i) specs.push_back(node("n" + std::to_string(i), "atlas800t-a2", "l1", "s0"));
  Cluster c = make(specs);
  ClusterState s = ClusterState::initial(c);
  Job j = job(13, 1, 13, 1);
  Placement p;
  p.job = "long";
  p.pod_size = 1;
  for (int r = 0; r < 13; ++r) p.chips.push_back({r, 0});  // one rank on chip 0 of nodes n0..n12
  std::string svg = render_svg(c, s, j, p);
  EXPECT_NE(svg.find("width=\"2994\" height=\"592\" viewBox=\"0 0 2994 592\""), std::string::npos);
  EXPECT_NE(svg.find("<text x=\"10\" y=\"90\" font-size=\"12\" fill=\"#555\">65 nodes in 2 leaves; showing "
                     "the 1 leaves the job uses</text>\n"),
            std::string::npos);
  EXPECT_NE(svg.find("<rect x=\"4\" y=\"92\" width=\"2986\" height=\"472\" rx=\"6\""), std::string::npos);
  EXPECT_EQ(svg.find(">l1<"), std::string::npos);
  EXPECT_EQ(svg.find(">n60<"), std::string::npos);
  // n16 starts the second line: x 120, y 96 + 119.
  EXPECT_NE(svg.find("<g><rect x=\"120\" y=\"215\" width=\"167\" height=\"107\""), std::string::npos);
  EXPECT_NE(svg.find("<text x=\"885\" y=\"69\" font-size=\"12\">stage 11</text>\n"
                     "<text x=\"948\" y=\"69\" font-size=\"12\">... 13 stages</text>\n"
                     "<rect x=\"1038\" y=\"56\" width=\"16\" height=\"16\" rx=\"3\" fill=\"#ffffff\""),
            std::string::npos);
  EXPECT_EQ(svg.find(">stage 12<"), std::string::npos);
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
