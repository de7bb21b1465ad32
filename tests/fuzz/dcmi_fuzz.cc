// The emulated libdcmi.so's inputs, as a vendor tool would pass them: card and device ids, buffer sizes,
// dcmi_get_device_info's commands, template names, vNPU ids. Each input is a list of calls on an emulated
// Atlas 800T A2 (state file written once, no device nodes). Oracle: every call returns DCMI_OK or a DCMI
// error code (-8001 .. -8255, REFERENCE.md), a size the library reports never exceeds the buffer, and after
// the input's own clean-up (destroy every vNPU) the host holds no vNPU.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "ascend/common/fs.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "dcmi_interface_api.h"
#include "fuzz_util.h"

using namespace ascend;

namespace {

struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() { return n == 0 ? 0 : (--n, *p++); }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  std::string text(std::size_t max) {
    std::size_t len = std::min<std::size_t>(byte(), std::min(max, n));
    std::string s(reinterpret_cast<const char*>(p), len);
    p += len;
    n -= len;
    return s;
  }
};

void check_code(int rc, const char* what) {
  fuzz::check(rc == DCMI_OK || (rc <= -8001 && rc >= -8255), what);
}

std::string g_root;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/dcmi_fuzz.XXXXXX";
  fuzz::check(::mkdtemp(dir.data()) != nullptr, "mkdtemp");
  g_root = dir;
  npu::HostState s = *npu::builtin_profile("atlas800t-a2");
  s.majors = {234, 235, 236, 237, 238};
  s.device_nodes = false;
  s.generation = 1;
  std::filesystem::create_directories(g_root + "/" + npu::kStateDir);
  fuzz::check(atomic_replace(g_root + "/" + npu::kStateFile, npu::serialize(s)).ok(), "write the state");
  ::setenv("ASCEND_SIM_ROOT", g_root.c_str(), 1);
  fuzz::check(dcmi_init() == DCMI_OK, "dcmi_init on the emulated host");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader r{data, size};
  for (int calls = 0; calls < 16 && r.n > 0; ++calls) {
    const std::uint8_t op = r.byte() % 8;
    const int card = static_cast<int>(static_cast<std::int8_t>(r.byte()));
    const int dev = static_cast<int>(static_cast<std::int8_t>(r.byte()));
    switch (op) {
      case 0: {  // dcmi_get_device_info: any command, any size up to the largest struct
        alignas(8) unsigned char buf[512] = {};
        const auto main_cmd = static_cast<dcmi_main_cmd>(r.u32() % 0x8004);
        const unsigned sub = r.u32() % 8;
        unsigned int want = r.u32() % sizeof buf;
        std::memcpy(buf, &want, sizeof want);  // GET_VDEV_RESOURCE reads vdev_id from the buffer
        const unsigned vdev = r.u32() % 200;
        std::memcpy(buf, &vdev, sizeof vdev);
        unsigned int got = want;
        check_code(dcmi_get_device_info(card, dev, main_cmd, sub, buf, &got), "dcmi_get_device_info");
        fuzz::check(got <= sizeof buf, "dcmi_get_device_info reported more than the buffer");
        break;
      }
      case 1: {  // create a vNPU from a fuzzed template name and id
        dcmi_create_vdev_res_stru req{};
        req.vdev_id = (r.byte() & 1) != 0 ? DCMI_VDEV_ID_AUTO : r.u32() % 300;
        req.vfg_id = DCMI_VDEV_ID_AUTO;
        const std::string name = r.text(sizeof req.template_name - 1);
        std::memcpy(req.template_name, name.data(), name.size());
        dcmi_create_vdev_out out{};
        check_code(dcmi_create_vdevice(card, dev, &req, &out), "dcmi_create_vdevice");
        break;
      }
      case 2:
        check_code(dcmi_set_destroy_vdevice(card, dev, r.u32() % 70000), "dcmi_set_destroy_vdevice");
        break;
      case 3: {
        int count = 0;
        unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT] = {};
        const unsigned len = r.byte() % (DCMI_ERROR_CODE_MAX_COUNT + 1);
        check_code(dcmi_get_device_errorcode_v2(card, dev, &count, codes, len), "errorcode_v2");
        break;
      }
      case 4: {
        char cpus[64] = {};
        int len = static_cast<int>(r.byte() % sizeof cpus);
        check_code(dcmi_get_affinity_cpu_info_by_device_id(card, dev, cpus, &len), "affinity");
        break;
      }
      case 5: {
        int topo = 0;
        check_code(dcmi_get_topo_info_by_device_id(card, dev, static_cast<std::int8_t>(r.byte()),
                                                   static_cast<std::int8_t>(r.byte()), &topo),
                   "topo");
        break;
      }
      case 6: {
        unsigned int rate = 0;
        check_code(dcmi_get_device_utilization_rate(card, dev, static_cast<std::int8_t>(r.byte()), &rate),
                   "util");
        break;
      }
      default: {
        unsigned int logic = 0;
        check_code(dcmi_get_device_logicid_from_phyid(r.u32() % 70, &logic), "logicid_from_phyid");
        dcmi_ip_addr ip{}, mask{};
        check_code(dcmi_get_device_ip(card, dev, static_cast<dcmi_port_type>(r.byte() % 3), 0, &ip, &mask),
                   "ip");
        break;
      }
    }
  }
  // Clean up so that inputs do not depend on each other: destroy every vNPU the input made.
  npu::Emulator emu(g_root);
  fuzz::check(emu.update([](npu::HostState& s) {
                   s.vnpus.clear();
                   return Status{};
                 })
                  .ok(),
              "reset the vNPUs");
  return 0;
}
