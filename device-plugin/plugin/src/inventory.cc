#include "ascend/plugin/inventory.h"

#include <algorithm>
#include <cctype>

namespace ascend::plugin {

std::string name_ids(std::string_view what, const std::vector<std::string>& ids) {
  constexpr std::size_t kNamed = 8;
  constexpr std::size_t kIdBytes = 64;
  std::string out = ids.size() > kNamed ? std::to_string(ids.size()) + " " : "";
  out += what;
  for (std::size_t i = 0; i < ids.size() && i < kNamed; ++i) {
    out += i == 0 ? " " : ", ";
    const std::string& id = ids[i];
    for (std::size_t k = 0; k < id.size() && k < kIdBytes; ++k) {
      const auto c = static_cast<unsigned char>(id[k]);
      out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
    }
    if (id.size() > kIdBytes) out += "...";
  }
  if (ids.size() > kNamed) out += " and " + std::to_string(ids.size() - kNamed) + " more";
  return out;
}

bool is_healthy(npu::Health h) {
  return h == npu::Health::kOk || h == npu::Health::kWarning;
}

std::string ResourceSpec::short_name() const {
  auto slash = name.find('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string ResourceSpec::socket_name() const {
  return "ascend-" + short_name() + ".sock";
}

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string strip_zeros(std::string_view digits) {
  auto nz = digits.find_first_not_of('0');
  return nz == std::string_view::npos ? "0" : std::string(digits.substr(nz));
}

}  // namespace

Result<std::string> vnpu_resource_suffix(std::string_view template_name) {
  if (template_name.rfind("vir", 0) != 0) {
    return Error::invalid("vNPU template '" + std::string(template_name) + "' does not start with 'vir'");
  }
  std::vector<std::string_view> parts;
  std::string_view rest = template_name.substr(3);
  while (true) {
    auto us = rest.find('_');
    parts.push_back(rest.substr(0, us));
    if (us == std::string_view::npos) break;
    rest = rest.substr(us + 1);
  }
  if (!all_digits(parts[0])) {
    return Error::invalid("vNPU template '" + std::string(template_name) +
                          "' does not start with 'vir<AICores>'");
  }
  std::string out = strip_zeros(parts[0]) + "c";
  for (std::size_t i = 1; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    if (p.empty())
      return Error::invalid("vNPU template '" + std::string(template_name) + "' has an empty part");
    if (p.size() >= 2 && p.back() == 'c' && all_digits(p.substr(0, p.size() - 1))) {
      out += "." + strip_zeros(p.substr(0, p.size() - 1)) + "cpu";
    } else {
      out += "." + std::string(p);
    }
  }
  return out;
}

Result<std::vector<ResourceSpec>> plan_resources(const npu::DeviceSnapshot& host, const Config& cfg) {
  std::string chip_resource = cfg.resource_name.empty() ? host.resource_name : cfg.resource_name;
  if (chip_resource.empty() || chip_resource.find('/') == std::string::npos) {
    return Error::invalid("the host (" + std::string(npu::to_string(host.family)) + ", " + host.backend +
                          " backend) names no resource; pass --resource-name");
  }
  std::vector<ResourceSpec> out;
  out.push_back({chip_resource, DeviceKind::kChip, ""});
  if (cfg.vnpu == VnpuMode::kStatic) {
    for (const auto& t : host.templates) {
      ASCEND_ASSIGN(std::string suffix, vnpu_resource_suffix(t.name), "vNPU resources");
      std::string name = chip_resource;
      name.append("-").append(suffix);
      out.push_back({std::move(name), DeviceKind::kVnpu, t.name});
    }
  } else if (cfg.vnpu == VnpuMode::kDynamic) {
    out.push_back({kCoreResource, DeviceKind::kCore, ""});
  }
  return out;
}

std::vector<DeviceEntry> device_table(const npu::DeviceSnapshot& host, const ResourceSpec& res,
                                      const Ledger& ledger) {
  std::vector<DeviceEntry> out;
  const std::string short_name = res.short_name();
  for (const auto& c : host.chips) {
    const npu::Health health = c.health();
    switch (res.kind) {
      case DeviceKind::kChip: {
        DeviceEntry e{short_name + "-" + std::to_string(c.phy_id),
                      DeviceKind::kChip,
                      c.phy_id,
                      -1,
                      -1,
                      c.numa_node,
                      health,
                      ""};
        if (host.holds_vnpus(c.phy_id)) {
          e.withheld = "holds vNPUs";
        } else if (ledger.has_promises(c.phy_id)) {
          e.withheld = "its AICores are promised to vNPUs";
        }
        out.push_back(std::move(e));
        break;
      }
      case DeviceKind::kVnpu:
        for (const auto& v : host.vnpus) {
          if (v.phy_id != c.phy_id || v.template_name != res.template_name) continue;
          out.push_back({short_name + "-" + std::to_string(v.id) + "-" + std::to_string(c.phy_id),
                         DeviceKind::kVnpu, c.phy_id, v.id, -1, c.numa_node, health, ""});
        }
        break;
      case DeviceKind::kCore: {
        const int cap = host.vnpu_capacity.aicore;
        // The kubelet must never see more free tokens on a chip than the chip has free AICores: withhold
        // the cores that vNPU templates took beyond the tokens the kubelet already holds.
        int withhold = std::max(0, ledger.cores_used(host, c.phy_id) - ledger.held_on(c.phy_id));
        std::vector<DeviceEntry> tokens;
        tokens.reserve(static_cast<std::size_t>(std::max(cap, 0)));
        for (int k = 0; k < cap; ++k) {
          tokens.push_back(
              {Ledger::token_id(c.phy_id, k), DeviceKind::kCore, c.phy_id, -1, k, c.numa_node, health, ""});
        }
        for (int k = cap - 1; k >= 0; --k) {
          auto& t = tokens[static_cast<std::size_t>(k)];
          if (ledger.whole(c.phy_id)) {
            t.withheld = "the chip is handed out whole";
          } else if (withhold > 0 && !ledger.held(t.id)) {
            t.withheld = "taken by a vNPU template";
            --withhold;
          }
        }
        for (auto& t : tokens) out.push_back(std::move(t));
        break;
      }
    }
  }
  return out;
}

}  // namespace ascend::plugin
