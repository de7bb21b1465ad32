// The C boundary of the emulated libdcmi.so: every dcmi_* entry point checks its arguments, reads a fresh
// HostView (so faults and vNPUs made by npu-sim, npu-smi or another process show at once), answers, and
// converts any failure into a DCMI return code. No C++ exception leaves this file: guarded() catches them.
// Set ASCEND_SIM_DCMI_LOG=1 to have each failure's reason printed on stderr (a real libdcmi logs to a file).
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>

#include "ascend/common/fs.h"
#include "ascend/npu/smi/telemetry.h"
#include "dcmi_interface_api.h"
#include "host_view.h"

namespace ascend::npu::dcmi {
namespace {

// What dcmi_init established: the host root. Guarded by mu; the HostView is looked at per call
// (HostView::read shares the last one while the state file and the visible nodes are unchanged).
struct Session {
  std::mutex mu;
  std::optional<std::string> root;
};

Session& session() {
  static Session s;
  return s;
}

Result<std::shared_ptr<const HostView>> current() {
  std::optional<std::string> root;
  {
    std::lock_guard<std::mutex> lock(session().mu);
    root = session().root;
  }
  if (!root) return Error(EIO, "dcmi_init has not succeeded");
  return HostView::read(*root);
}

int report(const char* fn, const Error& e) {
  const int code = to_dcmi_code(e);
  const char* log = std::getenv("ASCEND_SIM_DCMI_LOG");
  if (log != nullptr && *log != '\0' && *log != '0') {
    std::fprintf(stderr, "libdcmi: %s: %s (%d)\n", fn, e.message().c_str(), code);
  }
  return code;
}

// Runs `body` (returning Status) and turns its outcome into a DCMI code; nothing escapes.
template <typename F>
int guarded(const char* fn, F&& body) noexcept {
  try {
    Status st = body();
    return st ? DCMI_OK : report(fn, st.error());
  } catch (const std::bad_alloc&) {
    return report(fn, Error(ENOMEM, "out of memory"));
  } catch (const std::exception& e) {
    return report(fn, Error(EIO, e.what()));
  } catch (...) {
    return report(fn, Error(EIO, "unknown exception"));
  }
}

Status need(bool ok, const char* what) {
  if (!ok) return Error::invalid(what);
  return {};
}

// Runs `query(host, device)` for chip `device_id` of card `card_id` on a fresh view.
template <typename F>
int on_device(const char* fn, int card_id, int device_id, bool args_ok, F&& query) noexcept {
  return guarded(fn, [&]() -> Status {
    ASCEND_CHECK(need(args_ok, "an output pointer is NULL"), "");
    ASCEND_ASSIGN(auto host, current(), "");
    ASCEND_ASSIGN(const smi::Device* d, host->device(card_id, device_id), "");
    return query(*host, *d);
  });
}

// The visible device `match` picks (ENODEV naming `what` when none).
template <typename Match>
Result<const smi::Device*> visible_device(const HostView& host, Match&& match, const std::string& what) {
  for (const smi::Card& c : host.view().cards) {
    for (const smi::Device& d : c.devices) {
      if (match(d)) return &d;
    }
  }
  return Error(ENODEV, "no visible device with " + what);
}

Status card_list(int* card_num, int* card_list, int list_len) {
  ASCEND_CHECK(need(card_num != nullptr && card_list != nullptr && list_len > 0,
                    "card_num and card_list must not be NULL and list_len must be positive"),
               "");
  ASCEND_ASSIGN(auto host, current(), "");
  const auto& cards = host->view().cards;
  if (static_cast<std::size_t>(list_len) < cards.size()) {
    return Error::invalid("list_len " + std::to_string(list_len) + " is below the card count " +
                          std::to_string(cards.size()));
  }
  for (std::size_t i = 0; i < cards.size(); ++i) card_list[i] = cards[i].id;
  *card_num = static_cast<int>(cards.size());
  return {};
}

Status create_vnpu(const HostView& host, const smi::Device& d, const dcmi_create_vdev_res_stru& in,
                   dcmi_create_vdev_out& out) {
  const std::size_t len = ::strnlen(in.template_name, sizeof in.template_name);
  if (len == 0 || len == sizeof in.template_name) {
    return Error::invalid("template_name must be a NUL-terminated name of 1 to 31 characters");
  }
  std::optional<int> id;
  if (in.vdev_id != DCMI_VDEV_ID_AUTO) {
    if (in.vdev_id > static_cast<unsigned int>(INT_MAX)) {
      return Error::invalid("vdev_id " + std::to_string(in.vdev_id) + " is out of range");
    }
    id = static_cast<int>(in.vdev_id);
  }
  if (d.vnpu != nullptr) return Error(EOPNOTSUPP, "a vNPU cannot be split further");
  // The emulator's own create: the state lock and the capacity rules of `npu-smi set -t create-vnpu`.
  Emulator emu(host.root());
  ASCEND_ASSIGN(Vnpu made,
                emu.create_vnpu(d.chip->phy_id, std::string(in.template_name, len), id, VnpuOwner{}), "");
  out = dcmi_create_vdev_out{};
  out.vdev_id = static_cast<unsigned int>(made.id);
  return {};
}

Status destroy_vnpu(const HostView& host, const smi::Device& d, unsigned int vdevid) {
  if (d.vnpu != nullptr) return Error(EOPNOTSUPP, "a vNPU holds no vNPUs");
  const int phy = d.chip->phy_id;
  Emulator emu(host.root());
  if (vdevid == DCMI_VDEV_ID_ALL) {
    for (const Vnpu& v : host.state().vnpus) {
      if (v.phy_id == phy) ASCEND_CHECK(emu.destroy_vnpu(v.id, phy, std::nullopt), "");
    }
    return {};
  }
  if (vdevid > static_cast<unsigned int>(INT_MAX)) {
    return Error::not_found("no vNPU " + std::to_string(vdevid) + " on device " + std::to_string(phy));
  }
  return emu.destroy_vnpu(static_cast<int>(vdevid), phy, std::nullopt);
}

// The layouts a vendor tool built against the reference header expects (LP64), pinned so that an edit of
// the header that moves a field fails here rather than in a caller.
#if defined(__LP64__)
static_assert(sizeof(dcmi_base_resource) == 64 && sizeof(dcmi_computing_resource) == 96 &&
              sizeof(dcmi_media_resource) == 56);
static_assert(sizeof(dcmi_vdev_query_stru) == 264 && sizeof(dcmi_soc_free_resource) == 224 &&
              sizeof(dcmi_soc_total_resource) == 360);
#endif

// Whether the caller's buffer (*size bytes) holds a T: EINVAL when it is smaller.
template <typename T>
Status fits(unsigned int size) {
  if (size >= sizeof(T)) return {};
  return Error::invalid("size " + std::to_string(size) + " is below the " + std::to_string(sizeof(T)) +
                        " bytes of the answer");
}

// Copies `item` into the caller's buffer and reports its size there.
template <typename T>
Status answer(const T& item, void* buf, unsigned int* size) {
  ASCEND_CHECK(fits<T>(*size), "");
  std::memcpy(buf, &item, sizeof item);
  *size = static_cast<unsigned int>(sizeof item);
  return {};
}

Status vdev_info(const HostView& host, const smi::Device& d, unsigned int sub_cmd, void* buf,
                 unsigned int* size) {
  if (d.vnpu != nullptr) return Error(EOPNOTSUPP, "a vNPU holds no vNPUs");
  const HostState& s = host.state();
  if (s.templates.empty()) return Error(EOPNOTSUPP, d.name + " has no vNPU templates");
  const int phy = d.chip->phy_id;
  switch (sub_cmd) {
    case DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE: {
      ASCEND_CHECK(fits<dcmi_vdev_query_stru>(*size), "");
      dcmi_vdev_query_stru q{};
      std::memcpy(&q.vdev_id, buf, sizeof q.vdev_id);  // the input: the caller's vdev_id
      ASCEND_ASSIGN(q.query_info, vdev_query(s, phy, q.vdev_id), "");
      return answer(q, buf, size);
    }
    case DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE:
      return answer(vdev_total(s, phy), buf, size);
    case DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE:
      return answer(vdev_free(s, phy), buf, size);
    default:
      return Error(EOPNOTSUPP,
                   "DCMI_MAIN_CMD_VDEV_MNG sub_cmd " + std::to_string(sub_cmd) + " is not supported");
  }
}

}  // namespace
}  // namespace ascend::npu::dcmi

