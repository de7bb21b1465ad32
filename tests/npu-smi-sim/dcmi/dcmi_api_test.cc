// The emulated libdcmi.so through dlopen, as a vendor tool uses it: error paths and semantics. Expected
// codes come from the DCMI reference's return-code table and per-function pages (REFERENCE.md); expected
// vNPU ids and capacities from the reference's vNPU template table (tests/fixtures/dcmi/README.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ascend/npu/smi.h"
#include "dcmi_library.h"
#include "emulator_fixture.h"
#include "run_command.h"

namespace ascend::npu {
namespace {

using testing::DcmiApi;
using testing::DcmiLibrary;
using testing::vdev_request;

const std::string kNpuSim = std::string(ASCEND_BIN_DIR) + "/npu-sim";
const std::string kNpuSmi = std::string(ASCEND_BIN_DIR) + "/npu-smi";

// An emulated host (no device nodes: every chip visible, no root needed) and a fresh copy of the library
// (its own dcmi_init state) pointed at it through $ASCEND_SIM_ROOT.
class DcmiApiTest : public ::testing::Test {
 protected:
  explicit DcmiApiTest(const std::string& profile = "atlas800t-a2")
      : host_(profile), lib_(testing::built_libdcmi(), host_.dir() + "/lib/libdcmi.so"), api_(lib_) {
    ::setenv("ASCEND_SIM_ROOT", host_.root().c_str(), 1);
  }
  ~DcmiApiTest() override { ::unsetenv("ASCEND_SIM_ROOT"); }

