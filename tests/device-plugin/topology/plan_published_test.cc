// The planner against published training configurations (tests/fixtures/plan/published.yaml, each with its
// source): the published (tp, pp) must be among plan's first three distinct (tp, pp), and plan's predicted
// utilization of that layout within 10 points of the published one. Entries that need more (a looser rank,
// another efficiency) say why in `disagreement`.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/yaml_json.h"
#include "ascend/topology/plan.h"

namespace ascend::topology {
namespace {

using nlohmann::json;

const std::string kDir = std::string(ASCEND_FIXTURES) + "/plan";
constexpr double kTolerance = 0.10;

PlanRequest request_of(const json& c) {
  PlanRequest r;
  auto chip = ascend::load_yaml_file(kDir + "/" + c["chip"].get<std::string>());
  EXPECT_TRUE(chip.ok()) << chip.error().message();
  auto spec = chip_from_json(*chip);
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  r.chip_spec = *spec;
  r.npus = c["npus"];
  const json& m = c["model"];
  r.model = {m["params"],  m["layers"], m["hidden"],      m["heads"],
             m["seq_len"], m["vocab"],  m["micro_batch"], m["global_batch"]};
  const json& t = c["train"];
  auto recompute = parse_recompute(t.value("recompute", std::string("none")));
  EXPECT_TRUE(recompute.ok());
  r.train.recompute = *recompute;
  r.train.sequence_parallel = t.value("sequence_parallel", false);
  r.train.optimizer_parallel = t.value("optimizer_parallel", false);
  r.efficiency = c.value("efficiency", kDefaultEfficiency);
  return r;
}

// Distinct (tp, pp) of the fitting entries, best first.
std::vector<std::pair<int, int>> ranking(const PlanResult& p) {
  std::vector<std::pair<int, int>> out;
  for (const auto& e : p.entries) {
    std::pair<int, int> k{e.layout.tp, e.layout.pp};
    if (e.fits && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

// Plan's best entry with the published layout (and v, when the source gives it).
const PlanEntry* published_entry(const PlanResult& p, const json& pub) {
  for (const auto& e : p.entries) {
    if (!e.fits || e.layout.tp != pub["tp"] || e.layout.pp != pub["pp"]) continue;
    if (pub.contains("v") && e.layout.v != pub["v"]) continue;
    return &e;
  }
  return nullptr;
}

TEST(PlanPublished, RanksThePublishedLayoutAndPredictsItsUtilization) {
  auto doc = ascend::load_yaml_file(kDir + "/published.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().message();
  const json& configs = (*doc)["configurations"];
  ASSERT_GE(configs.size(), 10U);
  for (const json& c : configs) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    if (c.contains("efficiency") || c.contains("top")) {
      EXPECT_TRUE(c.contains("disagreement")) << "an override needs its reason";
    }
    auto p = plan(request_of(c));
    ASSERT_TRUE(p.ok()) << p.error().message();
    const json& pub = c["published"];
    auto order = ranking(*p);
    std::pair<int, int> want{pub["tp"], pub["pp"]};
    auto at = std::find(order.begin(), order.end(), want) - order.begin();
    EXPECT_LT(at, c.value("top", 3)) << "published tp " << want.first << " x pp " << want.second << " ranks "
                                     << at + 1 << " of " << order.size();
    const PlanEntry* e = published_entry(*p, pub);
    ASSERT_NE(e, nullptr) << "the published layout does not fit";
    double predicted = pub["kind"] == "mfu" ? e->time.mfu : e->time.hfu;
    EXPECT_NEAR(predicted, pub["utilization"].get<double>(), kTolerance);
    std::printf("%-24s published tp %d x pp %d: rank %ld of %zu, %s %.3f predicted, %.3f published\n",
                name.c_str(), want.first, want.second, static_cast<long>(at + 1), order.size(),
                pub["kind"].get<std::string>().c_str(), predicted, pub["utilization"].get<double>());
  }
}

}  // namespace
}  // namespace ascend::topology