using ascend::Error;
using ascend::Status;
using ascend::npu::dcmi::HostView;
using ascend::npu::dcmi::on_device;
namespace smi = ascend::npu::smi;
namespace dcmi = ascend::npu::dcmi;

extern "C" {

int dcmi_init(void) {
  return dcmi::guarded("dcmi_init", []() -> Status {
    auto host = HostView::read(dcmi::find_root());
    std::lock_guard<std::mutex> lock(dcmi::session().mu);
    // A failed init leaves the library uninitialised: later calls fail rather than use a stale host.
    dcmi::session().root.reset();
    if (!host) return host.error().context("dcmi_init");
    dcmi::session().root = (*host)->root();
    return {};
  });
}

int dcmi_get_card_num_list(int* card_num, int* card_list, int list_len) {
  return dcmi::guarded("dcmi_get_card_num_list",
                       [&] { return dcmi::card_list(card_num, card_list, list_len); });
}

int dcmi_get_card_list(int* card_num, int* card_list, int list_len) {
  return dcmi::guarded("dcmi_get_card_list", [&] { return dcmi::card_list(card_num, card_list, list_len); });
}

int dcmi_get_device_num_in_card(int card_id, int* device_num) {
  return dcmi::guarded("dcmi_get_device_num_in_card", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(device_num != nullptr, "device_num is NULL"), "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    ASCEND_ASSIGN(const smi::Card* c, host->card(card_id), "");
    *device_num = static_cast<int>(c->devices.size());
    return {};
  });
}