  void fault(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kNpuSim, "fault"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--root", host_.root()});
    auto r = ascend::testing::run_command(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  int vnpu_count() { return static_cast<int>(host_.emu().snapshot()->vnpus.size()); }

  testing::EmulatedHost host_;
  DcmiLibrary lib_;
  DcmiApi api_;
};

TEST_F(DcmiApiTest, InitFailsWithoutAHostAsNpuSmiReports) {
  ascend::testing::TempDir empty;
  ::setenv("ASCEND_SIM_ROOT", empty.path().c_str(), 1);
  EXPECT_EQ(api_.init(), DCMI_ERR_CODE_INNER_ERR);
  // npu-smi of the same (empty) root prints the same code: "dcmi module initialize failed. ret is -8005".
  auto smi = smi::run({"info"}, empty.path());
  EXPECT_NE(smi.out.find("ret is " + std::to_string(DCMI_ERR_CODE_INNER_ERR)), std::string::npos) << smi.out;
  int n = 0;
  int cards[MAX_CARD_NUM];
  EXPECT_EQ(api_.card_num_list(&n, cards, MAX_CARD_NUM), DCMI_ERR_CODE_INNER_ERR);
}

TEST_F(DcmiApiTest, CallsBeforeInitFail) {
  int n = 0;
  int cards[MAX_CARD_NUM];
  EXPECT_EQ(api_.card_num_list(&n, cards, MAX_CARD_NUM), DCMI_ERR_CODE_INNER_ERR);
  unsigned int h = 0;
  EXPECT_EQ(api_.health(0, 0, &h), DCMI_ERR_CODE_INNER_ERR);
}

TEST_F(DcmiApiTest, AFailedInitForgetsTheHostBefore) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  ascend::testing::TempDir empty;
  ::setenv("ASCEND_SIM_ROOT", empty.path().c_str(), 1);
  EXPECT_EQ(api_.init(), DCMI_ERR_CODE_INNER_ERR);
  unsigned int h = 0;
  EXPECT_EQ(api_.health(0, 0, &h), DCMI_ERR_CODE_INNER_ERR);
}

TEST_F(DcmiApiTest, AnUnloadedHostFailsLaterCalls) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  ASSERT_TRUE(host_.emu().unload().ok());
  unsigned int h = 0;
  EXPECT_EQ(api_.health(0, 0, &h), DCMI_ERR_CODE_INNER_ERR);
}

TEST_F(DcmiApiTest, ListsTheCardsNpuSmiShows) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  int n = 0;
  int cards[MAX_CARD_NUM];
  ASSERT_EQ(api_.card_num_list(&n, cards, MAX_CARD_NUM), DCMI_OK);
  EXPECT_EQ(std::vector<int>(cards, cards + n), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  int m = 0;
  ASSERT_EQ(api_.card_list(&m, cards, MAX_CARD_NUM), DCMI_OK);
  EXPECT_EQ(m, n);
  int per_card = 0;
  int id_max = 0;
  int mcu = 0;
  int cpu = 0;
  ASSERT_EQ(api_.device_num_in_card(7, &per_card), DCMI_OK);
  EXPECT_EQ(per_card, 1);
  ASSERT_EQ(api_.device_id_in_card(7, &id_max, &mcu, &cpu), DCMI_OK);
  EXPECT_EQ(id_max, 1);
  EXPECT_EQ(mcu, -1);
  EXPECT_EQ(cpu, -1);
}

// card_id / device_id that the host does not have: DCMI_ERR_CODE_INVALID_DEVICE_ID from every function.
TEST_F(DcmiApiTest, UnknownCardOrDeviceIsAnInvalidDeviceId) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  struct Case {
    int card;
    int device;
  };
  for (const Case& c : {Case{8, 0}, Case{-1, 0}, Case{64, 0}, Case{0, 1}, Case{0, -1}, Case{7, 2}}) {
    SCOPED_TRACE(::testing::Message() << "card " << c.card << " device " << c.device);
    dcmi_chip_info chip{};
    unsigned int u = 0;
    int i = 0;
    dcmi_hbm_info hbm{};
    dcmi_get_memory_info_stru mem{};
    dcmi_pcie_info_all pcie{};
    char cpus[TOPO_INFO_MAX_LENTH];
    dcmi_ip_addr ip{};
    dcmi_ip_addr mask{};
    EXPECT_EQ(api_.chip_info(c.card, c.device, &chip), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.health(c.card, c.device, &u), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.logic_id(&i, c.card, c.device), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.hbm_info(c.card, c.device, &hbm), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.memory_info_v3(c.card, c.device, &mem), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.temperature(c.card, c.device, &i), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.pcie_info_v2(c.card, c.device, &pcie), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.affinity(c.card, c.device, cpus, &i), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.topo(0, 0, c.card, c.device, &i), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.ip(c.card, c.device, DCMI_ROCE_PORT, 0, &ip, &mask), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    auto req = vdev_request("vir10_3c_32g");
    dcmi_create_vdev_out out{};
    EXPECT_EQ(api_.create_vdevice(c.card, c.device, &req, &out), DCMI_ERR_CODE_INVALID_DEVICE_ID);
    EXPECT_EQ(api_.destroy_vdevice(c.card, c.device, 100), DCMI_ERR_CODE_INVALID_DEVICE_ID);
  }
  int n = 0;
  EXPECT_EQ(api_.device_num_in_card(8, &n), DCMI_ERR_CODE_INVALID_DEVICE_ID);
  unsigned int logic = 0;
  EXPECT_EQ(api_.logicid_from_phyid(8, &logic), DCMI_ERR_CODE_INVALID_DEVICE_ID);
}

TEST_F(DcmiApiTest, MissingOutputsAndShortListsAreInvalidParameters) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  int cards[MAX_CARD_NUM];
  int n = 0;
  EXPECT_EQ(api_.card_num_list(nullptr, cards, MAX_CARD_NUM), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.card_num_list(&n, nullptr, MAX_CARD_NUM), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.card_num_list(&n, cards, 4), DCMI_ERR_CODE_INVALID_PARAMETER);  // 8 cards
  EXPECT_EQ(api_.device_num_in_card(0, nullptr), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.chip_info(0, 0, nullptr), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.health(0, 0, nullptr), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.errorcode_v2(0, 0, nullptr, nullptr, 0), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.errorcode_v2(0, 0, &n, nullptr, 8), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.topo(0, 0, 1, 0, nullptr), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.create_vdevice(0, 0, nullptr, nullptr), DCMI_ERR_CODE_INVALID_PARAMETER);
  unsigned int u = 0;
  EXPECT_EQ(api_.utilization_rate(0, 0, 7, &u), DCMI_ERR_CODE_INVALID_PARAMETER);  // no such input_type
  dcmi_ip_addr ip{};
  dcmi_ip_addr mask{};
  EXPECT_EQ(api_.ip(0, 0, DCMI_ROCE_PORT, 256, &ip, &mask), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.ip(0, 0, DCMI_INVALID_PORT, 0, &ip, &mask), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.ip(0, 0, DCMI_VNIC_PORT, 0, &ip, &mask), DCMI_ERR_CODE_NOT_SUPPORT);
}

TEST_F(DcmiApiTest, AHostWithoutHccnConfHasNoDeviceIp) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  std::filesystem::remove(host_.root() + "/etc/hccn.conf");
  dcmi_ip_addr ip{};
  dcmi_ip_addr mask{};
  EXPECT_EQ(api_.ip(0, 0, DCMI_ROCE_PORT, 0, &ip, &mask), DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST);
}

