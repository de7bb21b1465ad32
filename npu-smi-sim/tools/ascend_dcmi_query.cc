// ascend-dcmi-query: the device seam through the driver's libdcmi.so, as JSON. The runtime's static
// binaries run it for what the device nodes cannot tell (node_query.h); an operator can run it to see what
// every component sees.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ascend/common/main_guard.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/node_query.h"

namespace {

constexpr const char* kFooter = R"(
Output: one JSON document on stdout: the snapshot (the device seam's JSON form), the vNPU made, {} after
  a destroy, or probe's answer. On failure: {"error": {"code": <errno>, "message": "..."}} and exit 1.
Owners: --owner/--holder take the seam's owner JSON ({"container_id": ..., "state_root": ..., "pid": ...}).
  A dynamic vNPU's owner is recorded in <root>/run/ascend/dcmi-vnpu-owners.json (DCMI keeps none).
Exit codes: 0 success, 1 the operation failed, 2 bad usage.)";

int answer(const nlohmann::json& j) {
  std::fputs((j.dump() + "\n").c_str(), stdout);
  return 0;
}

int fail(const ascend::Error& e) {
  std::fputs(ascend::npu::helper_error_json(e).c_str(), stdout);
  std::fprintf(stderr, "ascend-dcmi-query: %s\n", e.message().c_str());
  return 1;
}

ascend::Result<ascend::npu::VnpuOwner> owner_arg(const std::string& text, const char* flag) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return ascend::Error::invalid(std::string(flag) + ": not JSON");
  return ascend::npu::owner_from_json(j).context(flag);
}

}  // namespace

static int run_main(int argc, char** argv) {
  namespace npu = ascend::npu;
  CLI::App app{"ascend-dcmi-query: the NPUs of this host as the driver's DCMI library reports them, as JSON"};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();
  npu::BackendOptions opts;
  opts.backend = npu::Backend::kDcmi;
  std::string backend = "dcmi";
  app.add_option("--root", opts.root, "host root (an emulated host's folder)")->capture_default_str();
  app.add_option("--library", opts.dcmi_library, "libdcmi.so (default: the driver's, under --root)");
  app.add_option("--backend", backend, "dcmi | emulator | auto")->capture_default_str();
  app.add_subcommand("snapshot", "print every chip, link, vNPU, template and device node");
  app.add_subcommand("probe",
                     "whether the DCMI library loads here: {\"loads\": true} or {\"loads\": false, "
                     "\"why\": ...} (not loading is an answer, exit 0)");
  auto* create = app.add_subcommand("create", "create a vNPU");
  int phy = -1;
  std::string tmpl;
  std::optional<int> id;
  std::string owner_json;
  create->add_option("--phy", phy, "physical chip id")->required();
  create->add_option("--template", tmpl, "vNPU template name")->required();
  create->add_option("--id", id, "vNPU id (default: the lowest free one)");
  create->add_option("--owner", owner_json, "owner JSON: a dynamic vNPU, recorded with it");
  auto* destroy = app.add_subcommand("destroy", "destroy a vNPU");
  int vid = -1;
  std::optional<int> dphy;
  std::string holder_json;
  destroy->add_option("--id", vid, "vNPU id")->required();
  destroy->add_option("--phy", dphy, "its chip, which must match");
  destroy->add_option("--holder", holder_json, "only while this owner (JSON) holds it");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto b = npu::parse_backend(backend);
  if (!b) return fail(b.error().context("--backend"));
  opts.backend = *b;
  if (opts.root.empty() || opts.root[0] != '/')
    return fail(ascend::Error::invalid("--root must be absolute"));
  auto dq = npu::open_device_query(opts);
  if (app.got_subcommand("probe")) {
    // The static binaries' `auto` on a root where only the loader may find libdcmi.so (node_query.h): a
    // library that is not there is the answer they ask for, so it prints nothing on stderr.
    if (dq) return answer({{"loads", true}});
    if (dq.error().code() == ENOENT) return answer({{"loads", false}, {"why", dq.error().message()}});
  }
  if (!dq) return fail(dq.error());
  if (app.got_subcommand("snapshot")) {
    auto s = (*dq)->snapshot();
    if (!s) return fail(s.error());
    return answer(npu::snapshot_to_json(*s));
  }
  if (app.got_subcommand("create")) {
    npu::VnpuOwner owner;
    if (!owner_json.empty()) {
      auto o = owner_arg(owner_json, "--owner");
      if (!o) return fail(o.error());
      owner = *o;
    }
    auto v = (*dq)->create_vnpu(phy, tmpl, id, owner);
    if (!v) return fail(v.error());
    return answer(npu::vnpu_to_json(*v));
  }
  std::optional<npu::VnpuOwner> holder;
  if (!holder_json.empty()) {
    auto o = owner_arg(holder_json, "--holder");
    if (!o) return fail(o.error());
    holder = *o;
  }
  auto st = (*dq)->destroy_vnpu(vid, dphy, holder);
  if (!st) return fail(st.error());
  return answer(nlohmann::json::object());
}

int main(int argc, char** argv) {
  return ascend::guarded_main("ascend-dcmi-query", [&] { return run_main(argc, argv); });
}
