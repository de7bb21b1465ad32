// Churn (issue 12, "many users apply and release repeatedly"): 10 000 vNPU create/destroy cycles from 8
// concurrent processes on one emulated Atlas 800 9000 host, while this process polls the state file and
// judges every version it reads: it parses, its generation never goes back, and no chip is ever
// over-committed (AICore, memory, AICPU against the capacity table below, written here from Huawei's template
// table and not taken from the emulator). Afterwards: no vNPU left, no /dev/vdavinci* node or /dev/char link
// left, no temporary state file left, the state valid, and exactly two committed changes per cycle (none
// lost).
//
// The mix: 10 000 cycles in all, 9 680 by npu-smi and 320 by container starts (kCycles, kContainerCycles);
// each of the 8 workers does an eighth of both kinds, interleaved at random.
//  - npu-smi cycles: `npu-smi set -t create-vnpu -i C -c 0 -f T -v ID` then, later, `destroy-vnpu`; a worker
//    holds up to 3 vNPUs at a time, on chips 0-3 (all 8 workers share those 4 chips, so creates are refused
//    for capacity all the time: about 3 000 refusals a run); each worker has its own two vNPU ids per chip,
//    so a refusal is never a race on an id between npu-smi workers (a container's vNPU may take one).
//  - container cycles: a dynamic vNPU through the shim, `ascend-docker-runtime run` of /bin/true with real
//    runc (ASCEND_VISIBLE_DEVICES=C, ASCEND_VNPU_SPECS=T): the shim creates the vNPU (lowest free id, tagged
//    with the container), the poststop hook destroys it. A start refused for capacity is tried again later
//    and not counted. Container starts are the slow kind (runc), so they are a share that keeps the test
//    within about 3 minutes, not half: 155 s on the shared 2-core reference VM, 220-280 s with builds
//    beside it (docs/development.md, "Churn, kills and a hostile kubelet").
// The emulated host sits on a tmpfs of its own (SetUp says why). Root only (runc, device nodes, the mount).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "splitmix.h"
#include "support.h"