// Health as the reference defines it (0 normal, 1 minor, 2 major, 3 critical) against the severity that
// npu-sim gives a fault (docs/npu-sim.md: --severity, else bits 27..24 of the code) and that npu-smi prints.
TEST_F(DcmiApiTest, HealthFollowsFaultsInjectedWithNpuSim) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  struct Case {
    std::vector<std::string> set;  // npu-sim fault set arguments
    unsigned int code;
    unsigned int health;
    const char* npu_smi;
  };
  const Case cases[] = {
      {{"--code", "0x80E01801"}, 0x80E01801U, DCMI_HEALTH_MINOR, "Warning"},      // bits 27..24 = 0
      {{"--code", "0x84C98000"}, 0x84C98000U, DCMI_HEALTH_MAJOR, "Alarm"},        // 4
      {{"--code", "0x8C204E00"}, 0x8C204E00U, DCMI_HEALTH_CRITICAL, "Critical"},  // C
      {{"--code", "0x80E01801", "--severity", "alarm"}, 0x80E01801U, DCMI_HEALTH_MAJOR, "Alarm"},
      {{"--code", "0x8C204E00", "--severity", "warning"}, 0x8C204E00U, DCMI_HEALTH_MINOR, "Warning"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.npu_smi);
    std::vector<std::string> args = {"set", "--device", "3"};
    args.insert(args.end(), c.set.begin(), c.set.end());
    fault(args);
    unsigned int health = 99;
    ASSERT_EQ(api_.health(3, 0, &health), DCMI_OK);
    EXPECT_EQ(health, c.health);
    int count = 0;
    unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT] = {};
    ASSERT_EQ(api_.errorcode_v2(3, 0, &count, codes, DCMI_ERROR_CODE_MAX_COUNT), DCMI_OK);
    ASSERT_EQ(count, 1);
    EXPECT_EQ(codes[0], c.code);
    auto smi = smi::run({"info", "-t", "health", "-i", "3", "-c", "0"}, host_.root());
    EXPECT_NE(smi.out.find(std::string(": ") + c.npu_smi + "\n"), std::string::npos) << smi.out;
    fault({"clear", "--device", "3"});
    ASSERT_EQ(api_.health(3, 0, &health), DCMI_OK);
    EXPECT_EQ(health, DCMI_HEALTH_OK);
  }
  // Several alarms: the most severe one is the device's health (reference, dcmi_get_device_health).
  fault({"set", "--device", "5", "--code", "0x80E01801"});
  fault({"set", "--device", "5", "--code", "0x8C204E00"});
  unsigned int health = 0;
  ASSERT_EQ(api_.health(5, 0, &health), DCMI_OK);
  EXPECT_EQ(health, DCMI_HEALTH_CRITICAL);
  int count = 0;
  unsigned int codes[1] = {};
  ASSERT_EQ(api_.errorcode_v2(5, 0, &count, codes, 1), DCMI_OK);  // the list is shorter than the count
  EXPECT_EQ(count, 2);
  EXPECT_EQ(codes[0], 0x80E01801U);
  ASSERT_EQ(api_.health(4, 0, &health), DCMI_OK);
  EXPECT_EQ(health, DCMI_HEALTH_OK);
}

