#include "host_view.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

#include "ascend/npu/smi.h"

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

HostView::HostView(std::string root, HostState state) : root_(std::move(root)), state_(std::move(state)) {
  view_ = smi::make_view(state_, smi::visible_devices(state_, root_));
}

Result<std::unique_ptr<const HostView>> HostView::read(const std::string& root) {
  Emulator emu(root);
  auto snap = emu.read_state();
  if (!snap) return Error(EIO, snap.error().message());
  // Not make_unique: the constructor is private. The View points into the HostView, so it never moves.
  std::unique_ptr<const HostView> v(new HostView(emu.root(), std::move(*snap)));
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
