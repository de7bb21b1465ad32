// The dashboard in a real browser: Debian's chromium, headless, loads the page the server serves, runs its
// script (which reads /v1/cluster) and hands back the resulting DOM; the test checks that the placed job's TP
// groups are outlined, its chips coloured, the unhealthy chip marked and the job listed, and keeps a
// screenshot (build/tests/artifacts/dashboard.png).
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "ascend/scheduler/server.h"
#include "browser.h"
#include "extender_util.h"
#include "run_command.h"

namespace ascend::scheduler {
namespace {

using nlohmann::json;

using ascend::testing::chromium;

int count(const std::string& text, const std::string& re) {
  return ascend::testing::count_matches(text, re);
}

TEST(Dashboard, ShowsThePlacedJobsTpGroupsAndUnhealthyChipsInARealBrowser) {
  if (ascend::testing::run_command({"chromium", "--version"}).exit_code != 0) {
    FAIL() << "chromium is not installed (scripts/deps installs it)";
  }
  auto cluster = testing::make_cluster({{"node-0", "atlas800t-a2", "leaf-0", {}, {}},
                                        {"node-1", "atlas800t-a2", "leaf-0", {}, {}},
                                        {"node-2", "atlas800-9000", "leaf-1", {}, {}}});
  ServeOptions o;
  o.listen = "127.0.0.1:0";
  o.extender_listen = "127.0.0.1:0";
  auto s = Server::create(o, cluster, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::thread t([&] { (void)(*s)->run(); });
  httplib::Client cli("127.0.0.1", (*s)->port());
  httplib::Client kube_scheduler("127.0.0.1", (*s)->extender_port());
  // A 16-NPU job as TP 4 x DP 4 over two pods of 8: four TP groups of four chips.
  json pod = testing::job_pod("train", 0, 8, "tp=4,dp=4");
  auto f = kube_scheduler.Post("/filter",
                               json({{"Pod", pod}, {"NodeNames", {"node-0", "node-1", "node-2"}}}).dump(),
                               "application/json");
  ASSERT_TRUE(f && f->status == 200);
  json inv = {{"chips", json::array()}};
  for (int p = 0; p < 8; ++p) inv["chips"].push_back({{"phy_id", p}, {"healthy", p != 1}});
  // Telemetry of two chips (issue 26): chip 3 busy (AICore 63 %, HBM 16 of 32 GiB), chip 5 idle.
  inv["chips"][3].update({{"aicore_pct", 63}, {"hbm_used_mb", 16384}, {"hbm_total_mb", 32768}});
  inv["chips"][5].update({{"aicore_pct", 0}, {"hbm_used_mb", 0}, {"hbm_total_mb", 32768}});
  ASSERT_EQ(cli.Put("/v1/nodes/node-2", inv.dump(), "application/json")->status, 200);

  std::string artifacts = std::string(ASCEND_BIN_DIR) + "/../tests/artifacts";
  std::filesystem::create_directories(artifacts);
  std::string profile = artifacts + "/chromium-profile";
  // The page on the plugin listener from loopback, no token file: served (docs/scheduler.md's "loopback peers
  // need no token when no token file is set").
  std::string url = "http://127.0.0.1:" + std::to_string((*s)->port()) + "/";
  auto dom = ascend::testing::run_command(chromium(profile, {"--dump-dom", url}));
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  const std::string& html = dom.out;
  EXPECT_NE(html.find("data-ready=\"1\""), std::string::npos) << "the page's script ran and rendered";
  EXPECT_EQ(count(html, R"(class="tp-group" data-job="default/train")"), 4) << html;
  EXPECT_EQ(count(html, R"(class="chip reserved"[^>]*data-job="default/train")"), 16);
  EXPECT_EQ(count(html, R"(class="chip [a-z]+ unhealthy" data-phy="1")"), 1);
  // The job is placed, no pod bound yet: Pending.
  EXPECT_EQ(count(html, R"(<tr class="job Pending" data-job="default/train">)"), 1);
  EXPECT_EQ(count(html, R"(class="leaf" data-leaf="leaf-[01]")"), 2);
  // The chips' telemetry: only where the plugin sent it; a bar of 63 % and a memory line of 50 %.
  EXPECT_EQ(count(html, R"(data-util=")"), 2);
  EXPECT_EQ(count(html, R"(data-phy="3" data-state="free" data-util="63" data-hbm="50")"), 1) << html;
  EXPECT_EQ(count(html, R"(data-phy="5" data-state="free" data-util="0" data-hbm="0")"), 1);
  EXPECT_EQ(count(html, R"(<div class="util" style="height: 63%;">)"), 1);
  EXPECT_EQ(count(html, R"(<div class="hbm" style="width: 50%;">)"), 1);
  EXPECT_NE(html.find("AICore 63%, HBM 16.0 / 32.0 GiB"), std::string::npos);
  EXPECT_NE(html.find("3 nodes, 7 chips free, 16 used, 1 unhealthy (0 isolated); 1 jobs, 0 recovering"),
            std::string::npos);

  std::string png = artifacts + "/dashboard.png";
  std::filesystem::remove(png);
  auto shot =
      ascend::testing::run_command(chromium(profile, {"--screenshot=" + png, "--window-size=1200,700", url}));
  EXPECT_EQ(shot.exit_code, 0) << shot.err;
  EXPECT_GT(std::filesystem::exists(png) ? std::filesystem::file_size(png) : 0U, 5000U)
      << "a screenshot with content";
  (*s)->stop();
  t.join();
  std::filesystem::remove_all(profile);
}

}  // namespace
}  // namespace ascend::scheduler