// The telemetry calls follow `npu-sim load-gen` and `npu-sim link`. Expected values: the atlas800t-a2
// profile's chip 1 (HBM 3314 / 65536 MB, 92.0 W, 39 C) under the load model of workload.h at 80 % AICore:
// 39 + 35 * 0.8 = 67 C, 92 + (400 - 92) * 0.8 = 338.4 W (3384 tenths, the reference's unit).
TEST_F(DcmiApiTest, TelemetryFollowsLoadGenAndTheLink) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  int power = 0;
  ASSERT_EQ(api_.power_info(1, 0, &power), DCMI_OK);
  EXPECT_EQ(power, 920);
  auto r = ascend::testing::run_command({kNpuSim, "load-gen", "--device", "1", "--util", "80", "--aicpu",
                                         "15", "--hbm", "16", "--root", host_.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(api_.power_info(1, 0, &power), DCMI_OK);
  EXPECT_EQ(power, 3384);
  int temp = 0;
  ASSERT_EQ(api_.temperature(1, 0, &temp), DCMI_OK);
  EXPECT_EQ(temp, 67);
  unsigned int util = 0;
  ASSERT_EQ(api_.utilization_rate(1, 0, DCMI_UTILIZATION_RATE_AICORE, &util), DCMI_OK);
  EXPECT_EQ(util, 80U);
  ASSERT_EQ(api_.utilization_rate(1, 0, DCMI_UTILIZATION_RATE_AICPU, &util), DCMI_OK);
  EXPECT_EQ(util, 15U);
  dcmi_hbm_info hbm{};
  ASSERT_EQ(api_.hbm_info(1, 0, &hbm), DCMI_OK);
  EXPECT_EQ(hbm.memory_usage, 3314U + 16384U);
  EXPECT_EQ(hbm.memory_size, 65536U);
  // Chip 0 is untouched.
  ASSERT_EQ(api_.utilization_rate(0, 0, DCMI_UTILIZATION_RATE_AICORE, &util), DCMI_OK);
  EXPECT_EQ(util, 0U);

  dcmi_rdfx_detect_result net = DCMI_RDFX_DETECT_MAX;
  ASSERT_EQ(api_.network_health(2, 0, &net), DCMI_OK);
  EXPECT_EQ(net, DCMI_RDFX_DETECT_OK);
  r = ascend::testing::run_command({kNpuSim, "link", "--device", "2", "down", "--root", host_.root()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(api_.network_health(2, 0, &net), DCMI_OK);
  EXPECT_EQ(net, DCMI_RDFX_DETECT_UNREACH);
  EXPECT_EQ(api_.power_info(1, 0, nullptr), DCMI_ERR_CODE_INVALID_PARAMETER);
  EXPECT_EQ(api_.network_health(9, 0, &net), DCMI_ERR_CODE_INVALID_DEVICE_ID);
}

// The library keeps what it read between calls (as a real one keeps its device handles): a change must
// still show at once, even one that keeps the state file's inode, size and modification time (rewritten in
// place, the time set back), and a device node that goes away must hide its chip in the same session.
TEST_F(DcmiApiTest, AChangeShowsAtOnceEvenWithTheSameFileSizeAndTime) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  fault({"set", "--device", "3", "--code", "0x80E01801"});
  int count = 0;
  unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT] = {};
  ASSERT_EQ(api_.errorcode_v2(3, 0, &count, codes, DCMI_ERROR_CODE_MAX_COUNT), DCMI_OK);
  ASSERT_EQ(count, 1);
  EXPECT_EQ(codes[0], 0x80E01801U);

  const std::string path = host_.emu().state_path();
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto at = text.find("\"0x80E01801\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "\"0x80E01802\"");  // another code of the same length
  {
    std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);  // in place: same inode
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  ASSERT_EQ(api_.errorcode_v2(3, 0, &count, codes, DCMI_ERROR_CODE_MAX_COUNT), DCMI_OK);
  ASSERT_EQ(count, 1);
  EXPECT_EQ(codes[0], 0x80E01802U);
}

// 910B3, 20 AICore: two vir10_3c_32g take every AICore; ids are the lowest free of 100+16*phy .. +15
// (reference vNPU table: "observed 100,101 on phy0; 116,117 on phy1").
TEST_F(DcmiApiTest, CreatesVnpusWithTheLowestFreeIdAndRefusesOverCommit) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  dcmi_create_vdev_out out{};
  auto req = vdev_request("vir10_3c_32g");
  ASSERT_EQ(api_.create_vdevice(0, 0, &req, &out), DCMI_OK);
  EXPECT_EQ(out.vdev_id, 100U);
  ASSERT_EQ(api_.create_vdevice(0, 0, &req, &out), DCMI_OK);
  EXPECT_EQ(out.vdev_id, 101U);
  EXPECT_EQ(api_.create_vdevice(0, 0, &req, &out), DCMI_ERR_CODE_RESOURCE_OCCUPIED);
  auto small = vdev_request("vir05_1c_16g");
  EXPECT_EQ(api_.create_vdevice(0, 0, &small, &out), DCMI_ERR_CODE_RESOURCE_OCCUPIED);
  EXPECT_EQ(vnpu_count(), 2);
  // npu-smi refuses the same request on the same host, by the same rule.
  auto smi = smi::run({"set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir05_1c_16g"}, host_.root());
  EXPECT_NE(smi.exit_code, 0);
  auto info = smi::run({"info", "-t", "info-vnpu", "-i", "0", "-c", "0"}, host_.root());
  EXPECT_NE(info.out.find("Total number of vnpu: 2"), std::string::npos) << info.out;

  ASSERT_EQ(api_.create_vdevice(1, 0, &req, &out), DCMI_OK);
  EXPECT_EQ(out.vdev_id, 116U);
  ASSERT_EQ(api_.destroy_vdevice(0, 0, 100), DCMI_OK);
  ASSERT_EQ(api_.create_vdevice(0, 0, &small, &out), DCMI_OK);
  EXPECT_EQ(out.vdev_id, 100U);
  EXPECT_FALSE(std::filesystem::exists(host_.root() + "/dev/vdavinci100"));  // a host without nodes
}

