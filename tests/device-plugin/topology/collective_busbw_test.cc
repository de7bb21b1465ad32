// The whole collective model (collective.h with a chip file's interconnect) against published all-reduce bus
// bandwidths (tests/fixtures/plan/busbw/allreduce.csv, each row with its source): the predicted busbw of each
// row's group and size is within 10% of the published one. busbw = algbw x 2(n-1)/n, algbw = bytes / time, as
// nccl-tests defines it (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ascend/common/yaml_json.h"
#include "ascend/topology/chip.h"
#include "ascend/topology/collective.h"

namespace ascend::topology {
namespace {

const std::string kChips = ASCEND_CHIPS_DIR;
const std::string kDir = std::string(ASCEND_FIXTURES) + "/plan/busbw";
constexpr double kTolerance = 0.10;

struct Row {
  std::string chip;
  int per_node = 0;
  int nodes = 0;
  double bytes = 0;
  double busbw_gbps = 0;
  std::string source;
};

std::vector<Row> rows() {
  std::ifstream in(kDir + "/allreduce.csv");
  std::vector<Row> out;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::istringstream s(line);
    Row r;
    std::string f[5];
    for (auto& x : f) std::getline(s, x, ',');
    std::getline(s, r.source);
    r.chip = f[0];
    r.per_node = std::stoi(f[1]);
    r.nodes = std::stoi(f[2]);
    r.bytes = std::stod(f[3]);
    r.busbw_gbps = std::stod(f[4]);
    out.push_back(r);
  }
  return out;
}

Interconnect interconnect_of(const std::string& chip) {
  std::string path = chip.starts_with("chips/") ? kChips + chip.substr(5) : kDir + "/" + chip;
  auto j = ascend::load_yaml_file(path);
  EXPECT_TRUE(j.ok()) << path;
  auto c = chip_from_json(*j);
  EXPECT_TRUE(c.ok()) << path << ": " << c.error().message();
  return c->interconnect;
}

TEST(CollectiveBusbw, PublishedAllReduceFiguresWithinTenPercent) {
  std::vector<Row> all = rows();
  ASSERT_EQ(all.size(), 5U);
  for (const Row& r : all) {
    GroupSpan g{r.per_node, r.nodes, Level::kHccs, Level::kLeaf};
    CollectiveCost c = collective(Op::kAllReduce, g, r.bytes, interconnect_of(r.chip), Bandwidth{});
    int n = g.ranks();
    double busbw = r.bytes / c.seconds * 2 * (n - 1) / n / 1e9;
    EXPECT_NEAR(busbw / r.busbw_gbps, 1.0, kTolerance)
        << r.chip << " " << r.per_node << "x" << r.nodes << " " << r.bytes << " B: model " << busbw
        << " GB/s, published " << r.busbw_gbps << " GB/s (" << r.source << ")";
  }
}

TEST(CollectiveBusbw, LinkEfficiencyScalesTheLineRate) {
  // 8 ranks on one NVSwitch level of 12 x 25 GB/s: the ring's busbw is the level's bandwidth, 300 GB/s at
  // line rate, 240 GB/s at efficiency 0.8.
  Interconnect ic;
  ic.library = Library::kNccl;
  ic.domain = {true, 12, 25, 0, Fabric::kSwitch, 0.8};
  CollectiveCost c = collective(Op::kAllReduce, {8, 1, Level::kHccs, Level::kLeaf}, 1e9, ic, Bandwidth{});
  EXPECT_NEAR(1e9 / c.seconds * 2 * 7 / 8, 240e9, 1);
}

}  // namespace
}  // namespace ascend::topology