int dcmi_get_device_id_in_card(int card_id, int* device_id_max, int* mcu_id, int* cpu_id) {
  return dcmi::guarded("dcmi_get_device_id_in_card", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(device_id_max != nullptr && mcu_id != nullptr && cpu_id != nullptr,
                            "an output pointer is NULL"),
                 "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    ASCEND_ASSIGN(const smi::Card* c, host->card(card_id), "");
    *device_id_max = static_cast<int>(c->devices.size());
    *mcu_id = -1;  // the emulator models no MCU behind the DCMI (REFERENCE.md)
    *cpu_id = -1;
    return {};
  });
}

int dcmi_get_device_logic_id(int* device_logic_id, int card_id, int device_id) {
  return on_device("dcmi_get_device_logic_id", card_id, device_id, device_logic_id != nullptr,
                   [&](const HostView&, const smi::Device& d) -> Status {
                     *device_logic_id = d.logic_id;
                     return {};
                   });
}

int dcmi_get_device_logicid_from_phyid(unsigned int phyid, unsigned int* logicid) {
  return dcmi::guarded("dcmi_get_device_logicid_from_phyid", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(logicid != nullptr, "logicid is NULL"), "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    ASCEND_ASSIGN(const smi::Device* d,
                  dcmi::visible_device(
                      *host, [&](const smi::Device& x) { return x.phy_id == static_cast<int>(phyid); },
                      "physical id " + std::to_string(phyid)),
                  "");
    *logicid = static_cast<unsigned int>(d->logic_id);
    return {};
  });
}

int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int* phyid) {
  return dcmi::guarded("dcmi_get_device_phyid_from_logicid", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(phyid != nullptr, "phyid is NULL"), "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    ASCEND_ASSIGN(const smi::Device* d,
                  dcmi::visible_device(
                      *host, [&](const smi::Device& x) { return x.logic_id == static_cast<int>(logicid); },
                      "logical id " + std::to_string(logicid)),
                  "");
    *phyid = static_cast<unsigned int>(d->phy_id);
    return {};
  });
}

int dcmi_get_driver_version(char* driver_ver, unsigned int len) {
  return dcmi::guarded("dcmi_get_driver_version", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(driver_ver != nullptr && len > 0, "driver_ver is NULL or len is 0"), "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    const std::string& v = host->state().driver_version;
    if (v.size() >= len) {
      return Error::invalid("len " + std::to_string(len) + " cannot hold the version '" + v + "'");
    }
    std::memcpy(driver_ver, v.c_str(), v.size() + 1);
    return {};
  });
}