TEST_F(DcmiApiTest, VnpuRequestErrors) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  dcmi_create_vdev_out out{};
  auto unknown = vdev_request("vir02");  // a 910 A1 template, not the 910B3's
  EXPECT_EQ(api_.create_vdevice(0, 0, &unknown, &out), DCMI_ERR_CODE_INVALID_PARAMETER);
  auto unterminated = vdev_request("vir10_3c_32g");
  std::memset(unterminated.template_name, 'v', sizeof unterminated.template_name);
  EXPECT_EQ(api_.create_vdevice(0, 0, &unterminated, &out), DCMI_ERR_CODE_INVALID_PARAMETER);
  auto other_range = vdev_request("vir05_1c_16g", 116);  // phy 1's range
  EXPECT_EQ(api_.create_vdevice(0, 0, &other_range, &out), DCMI_ERR_CODE_INVALID_PARAMETER);
  auto chosen = vdev_request("vir05_1c_16g", 103);
  ASSERT_EQ(api_.create_vdevice(0, 0, &chosen, &out), DCMI_OK);
  EXPECT_EQ(out.vdev_id, 103U);
  EXPECT_EQ(api_.create_vdevice(0, 0, &chosen, &out), DCMI_ERR_CODE_RESOURCE_OCCUPIED);  // id taken
  EXPECT_EQ(api_.destroy_vdevice(0, 0, 115), DCMI_ERR_CODE_DEVICE_NOT_EXIST);
  EXPECT_EQ(api_.destroy_vdevice(1, 0, 103), DCMI_ERR_CODE_DEVICE_NOT_EXIST);  // another chip's
  EXPECT_EQ(api_.destroy_vdevice(0, 0, DCMI_VDEV_ID_AUTO), DCMI_ERR_CODE_DEVICE_NOT_EXIST);
  EXPECT_EQ(vnpu_count(), 1);
}