namespace ascend::hook {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the test support helpers
using Clock = std::chrono::steady_clock;

constexpr int kWorkers = 8;
constexpr int kCycles = 10000;         // in total, both kinds
constexpr int kContainerCycles = 320;  // of which dynamic-vNPU container starts (40 per worker)
constexpr int kChips = 4;              // the chips every worker uses (0-3 of 8)
constexpr int kHeldMax = 3;            // npu-smi vNPUs a worker holds at most at once

// The Ascend 910 (A1, 32 AICore, 32 GB HBM) vNPU templates and one chip's capacity for them, as Huawei's
// "virtual instance" template table gives them (npu-smi info -t template-info / -t info-vnpu on such a
// host): AICore, memory (MB), AICPU.
struct Template {
  const char* name;
  int aicore;
  int memory_mb;
  int aicpu;
};
constexpr std::array<Template, 4> kTemplates = {
    {{"vir02", 2, 2048, 1}, {"vir04", 4, 4096, 1}, {"vir08", 8, 8192, 3}, {"vir16", 16, 16384, 7}}};
constexpr int kCapAicore = 32;
constexpr int kCapMemoryMb = 32 * 1024;
constexpr int kCapAicpu = 14;

const Template* find_template(const std::string& name) {
  for (const auto& t : kTemplates) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

bool present(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// What the reader found in one version of the state file: "" when it is fine.
struct Use {
  int aicore = 0;
  int memory_mb = 0;
  int aicpu = 0;
};
std::string judge(const nlohmann::json& s, std::map<int, Use>* use) {
  if (!s.is_object() || !s.contains("vnpus") || !s["vnpus"].is_array()) return "no vnpus list";
  std::set<int> ids;
  use->clear();
  for (const auto& v : s["vnpus"]) {
    const int id = v.at("id").get<int>();
    const int phy = v.at("phy_id").get<int>();
    const std::string tmpl = v.at("template").get<std::string>();
    if (!ids.insert(id).second) return "vNPU id " + std::to_string(id) + " twice";
    if (id < 100 + 16 * phy || id > 115 + 16 * phy)
      return "vNPU " + std::to_string(id) + " outside chip " + std::to_string(phy) + "'s id range";
    const Template* t = find_template(tmpl);
    if (t == nullptr) return "vNPU " + std::to_string(id) + " of unknown template " + tmpl;
    Use& u = (*use)[phy];
    u.aicore += t->aicore;
    u.memory_mb += t->memory_mb;
    u.aicpu += t->aicpu;
  }
  for (const auto& [phy, u] : *use) {
    if (u.aicore > kCapAicore || u.memory_mb > kCapMemoryMb || u.aicpu > kCapAicpu) {
      return "chip " + std::to_string(phy) + " over-committed: " + std::to_string(u.aicore) + " AICore, " +
             std::to_string(u.memory_mb) + " MB, " + std::to_string(u.aicpu) + " AICPU";
    }
  }
  return "";
}

// One worker's tally, written to its result file as "smi ctr refused_capacity refused_id" or "error ...".
struct Tally {
  int smi = 0;
  int ctr = 0;
  int refused_capacity = 0;
  int refused_id = 0;  // an npu-smi id a container's vNPU had taken (the shim takes the lowest free id)
};

class Churn : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (runc, device nodes)";
    if (!have_program("runc")) FAIL() << "runc is not installed (scripts/deps installs it)";
    if (::access("/bin/busybox", X_OK) != 0) FAIL() << "busybox-static is not installed (scripts/deps)";
    // The emulated host on a tmpfs of its own: every committed change fsyncs the state file and its folder,
    // about 15 ms on the reference VM's disk, and the 20 000 commits would take 5 minutes of lock-holding
    // alone. What this test is about (lost updates, over-commit, leaks) does not depend on the disk.
    // Its size leaves room for the tools the emulator copies in (npu-smi, libdcmi.so, ascend-dcmi-query: over
    // 70 MB with the debug information of a RelWithDebInfo build); a tmpfs takes memory only as it fills.
    std::filesystem::create_directories(tmp_ / "host");
    ASSERT_EQ(::mount("tmpfs", (tmp_ / "host").c_str(), "tmpfs", 0, "mode=0755,size=512m"), 0)
        << std::strerror(errno);
    host_ = std::make_unique<EmulatedHost>(tmp_ / "host", "atlas800-9000");
    ASSERT_TRUE(host_->ok()) << host_->error();
    config_ = write_hook_config(tmp_.path(), tmp_ / "host");
    Bundle model(tmp_ / "model");  // one read-only rootfs for every container
    spec_ = model.spec();
    spec_["root"]["path"] = model.rootfs();
    spec_["root"]["readonly"] = true;
    spec_["process"]["args"] = {"/bin/true"};
    state_path_ = tmp_ / "host/usr/local/Ascend/driver/lib64/npu-sim/state.json";
  }

  void TearDown() override {
    // Whatever a failed run left: containers of the private runc root.
    auto list = run({"runc", "--root", tmp_ / "runc-state", "list", "-q"});
    std::istringstream in(list.out);
    for (std::string id; std::getline(in, id);) {
      if (!id.empty()) run({"runc", "--root", tmp_ / "runc-state", "delete", "--force", id});
    }
  }

  nlohmann::json read_state() const { return nlohmann::json::parse(slurp(state_path_)); }

  // One worker process's loop; returns what it did, or an error line.
  std::string worker(int w, int smi_quota, int ctr_quota, Tally* t) {
    ascend::testing::SplitMix64 rng{static_cast<std::uint64_t>(1000 + w)};
    struct Held {
      int chip;
      int id;
    };
    std::vector<Held> held;
    auto own_ids = [&](int chip) {
      const int base = 100 + 16 * chip + 2 * w;
      return std::array<int, 2>{base, base + 1};
    };
    auto is_held = [&](int id) {
      return std::any_of(held.begin(), held.end(), [&](const Held& h) { return h.id == id; });
    };
    const std::string smi = bin("npu-smi");
    int started = 0;  // npu-smi cycles begun (a create that succeeded)
    int starts = 0;   // container starts, refused ones included
    int ctr_left = ctr_quota;
    while (t->smi < smi_quota || !held.empty() || ctr_left > 0) {
      // A container start in proportion to what is left of each kind.
      const int smi_left = smi_quota - started;
      if (ctr_left > 0 &&
          static_cast<int>(rng.next() % static_cast<std::uint64_t>(smi_left + ctr_left)) < ctr_left) {
        bool done = false;
        if (auto e = container(w, starts++, rng, t, &done); !e.empty()) return e;
        if (done) --ctr_left;  // a start refused for capacity is tried again later
        continue;
      }
      const bool create = started < smi_quota && held.size() < kHeldMax && (held.empty() || rng.next() % 2);
      if (!create && held.empty()) continue;  // only containers left
      if (create) {
        const int chip = static_cast<int>(rng.next() % kChips);
        const auto ids = own_ids(chip);
        const int id = is_held(ids[0]) ? ids[1] : ids[0];
        if (is_held(id)) continue;
        const Template& tm = kTemplates[rng.next() % kTemplates.size()];
        auto o = run({smi, "set", "-t", "create-vnpu", "-i", std::to_string(chip), "-c", "0", "-f", tm.name,
                      "-v", std::to_string(id)});
        if (o.exit_code == 0) {
          held.push_back({chip, id});
          ++started;
        } else if (o.exit_code == 217) {
          ++t->refused_capacity;
        } else if (o.exit_code == 215 && o.err.find("already exists") != std::string::npos) {
          ++t->refused_id;
        } else {
          return "npu-smi create-vnpu " + std::to_string(id) + " " + tm.name + ": exit " +
                 std::to_string(o.exit_code) + ": " + o.out + o.err;
        }
      } else {
        const std::size_t k = rng.next() % held.size();
        const Held h = held[k];
        auto o = run({smi, "set", "-t", "destroy-vnpu", "-i", std::to_string(h.chip), "-c", "0", "-v",
                      std::to_string(h.id)});
        if (o.exit_code != 0) {
          return "npu-smi destroy-vnpu " + std::to_string(h.id) + ": exit " + std::to_string(o.exit_code) +
                 ": " + o.out + o.err;
        }
        held.erase(held.begin() + static_cast<long>(k));
        ++t->smi;
      }
    }
    return "";
  }

  // One dynamic-vNPU container start through the shim with real runc, run to its end and deleted.
  std::string container(int w, int n, ascend::testing::SplitMix64& rng, Tally* t, bool* done) {
    const int chip = static_cast<int>(rng.next() % kChips);
    const Template& tm = kTemplates[rng.next() % kTemplates.size()];
    const std::string id = "churn-" + std::to_string(w) + "-" + std::to_string(n);
    const std::string dir = tmp_ / ("b-" + id);
    std::filesystem::create_directories(dir);
    nlohmann::json spec = spec_;
    spec["process"]["env"].push_back("ASCEND_VISIBLE_DEVICES=" + std::to_string(chip));
    spec["process"]["env"].push_back(std::string("ASCEND_VNPU_SPECS=") + tm.name);
    spit(dir + "/config.json", spec.dump());
    auto o = run({bin("ascend-docker-runtime"), "--config", config_, "--root", tmp_ / "runc-state", "run",
                  "--bundle", dir, id});
    run({"runc", "--root", tmp_ / "runc-state", "delete", "--force", id});
    std::filesystem::remove_all(dir);
    if (o.exit_code != 0) {
      if (o.exit_code == 1 && (o.err.find("not enough free") != std::string::npos ||
                               o.err.find("no free vNPU id") != std::string::npos)) {
        ++t->refused_capacity;
        return "";
      }
      return "container " + id + " (" + tm.name + " on chip " + std::to_string(chip) + "): exit " +
             std::to_string(o.exit_code) + ": " + o.err;
    }
    for (const auto& v : read_state()["vnpus"]) {
      if (v.value("container_id", "") == id)
        return "container " + id + " ended and its vNPU " + std::to_string(v["id"].get<int>()) + " is left";
    }
    ++t->ctr;
    *done = true;
    return "";
  }

  TempDir tmp_{"churn"};
  std::unique_ptr<EmulatedHost> host_;
  std::string config_;
  nlohmann::json spec_;
  std::string state_path_;
};

TEST_F(Churn, TenThousandCyclesFromEightProcessesNeverOverCommitAndLeaveNothing) {
  // The profile's table must be the one this test judges by (a drift would make the judge meaningless).
  nlohmann::json s0 = read_state();
  ASSERT_EQ(s0["vnpu_capacity"]["aicore"], kCapAicore);
  ASSERT_EQ(s0["vnpu_capacity"]["memory_gb"].get<int>() * 1024, kCapMemoryMb);
  ASSERT_EQ(s0["vnpu_capacity"]["aicpu"], kCapAicpu);
  ASSERT_EQ(s0["templates"].size(), kTemplates.size());
  for (const auto& t : s0["templates"]) {
    const Template* mine = find_template(t["name"].get<std::string>());
    ASSERT_NE(mine, nullptr) << t.dump();
    EXPECT_EQ(t["aicore"], mine->aicore) << mine->name;
    EXPECT_EQ(t["memory_mb"], mine->memory_mb) << mine->name;
    EXPECT_EQ(t["aicpu"].get<double>(), mine->aicpu) << mine->name;
  }
  const std::uint64_t g0 = s0["generation"].get<std::uint64_t>();
  ::setenv("ASCEND_SIM_ROOT", (tmp_ / "host").c_str(), 1);  // for npu-smi, inherited by the workers

  static_assert(kCycles % kWorkers == 0 && kContainerCycles % kWorkers == 0);
  const int ctr_quota = kContainerCycles / kWorkers;
  const int smi_quota = (kCycles - kContainerCycles) / kWorkers;
  const auto t0 = Clock::now();
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Tally t;
      std::string e;
      try {
        e = worker(w, smi_quota, ctr_quota, &t);
      } catch (const std::exception& x) {
        e = std::string("exception: ") + x.what();
      }
      std::ofstream out(tmp_ / ("worker-" + std::to_string(w)));
      if (e.empty()) {
        out << t.smi << " " << t.ctr << " " << t.refused_capacity << " " << t.refused_id << "\n";
      } else {
        out << "error " << e << "\n";
      }
      out.close();
      ::_exit(e.empty() ? 0 : 1);
    }
    pids.push_back(pid);
  }

  // The reader: every version of the state file it can catch while the workers run.
  std::set<pid_t> running(pids.begin(), pids.end());
  std::map<pid_t, int> status;
  std::uint64_t last_gen = g0;
  int polls = 0;
  std::set<std::uint64_t> generations;
  std::map<int, Use> peak;
  std::vector<std::string> problems;
  const auto deadline = t0 + std::chrono::minutes(12);
  while (!running.empty()) {
    for (auto it = running.begin(); it != running.end();) {
      int st = 0;
      if (::waitpid(*it, &st, WNOHANG) == *it) {
        status[*it] = st;
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    if (Clock::now() > deadline) {
      for (pid_t p : running) ::kill(p, SIGKILL);
      problems.push_back("the workers did not finish within 12 minutes");
      for (pid_t p : running) ::waitpid(p, nullptr, 0);
      break;
    }
    const std::string text = slurp(state_path_);
    ++polls;
    nlohmann::json s = nlohmann::json::parse(text, nullptr, false);
    if (s.is_discarded()) {
      if (problems.size() < 10) problems.push_back("the state file did not parse: " + text.substr(0, 200));
      continue;
    }
    std::map<int, Use> use;
    std::string bad;
    try {
      bad = judge(s, &use);
    } catch (const std::exception& x) {
      bad = std::string("malformed vNPU entry: ") + x.what();
    }
    const std::uint64_t gen = s.value("generation", std::uint64_t{0});
    if (gen < last_gen) bad += " generation went back from " + std::to_string(last_gen);
    last_gen = gen;
    generations.insert(gen);
    if (!bad.empty() && problems.size() < 10)
      problems.push_back("generation " + std::to_string(gen) + ": " + bad);
    for (const auto& [phy, u] : use) {
      Use& p = peak[phy];
      p.aicore = std::max(p.aicore, u.aicore);
      p.memory_mb = std::max(p.memory_mb, u.memory_mb);
      p.aicpu = std::max(p.aicpu, u.aicpu);
    }
    ::usleep(2000);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& p : problems) ADD_FAILURE() << p;

  Tally sum;
  for (int w = 0; w < kWorkers; ++w) {
    std::string line = slurp(tmp_ / ("worker-" + std::to_string(w)));
    EXPECT_TRUE(WIFEXITED(status[pids[w]]) && WEXITSTATUS(status[pids[w]]) == 0)
        << "worker " << w << ": " << line;
    std::istringstream in(line);
    Tally t;
    if (in >> t.smi >> t.ctr >> t.refused_capacity >> t.refused_id) {
      EXPECT_EQ(t.smi, smi_quota) << w;
      EXPECT_EQ(t.ctr, ctr_quota) << w;
      sum.smi += t.smi;
      sum.ctr += t.ctr;
      sum.refused_capacity += t.refused_capacity;
      sum.refused_id += t.refused_id;
    }
  }
  std::printf(
      "churn: %d npu-smi + %d container cycles from %d processes in %.1f s; %d creates (npu-smi "
      "and container starts) refused for capacity, %d for an id a container held; the reader judged "
      "%d versions (%zu distinct generations of %llu)\n",
      sum.smi, sum.ctr, kWorkers, secs, sum.refused_capacity, sum.refused_id, polls, generations.size(),
      static_cast<unsigned long long>(last_gen - g0));
  for (const auto& [phy, u] : peak)
    std::printf("  chip %d peak: %d/%d AICore, %d/%d MB, %d/%d AICPU\n", phy, u.aicore, kCapAicore,
                u.memory_mb, kCapMemoryMb, u.aicpu, kCapAicpu);
  EXPECT_EQ(sum.smi + sum.ctr, kCycles);

  // Afterwards: nothing left, the state valid, and every cycle committed exactly two changes.
  nlohmann::json end = read_state();
  EXPECT_TRUE(end["vnpus"].empty()) << end["vnpus"].dump();
  EXPECT_EQ(end["generation"].get<std::uint64_t>() - g0, 2ULL * static_cast<unsigned>(sum.smi + sum.ctr))
      << "a lost or an extra state change";
  const int vmajor = end["majors"]["vdavinci"].get<int>();
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(tmp_ / "host/dev")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vdavinci", 0) == 0) left.push_back(name);
  }
  if (present(tmp_ / "host/dev/char")) {
    for (const auto& e : std::filesystem::directory_iterator(tmp_ / "host/dev/char")) {
      const std::string name = e.path().filename().string();
      if (name.rfind(std::to_string(vmajor) + ":", 0) == 0) left.push_back("char/" + name);
    }
  }
  for (const auto& e :
       std::filesystem::directory_iterator(tmp_ / "host/usr/local/Ascend/driver/lib64/npu-sim")) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos) left.push_back(name);
  }
  EXPECT_TRUE(left.empty()) << "left behind: " << ::testing::PrintToString(left);
  auto st = run({bin("npu-sim"), "status", "--root", tmp_ / "host"});
  EXPECT_EQ(st.exit_code, 0) << st.err;
  auto info = run({bin("npu-smi"), "info"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(smi_ids(info.out), (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7})) << info.out;
}

}  // namespace
}  // namespace ascend::hook