int dcmi_get_vdevice_mode(int* mode) {
  return dcmi::guarded("dcmi_get_vdevice_mode", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(mode != nullptr, "mode is NULL"), "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    *mode = host->state().vnpu_mode == "vm" ? 1 : 0;
    return {};
  });
}

int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info* chip_info) {
  return on_device("dcmi_get_device_chip_info", card_id, device_id, chip_info != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     *chip_info = dcmi::chip_info(h.state(), d);
                     return {};
                   });
}

int dcmi_get_device_health(int card_id, int device_id, unsigned int* health) {
  return on_device("dcmi_get_device_health", card_id, device_id, health != nullptr,
                   [&](const HostView&, const smi::Device& d) -> Status {
                     *health = dcmi::health_code(d.chip->health());
                     return {};
                   });
}

int dcmi_get_device_errorcode_v2(int card_id, int device_id, int* error_count, unsigned int* error_code_list,
                                 unsigned int list_len) {
  const bool args_ok = error_count != nullptr && (error_code_list != nullptr || list_len == 0);
  return on_device("dcmi_get_device_errorcode_v2", card_id, device_id, args_ok,
                   [&](const HostView&, const smi::Device& d) -> Status {
                     const auto& faults = d.chip->faults;
                     const std::size_t n = std::min<std::size_t>(faults.size(), DCMI_ERROR_CODE_MAX_COUNT);
                     for (std::size_t i = 0; i < n && i < list_len; ++i) error_code_list[i] = faults[i].code;
                     *error_count = static_cast<int>(n);
                     return {};
                   });
}

int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info* hbm_info) {
  return on_device("dcmi_get_device_hbm_info", card_id, device_id, hbm_info != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     ASCEND_ASSIGN(*hbm_info, dcmi::hbm_info(h.state(), d), "");
                     return {};
                   });
}

int dcmi_get_device_memory_info_v3(int card_id, int device_id,
                                   struct dcmi_get_memory_info_stru* memory_info) {
  return on_device("dcmi_get_device_memory_info_v3", card_id, device_id, memory_info != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     *memory_info = dcmi::memory_info(h.state(), d);
                     return {};
                   });
}

int dcmi_get_device_temperature(int card_id, int device_id, int* temperature) {
  return on_device("dcmi_get_device_temperature", card_id, device_id, temperature != nullptr,
                   [&](const HostView&, const smi::Device& d) -> Status {
                     *temperature = d.chip->temp_c;
                     return {};
                   });
}

int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type,
                           struct dcmi_die_id* die_id) {
  return on_device("dcmi_get_device_die_v2", card_id, device_id, die_id != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     if (input_type != VDIE) return Error(EOPNOTSUPP, "only the VDIE id is reported");
                     // What npu-smi -t board -c prints as "VDie ID" ("Die ID" on 310P).
                     const auto words = smi::die_words(*d.chip, smi::vdie_kind(h.state().family));
                     for (std::size_t k = 0; k < words.size(); ++k) die_id->soc_die[k] = words[k];
                     return {};
                   });
}

int dcmi_get_device_power_info(int card_id, int device_id, int* power) {
  return on_device("dcmi_get_device_power_info", card_id, device_id, power != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     ASCEND_ASSIGN(*power, dcmi::power_tenths(h.state(), d), "");
                     return {};
                   });
}

int dcmi_get_device_network_health(int card_id, int device_id, enum dcmi_rdfx_detect_result* result) {
  return on_device("dcmi_get_device_network_health", card_id, device_id, result != nullptr,
                   [&](const HostView&, const smi::Device& d) -> Status {
                     // A port that is down cannot reach its detection address.
                     *result = d.chip->link_up ? DCMI_RDFX_DETECT_OK : DCMI_RDFX_DETECT_UNREACH;
                     return {};
                   });
}

int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type,
                                     unsigned int* utilization_rate) {
  return on_device("dcmi_get_device_utilization_rate", card_id, device_id, utilization_rate != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     ASCEND_ASSIGN(*utilization_rate, dcmi::utilization(h.state(), d, input_type), "");
                     return {};
                   });
}