TEST_F(DcmiApiTest, DestroyAllRemovesEveryVnpuOfTheDeviceOnly) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  dcmi_create_vdev_out out{};
  auto req = vdev_request("vir05_1c_16g");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(api_.create_vdevice(2, 0, &req, &out), DCMI_OK);
  ASSERT_EQ(api_.create_vdevice(3, 0, &req, &out), DCMI_OK);
  ASSERT_EQ(api_.destroy_vdevice(2, 0, DCMI_VDEV_ID_ALL), DCMI_OK);
  auto s = *host_.emu().snapshot();
  ASSERT_EQ(s.vnpus.size(), 1U);
  EXPECT_EQ(s.vnpus[0].phy_id, 3);
  EXPECT_EQ(api_.destroy_vdevice(2, 0, DCMI_VDEV_ID_ALL), DCMI_OK);  // nothing left: still fine
}

// DCMI and npu-smi creating on one chip at once: the state lock and one capacity rule let exactly four
// vir05_1c_16g (5 of 20 AICore each) through, whoever asks.
// dcmi_get_device_info answers per chip: a vNPU of another chip is not found on this one, a destroyed one
// leaves the listing, and a refused call leaves *size as the caller gave it.
TEST_F(DcmiApiTest, VnpuQueriesArePerChip) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  auto req = vdev_request("vir10_3c_32g");
  dcmi_create_vdev_out out{};
  ASSERT_EQ(api_.create_vdevice(1, 0, &req, &out), DCMI_OK);
  ASSERT_EQ(out.vdev_id, 116U);  // reference vNPU table: phy 1's range starts at 116

  dcmi_vdev_query_stru q{};
  q.vdev_id = 116;
  unsigned int size = sizeof q;
  EXPECT_EQ(api_.device_info(0, 0, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &size),
            DCMI_ERR_CODE_DEVICE_NOT_EXIST);
  EXPECT_EQ(size, sizeof q);
  ASSERT_EQ(api_.device_info(1, 0, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &size),
            DCMI_OK);
  EXPECT_STREQ(q.query_info.name, "vir10_3c_32g");
  EXPECT_EQ(q.vdev_id, 116U);

  dcmi_soc_total_resource total{};
  size = sizeof total + 16;  // a larger buffer is fine; *size then says what was written
  ASSERT_EQ(
      api_.device_info(1, 0, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, &size),
      DCMI_OK);
  EXPECT_EQ(size, sizeof total);
  EXPECT_EQ(total.vdev_num, 1U);
  EXPECT_EQ(total.vdev_id[0], 116U);
  ASSERT_EQ(api_.destroy_vdevice(1, 0, 116), DCMI_OK);
  ASSERT_EQ(
      api_.device_info(1, 0, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, &size),
      DCMI_OK);
  EXPECT_EQ(total.vdev_num, 0U);
  size = sizeof q;
  EXPECT_EQ(api_.device_info(1, 0, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &size),
            DCMI_ERR_CODE_DEVICE_NOT_EXIST);
}

TEST_F(DcmiApiTest, ConcurrentCreatesWithNpuSmiNeverOverCommit) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  threads.reserve(7);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      auto req = vdev_request("vir05_1c_16g");
      dcmi_create_vdev_out out{};
      if (api_.create_vdevice(0, 0, &req, &out) == DCMI_OK) made++;
    });
  }
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      auto r = ascend::testing::run_command(
          {kNpuSmi, "set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir05_1c_16g"},
          {"ASCEND_SIM_ROOT=" + host_.root()});
      if (r.exit_code == 0) made++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 4);
  EXPECT_EQ(vnpu_count(), 4);
}

