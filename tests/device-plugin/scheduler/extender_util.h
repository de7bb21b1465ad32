// Helpers for the extender's tests: clusters built in code and Pod objects as kube-scheduler sends them.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/topology/cluster.h"

namespace ascend::scheduler::testing {

struct NodeLine {
  std::string name, profile, leaf;
  std::vector<int> busy, unhealthy;
};

inline topology::Cluster make_cluster(const std::vector<NodeLine>& lines) {
  std::vector<topology::NodeSpec> specs;
  for (const auto& l : lines) {
    topology::NodeSpec n;
    n.name = l.name;
    n.profile = l.profile;
    n.leaf = l.leaf;
    n.busy = l.busy;
    n.unhealthy = l.unhealthy;
    specs.push_back(n);
  }
  auto c = topology::make_cluster("test", {}, specs, topology::builtin_profiles());
  EXPECT_TRUE(c.ok()) << c.error().message();
  return std::move(c).value();
}

// `n` Atlas 800T A2 nodes node-0.. , six to a leaf.
inline topology::Cluster small_cluster(int n) {
  std::vector<NodeLine> lines;
  for (int i = 0; i < n; ++i)
    lines.push_back({"node-" + std::to_string(i), "atlas800t-a2", "leaf-" + std::to_string(i / 6), {}, {}});
  return make_cluster(lines);
}

// A UID of the API server's form (an RFC 4122 UUID, 36 characters), fixed for a name.
inline std::string uid_of(const std::string& name) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%012llx",
                static_cast<unsigned long long>(std::hash<std::string>()(name) & 0xffffffffffffULL));
  return std::string("00000000-0000-4000-8000-") + buf;
}

inline nlohmann::json plain_pod(const std::string& name, int chips,
                                const std::string& resource = "huawei.com/Ascend910",
                                const std::string& ns = "default") {
  nlohmann::json limits = nlohmann::json::object();
  if (chips > 0) limits[resource] = std::to_string(chips);
  return {
      {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid_of(name)}}},
      {"spec",
       {{"containers", nlohmann::json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}}};
}

// Pod `index` ("<job>-<index>") of a job; `pods` defaults to tp*pp*dp / chips.
inline nlohmann::json job_pod(const std::string& job, int index, int chips, const std::string& parallel,
                              int pods = -1, const std::string& ns = "default") {
  if (pods < 0) {
    int product = 1;
    for (std::size_t pos = 0; (pos = parallel.find('=', pos)) != std::string::npos; ++pos) {
      product *= std::stoi(parallel.substr(pos + 1));
    }
    pods = product / chips;
  }
  nlohmann::json p = plain_pod(job + "-" + std::to_string(index), chips, "huawei.com/Ascend910", ns);
  p["metadata"]["annotations"] = {{"ascend.huawei.com/job", job},
                                  {"ascend.huawei.com/job-pods", std::to_string(pods)},
                                  {"ascend.huawei.com/parallel", parallel}};
  return p;
}

// A new folder under $TMPDIR (else /tmp) named after `tag`, for a test's files.
inline std::string temp_dir(const std::string& tag) {
  std::string base = (std::getenv("TMPDIR") != nullptr ? std::string(std::getenv("TMPDIR")) : "/tmp");
  std::string tmpl = base + "/sched-" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  EXPECT_NE(mkdtemp(buf.data()), nullptr);
  return buf.data();
}

inline void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace ascend::scheduler::testing