int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all* pcie_info) {
  return on_device("dcmi_get_device_pcie_info_v2", card_id, device_id, pcie_info != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     ASCEND_ASSIGN(*pcie_info, dcmi::pcie_info(h.state(), d), "");
                     return {};
                   });
}

int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char* affinity_cpu, int* length) {
  return on_device("dcmi_get_affinity_cpu_info_by_device_id", card_id, device_id,
                   affinity_cpu != nullptr && length != nullptr,
                   [&](const HostView&, const smi::Device& d) -> Status {
                     const std::string& cpus = d.chip->cpu_affinity;
                     if (cpus.size() >= TOPO_INFO_MAX_LENTH) {
                       return Error(ENOMEM, "affinity '" + cpus + "' does not fit TOPO_INFO_MAX_LENTH");
                     }
                     std::memcpy(affinity_cpu, cpus.c_str(), cpus.size() + 1);
                     *length = static_cast<int>(cpus.size());
                     return {};
                   });
}

int dcmi_get_topo_info_by_device_id(int card_id1, int device_id1, int card_id2, int device_id2,
                                    int* topo_type) {
  return dcmi::guarded("dcmi_get_topo_info_by_device_id", [&]() -> Status {
    ASCEND_CHECK(dcmi::need(topo_type != nullptr, "topo_type is NULL"), "");
    ASCEND_ASSIGN(auto host, dcmi::current(), "");
    ASCEND_ASSIGN(const smi::Device* a, host->device(card_id1, device_id1), "");
    ASCEND_ASSIGN(const smi::Device* b, host->device(card_id2, device_id2), "");
    // Two rows of one device (or a vNPU and its own chip) are the same device.
    const auto link =
        a == b ? ascend::npu::Link::kSelf : host->state().link(a->chip->phy_id, b->chip->phy_id);
    *topo_type = dcmi::topo_code(link);
    return {};
  });
}

int dcmi_get_device_ip(int card_id, int device_id, enum dcmi_port_type input_type, int port_id,
                       struct dcmi_ip_addr* ip, struct dcmi_ip_addr* mask) {
  return on_device("dcmi_get_device_ip", card_id, device_id, ip != nullptr && mask != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     if (port_id < 0 || port_id > 255) return Error::invalid("port_id must be 0..255");
                     if (input_type == DCMI_VNIC_PORT) {
                       return Error(EOPNOTSUPP, "the emulated host has no virtual NIC port");
                     }
                     if (input_type != DCMI_ROCE_PORT) return Error::invalid("unknown port type");
                     const std::string conf =
                         h.root() == "/" ? "/etc/hccn.conf" : h.root() + "/etc/hccn.conf";
                     auto text = ascend::read_file(conf);
                     if (!text) return Error(ENODATA, text.error().message());
                     ASCEND_ASSIGN(const dcmi::IpAndMask a, dcmi::roce_address(*text, d.chip->phy_id), conf);
                     *ip = a.ip;
                     *mask = a.mask;
                     return {};
                   });
}

int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru* vdev,
                        struct dcmi_create_vdev_out* out) {
  return on_device(
      "dcmi_create_vdevice", card_id, device_id, vdev != nullptr && out != nullptr,
      [&](const HostView& h, const smi::Device& d) { return dcmi::create_vnpu(h, d, *vdev, *out); });
}

int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid) {
  return on_device("dcmi_set_destroy_vdevice", card_id, device_id, true,
                   [&](const HostView& h, const smi::Device& d) { return dcmi::destroy_vnpu(h, d, vdevid); });
}

int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd,
                         void* buf, unsigned int* size) {
  return on_device("dcmi_get_device_info", card_id, device_id, buf != nullptr && size != nullptr,
                   [&](const HostView& h, const smi::Device& d) -> Status {
                     if (main_cmd != DCMI_MAIN_CMD_VDEV_MNG) {
                       return Error(EOPNOTSUPP, "main_cmd " + std::to_string(static_cast<int>(main_cmd)) +
                                                    " is not supported (only DCMI_MAIN_CMD_VDEV_MNG)");
                     }
                     return dcmi::vdev_info(h, d, sub_cmd, buf, size);
                   });
}

}  // extern "C"