TEST_F(DcmiApiTest, FindsItsHostFromWhereItIsInstalled) {
  ::unsetenv("ASCEND_SIM_ROOT");
  DcmiLibrary installed(testing::built_libdcmi(), host_.root() + "/usr/local/dcmi/libdcmi.so");
  DcmiApi api(installed);
  ASSERT_EQ(api.init(), DCMI_OK);
  int n = 0;
  int cards[MAX_CARD_NUM];
  ASSERT_EQ(api.card_num_list(&n, cards, MAX_CARD_NUM), DCMI_OK);
  EXPECT_EQ(n, 8);
  // The driver tree's copy finds the same host.
  DcmiLibrary driver(testing::built_libdcmi(),
                     host_.root() + "/usr/local/Ascend/driver/lib64/driver/libdcmi.so");
  EXPECT_EQ(DcmiApi(driver).init(), DCMI_OK);
}

// Self-contained: the emulator is inside, only the DCMI API is visible, and nothing but the C/C++
// runtime is needed (what a vendor tool in a minimal container can load).
TEST(DcmiLibraryTest, ExportsOnlyTheDcmiApiAndNeedsOnlyTheCRuntime) {
  auto nm = ascend::testing::run_command({"nm", "-D", "--defined-only", testing::built_libdcmi()});
  auto readelf = ascend::testing::run_command({"readelf", "-d", testing::built_libdcmi()});
  if (nm.exit_code == 127 || readelf.exit_code == 127) GTEST_SKIP() << "binutils (nm, readelf) not installed";
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  std::istringstream syms(nm.out);
  std::string line;
  int exported = 0;
  while (std::getline(syms, line)) {
    auto name = line.substr(line.rfind(' ') + 1);
    EXPECT_EQ(name.rfind("dcmi_", 0), 0U) << line;
    exported++;
  }
  // Exactly the functions the public header declares.
  std::ifstream header(std::string(ASCEND_DCMI_HEADER));
  std::string text((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
  int declared = 0;
  for (std::size_t at = text.find("DCMIDLLEXPORT int dcmi_"); at != std::string::npos;
       at = text.find("DCMIDLLEXPORT int dcmi_", at + 1))
    declared++;
  EXPECT_EQ(declared, 27);  // init, 2 card lists, 5 ids, 14 chip queries, 2 vNPU calls, info, version, mode
  EXPECT_EQ(exported, declared);
  ASSERT_EQ(readelf.exit_code, 0) << readelf.err;
  std::istringstream dynamic(readelf.out);
  while (std::getline(dynamic, line)) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    const bool runtime =
        line.find("[libc.so") != std::string::npos || line.find("[libm.so") != std::string::npos ||
        line.find("[libstdc++.so") != std::string::npos || line.find("[libgcc_s.so") != std::string::npos;
    EXPECT_TRUE(runtime) << line;
  }
}

class DcmiApi310PTest : public DcmiApiTest {
 protected:
  DcmiApi310PTest() : DcmiApiTest("atlas300i-duo") {}
};

// Atlas 300I Duo: two 310P3 per card, no HBM (npu-smi shows none).
TEST_F(DcmiApi310PTest, TwoChipsPerCardAndNoHbm) {
  ASSERT_EQ(api_.init(), DCMI_OK);
  int n = 0;
  ASSERT_EQ(api_.device_num_in_card(0, &n), DCMI_OK);
  EXPECT_EQ(n, 2);
  dcmi_hbm_info hbm{};
  EXPECT_EQ(api_.hbm_info(0, 1, &hbm), DCMI_ERR_CODE_NOT_SUPPORT);
  unsigned int u = 0;
  EXPECT_EQ(api_.utilization_rate(0, 1, DCMI_UTILIZATION_RATE_HBM, &u), DCMI_ERR_CODE_NOT_SUPPORT);
  int power = 0;  // npu-smi prints NA: the card's MCU reports the power, not the chip
  EXPECT_EQ(api_.power_info(0, 0, &power), DCMI_ERR_CODE_NOT_SUPPORT);
  int topo = -1;
  ASSERT_EQ(api_.topo(0, 0, 0, 1, &topo), DCMI_OK);
  EXPECT_EQ(topo, DCMI_TOPO_TYPE_PIX);  // the two chips of a card share its PCIe switch
}

}  // namespace
}  // namespace ascend::npu
