#include "host_view.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "ascend/common/fs.h"
#include "ascend/npu/smi.h"
#include "ascend/npu/workload.h"

namespace ascend::npu::dcmi {

int to_dcmi_code(const Error& e) {
  switch (e.code()) {
    case EINVAL:
      return DCMI_ERR_CODE_INVALID_PARAMETER;
    case EPERM:
    case EACCES:
      return DCMI_ERR_CODE_OPER_NOT_PERMITTED;
    case ENOMEM:
      return DCMI_ERR_CODE_MEM_OPERATE_FAIL;
    case ENODEV:
      return DCMI_ERR_CODE_INVALID_DEVICE_ID;
    case ENOENT:
      return DCMI_ERR_CODE_DEVICE_NOT_EXIST;
    case ENOSPC:
    case EEXIST:
    case EBUSY:
      return DCMI_ERR_CODE_RESOURCE_OCCUPIED;
    case ENODATA:
      return DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST;
    case EOPNOTSUPP:
      return DCMI_ERR_CODE_NOT_SUPPORT;
    default:
      return DCMI_ERR_CODE_INNER_ERR;
  }
}

std::string root_of_library(std::string_view library_path) {
  for (std::string_view suffix : {std::string_view("/usr/local/dcmi/libdcmi.so"),
                                  std::string_view("/usr/local/Ascend/driver/lib64/driver/libdcmi.so")}) {
    if (library_path.size() >= suffix.size() &&
        library_path.substr(library_path.size() - suffix.size()) == suffix) {
      std::string root(library_path.substr(0, library_path.size() - suffix.size()));
      return root.empty() ? "/" : root;
    }
  }
  return "/";
}

std::string find_root() {
  const char* env = std::getenv("ASCEND_SIM_ROOT");
  if (env != nullptr && *env != '\0') return env;
  Dl_info info{};
  // Any address inside this library names it; its installed path tells the host root.
  if (::dladdr(reinterpret_cast<void*>(&root_of_library), &info) != 0 && info.dli_fname != nullptr) {
    return root_of_library(info.dli_fname);
  }
  return "/";
}

HostView::HostView(std::string root, HostState state)
    : root_(std::move(root)), state_(std::move(state)), visible_(smi::visible_devices(state_, root_)) {
  view_ = smi::make_view(state_, visible_);
}

namespace {

bool same(const smi::Visible& a, const smi::Visible& b) {
  return a.chips == b.chips && a.vnpus == b.vnpus;
}

// The last view read, per process: a real libdcmi keeps its device handles between calls; this library keeps
// the parsed state while the state file's bytes and the visible device nodes are the same. Comparing the
// bytes (a few kilobytes) costs a read and a memcmp, parsing them most of a call; file times and inode
// numbers are not trusted (a renamed-in file may reuse an inode within one clock tick).
struct Cache {
  std::mutex mu;
  std::string root;
  std::string text;
  smi::Visible visible;
  std::shared_ptr<const HostView> view;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

Result<std::shared_ptr<const HostView>> HostView::read(const std::string& root) {
  Emulator emu(root);
  auto text = read_file(emu.state_path(), 16U << 20);
  if (!text) {
    if (text.error().code() == ENOENT) {
      return Error(EIO,
                   "no emulated host is loaded at " + emu.root() + " (run 'npu-sim load --profile NAME')");
    }
    return Error(EIO, text.error().context("read state").message());
  }
  Cache& c = cache();
  std::shared_ptr<const HostView> v;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    // A workload that ends by itself changes the chips without a change of the file: no sharing then.
    const auto& loads = c.view ? c.view->state().workloads : std::vector<Workload>{};
    const bool timed =
        std::any_of(loads.begin(), loads.end(), [](const Workload& w) { return w.until_ms != 0; });
    if (c.view && c.root == emu.root() && c.text == *text && !timed) {
      smi::Visible now = smi::visible_devices(c.view->state(), c.view->root());
      if (same(now, c.visible)) v = c.view;
    }
  }
  if (!v) {
    auto state = parse_state(*text);
    if (!state) return Error(EIO, state.error().context("state file " + emu.state_path()).message());
    apply_workloads(*state, unix_now_ms());  // the chips as they are now (workload.h)
    // Not make_shared: the constructor is private. The View points into the HostView, so it never moves.
    v.reset(new HostView(emu.root(), std::move(*state)));
    std::lock_guard<std::mutex> lock(c.mu);
    c.root = emu.root();
    c.text = std::move(*text);
    c.visible = v->visible_;
    c.view = v;
  }
  if (v->view().cards.empty()) return Error(EIO, "no NPU device node is visible under " + emu.root());
  return v;
}

Result<const smi::Card*> HostView::card(int card_id) const {
  const smi::Card* c = view_.card(card_id);
  if (c == nullptr) return Error(ENODEV, "no card " + std::to_string(card_id));
  return c;
}

Result<const smi::Device*> HostView::device(int card_id, int device_id) const {
  ASCEND_ASSIGN(const smi::Card* c, card(card_id), "");
  const smi::Device* d = view_.device(c->id, device_id);
  if (d == nullptr) {
    return Error(ENODEV, "card " + std::to_string(card_id) + " has no device " + std::to_string(device_id));
  }
  return d;
}

}  // namespace ascend::npu::dcmi
