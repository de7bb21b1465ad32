#include "ascend/scheduler/input.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "ascend/common/fs.h"
#include "ascend/common/yaml_json.h"
#include "ascend/npu/host_model.h"

namespace ascend::scheduler {

using nlohmann::json;
using topology::FieldPath;

namespace {

struct YamlDoc {
  YAML::Node root;
  json value;
};

Result<YamlDoc> read_yaml(const std::string& path) {
  auto text_or = read_file(path, 64U << 20);
  if (!text_or.ok()) return text_or.error();  // "<path>: <why>" already
  const std::string& text = *text_or;
  try {
    YAML::Node root = YAML::Load(text);
    json value = ascend::yaml_to_json(root);
    return YamlDoc{root, std::move(value)};
  } catch (const YAML::Exception& e) {
    return Error::invalid(path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

// The line of the deepest node of `path` that exists in the document.
topology::LineLocator locator(const YAML::Node& root) {
  return [root](const FieldPath& path) -> int {
    try {
      YAML::Node cur;
      cur.reset(root);
      int line = cur.IsDefined() && !cur.IsNull() ? cur.Mark().line + 1 : 0;
      for (const auto& part : path.parts) {
        const YAML::Node& c = cur;
        YAML::Node next;  // a missing key gives an invalid node: test it before rebinding anything to it
        if (const auto* key = std::get_if<std::string>(&part)) {
          if (!c.IsMap()) break;
          YAML::Node v = c[*key];
          if (!v.IsDefined()) break;
          next.reset(v);
        } else {
          int i = std::get<int>(part);
          if (!c.IsSequence() || i < 0 || static_cast<std::size_t>(i) >= c.size()) break;
          next.reset(c[static_cast<std::size_t>(i)]);
        }
        cur.reset(next);
        if (cur.Mark().line >= 0) line = cur.Mark().line + 1;
      }
      return line;
    } catch (const YAML::Exception&) {
      return 0;
    }
  };
}

}  // namespace

Result<topology::Cluster> load_cluster(const std::string& path) {
  auto doc_or = read_yaml(path);
  if (!doc_or.ok()) return doc_or.error();
  const YamlDoc& doc = *doc_or;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  topology::ProfileSource profiles = [dir](const std::string& name) -> Result<npu::HostModel> {
    if (!names_yaml_file(name)) return npu::builtin_host_model(name);
    std::filesystem::path p(name);
    if (p.is_relative()) p = dir / p;
    return npu::load_host_model(p.string());
  };
  auto c = topology::cluster_from_json(doc.value, profiles, locator(doc.root));
  if (!c.ok()) return c.error().context(path);
  return c;
}

Result<topology::Job> load_job(const std::string& path) {
  auto doc_or = read_yaml(path);
  if (!doc_or.ok()) return doc_or.error();
  const YamlDoc& doc = *doc_or;
  auto j = topology::job_from_json(doc.value, locator(doc.root));
  if (!j.ok()) return j.error().context(path);
  return j;
}

Result<std::vector<topology::TraceJob>> load_trace(const std::string& path) {
  auto doc_or = read_yaml(path);
  if (!doc_or.ok()) return doc_or.error();
  const YamlDoc& doc = *doc_or;
  auto t = topology::trace_from_json(doc.value, locator(doc.root));
  if (!t.ok()) return t.error().context(path);
  return t;
}

Result<topology::ChipSpec> load_chip(const std::string& path) {
  auto doc_or = read_yaml(path);
  if (!doc_or.ok()) return doc_or.error();
  const YamlDoc& doc = *doc_or;
  auto c = topology::chip_from_json(doc.value, locator(doc.root));
  if (!c.ok()) return c.error().context(path);
  return c;
}

}  // namespace ascend::scheduler
