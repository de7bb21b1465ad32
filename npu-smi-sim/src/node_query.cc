#include "ascend/npu/node_query.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>

#include "ascend/common/process.h"

namespace ascend::npu {
namespace {

// The number after `prefix` when `name` is prefix + digits only.
std::optional<int> numbered(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix ||
      name.size() > prefix.size() + 6) {
    return std::nullopt;
  }
  int v = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<DeviceNode> char_node(const std::string& full, std::string path) {
  struct stat st {};
  // lstat: a link named like a node is not one (the runtime refuses to pass a link on as a device).
  if (::lstat(full.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  return DeviceNode{std::move(path), static_cast<int>(::major(st.st_rdev)),
                    static_cast<int>(::minor(st.st_rdev)), st.st_mode & 07777};
}

class NodeQuery final : public DeviceQuery {
 public:
  explicit NodeQuery(HelperOptions o) : o_(std::move(o)) {}

  Result<DeviceSnapshot> snapshot() const override {
    if (!o_.full) return scan_device_nodes(o_.root);
    ASCEND_ASSIGN(nlohmann::json j, call({"snapshot"}), "");
    return snapshot_from_json(j).context("ascend-dcmi-query snapshot");
  }
  std::string host_path(const std::string& abs_path) const override {
    return o_.root == "/" ? abs_path : o_.root + abs_path;
  }
  Result<Vnpu> create_vnpu(int phy_id, const std::string& template_name, std::optional<int> id,
                           const VnpuOwner& owner) override {
    std::vector<std::string> args = {"create", "--phy", std::to_string(phy_id), "--template", template_name};
    if (id) args.insert(args.end(), {"--id", std::to_string(*id)});
    if (!owner.container_id.empty()) args.insert(args.end(), {"--owner", owner_to_json(owner).dump()});
    ASCEND_ASSIGN(nlohmann::json j, call(args), "");
    return vnpu_from_json(j).context("ascend-dcmi-query create");
  }
  Status destroy_vnpu(int vnpu_id, std::optional<int> phy_id,
                      const std::optional<VnpuOwner>& holder) override {
    std::vector<std::string> args = {"destroy", "--id", std::to_string(vnpu_id)};
    if (phy_id) args.insert(args.end(), {"--phy", std::to_string(*phy_id)});
    if (holder) args.insert(args.end(), {"--holder", owner_to_json(*holder).dump()});
    ASCEND_CHECK(call(args), "");
    return {};
  }
  Result<std::unique_ptr<Subscription>> subscribe(ChangeCallback /*on_change*/) const override {
    return Error(EOPNOTSUPP, "the node scan has no change notification (use the DCMI backend)");
  }

  // Whether the helper loads libdcmi.so: ENOENT with its reason when it does not.
  Status probe() const {
    ASCEND_ASSIGN(nlohmann::json j, call({"probe"}), "");
    if (!j.is_object() || !j.contains("loads") || !j["loads"].is_boolean())
      return Error(EIO, o_.helper + " probe: an answer without \"loads\"");
    if (j["loads"].get<bool>()) return {};
    return Error(ENOENT, j.contains("why") && j["why"].is_string() ? j["why"].get<std::string>()
                                                                   : "libdcmi.so does not load");
  }

 private:
  Result<nlohmann::json> call(const std::vector<std::string>& verb) const {
    const HelperRunner run = o_.run ? o_.run : HelperRunner(run_capture);
    ASCEND_ASSIGN(ProcessOutput r,
                  run(helper_argv(o_, verb), helper_env(), 64U << 20, std::chrono::seconds(30)),
                  "DCMI helper (set dcmi-helper in the config)");
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded()) {
      return Error(EIO, o_.helper + " " + verb[0] + " exited " + std::to_string(r.exit_code) +
                            " without a JSON answer");
    }
    if (j.is_object() && j.contains("error")) {
      const auto& e = j["error"];
      const int code =
          e.is_object() && e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int>() : EIO;
      const std::string msg = e.is_object() && e.contains("message") && e["message"].is_string()
                                  ? e["message"].get<std::string>()
                                  : "an error without a message";
      return Error(code, msg);
    }
    if (r.exit_code != 0)
      return Error(EIO, o_.helper + " " + verb[0] + " exited " + std::to_string(r.exit_code));
    return j;
  }

  HelperOptions o_;
};

}  // namespace

Result<DeviceSnapshot> scan_device_nodes(const std::string& root) {
  const std::string dev = (root == "/" ? std::string() : root) + "/dev";
  DIR* d = ::opendir(dev.c_str());
  if (d == nullptr) return Error::from_errno(errno, "read " + dev);
  std::vector<int> chips;
  std::vector<int> vnpus;
  while (dirent* e = ::readdir(d)) {
    if (auto n = numbered(e->d_name, "davinci")) chips.push_back(*n);
    if (auto n = numbered(e->d_name, "vdavinci")) vnpus.push_back(*n);
  }
  ::closedir(d);
  std::sort(chips.begin(), chips.end());
  std::sort(vnpus.begin(), vnpus.end());
  DeviceSnapshot s;
  s.backend = "dcmi";
  for (int phy : chips) {
    const std::string path = "/dev/davinci" + std::to_string(phy);
    auto n = char_node(dev + path.substr(4), path);
    if (!n) continue;
    Chip c;
    c.phy_id = phy;
    c.logic_id = phy;
    s.chips.push_back(std::move(c));
    s.chip_nodes.push_back(*n);
  }
  if (s.chips.empty()) return Error(ENODEV, "no NPU device node (/dev/davinci<N>) under " + dev);
  for (int id : vnpus) {
    const std::string path = "/dev/vdavinci" + std::to_string(id);
    auto n = char_node(dev + path.substr(4), path);
    if (!n) continue;
    Vnpu v;
    v.id = id;
    v.phy_id = (id - 100) / 16;
    s.vnpus.push_back(std::move(v));
    s.vnpu_nodes.push_back(*n);
  }
  for (const char* name : {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}) {
    if (auto n = char_node(dev + std::string(name).substr(4), name)) s.control.push_back(*n);
  }
  s.links.assign(s.chips.size() * s.chips.size(), Link::kNa);
  s.resource_name.clear();
  s.nodes_checked = true;
  return s;
}

std::vector<std::string> helper_argv(const HelperOptions& o, const std::vector<std::string>& verb) {
  std::vector<std::string> argv = {o.helper, "--root", o.root};
  if (!o.dcmi_library.empty()) argv.insert(argv.end(), {"--library", o.dcmi_library});
  argv.insert(argv.end(), verb.begin(), verb.end());
  return argv;
}

Status admit_helper_verb(std::span<const std::string> verb) {
  enum class Value { kNumber, kName, kJson };
  struct Verb {
    std::string_view name;
    std::vector<std::pair<std::string_view, Value>> options;
  };
  static const Verb kVerbs[] = {
      {"snapshot", {}},
      {"probe", {}},
      {"create",
       {{"--phy", Value::kNumber},
        {"--template", Value::kName},
        {"--id", Value::kNumber},
        {"--owner", Value::kJson}}},
      {"destroy", {{"--id", Value::kNumber}, {"--phy", Value::kNumber}, {"--holder", Value::kJson}}},
  };
  auto refuse = [](const std::string& why) { return Error(EPERM, "DCMI helper arguments: " + why); };
  if (verb.empty()) return refuse("no verb");
  const Verb* v = nullptr;
  for (const auto& k : kVerbs) {
    if (verb[0] == k.name) v = &k;
  }
  if (v == nullptr) return refuse("unknown verb '" + verb[0].substr(0, 32) + "'");
  std::vector<std::string_view> seen;
  for (std::size_t i = 1; i < verb.size(); i += 2) {
    const std::string& opt = verb[i];
    auto it =
        std::find_if(v->options.begin(), v->options.end(), [&](const auto& o) { return o.first == opt; });
    if (it == v->options.end()) return refuse("'" + opt.substr(0, 32) + "' is not an option of " + verb[0]);
    if (std::find(seen.begin(), seen.end(), it->first) != seen.end()) return refuse(opt + " given twice");
    seen.push_back(it->first);
    if (i + 1 >= verb.size()) return refuse(opt + " has no value");
    const std::string& val = verb[i + 1];
    const bool good = [&] {
      switch (it->second) {
        case Value::kNumber:
          return !val.empty() && val.size() <= 9 &&
                 std::all_of(val.begin(), val.end(), [](char c) { return c >= '0' && c <= '9'; });
        case Value::kName:
          return !val.empty() && val.size() <= 64 && std::all_of(val.begin(), val.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
          });
        case Value::kJson:
          return val.size() <= 4096 && val.starts_with('{');
      }
      return false;
    }();
    if (!good) return refuse("a bad value for " + opt);
  }
  return {};
}

std::unique_ptr<DeviceQuery> open_node_query(HelperOptions opts) {
  return std::make_unique<NodeQuery>(std::move(opts));
}

DcmiOpener helper_dcmi_opener(HelperOptions opts) {
  return [opts = std::move(opts)](const BackendOptions& b) -> Result<std::unique_ptr<DeviceQuery>> {
    HelperOptions o = opts;
    o.root = b.root;
    o.dcmi_library = b.dcmi_library;
    if (dcmi_library_guessed(b)) ASCEND_CHECK(NodeQuery(o).probe(), "backend dcmi");
    return open_node_query(std::move(o));
  };
}

std::string helper_error_json(const Error& e) {
  return nlohmann::json{{"error", {{"code", e.code()}, {"message", e.message()}}}}.dump() + "\n";
}

}  // namespace ascend::npu
