/*
 * A vendor-style DCMI client: plain C, compiled only against the public dcmi_interface_api.h, loading the
 * library with dlopen/dlsym as monitoring tools do. It prints what it sees, one fact per line, so that a
 * test can hold it against `npu-smi` of the same host and against the reference captures:
 *
 *   dcmi_client LIBDCMI [TEMPLATE]
 *
 *   init <rc>
 *   cards <n>: <id> ...
 *   card <c> devices <n> id_max <n> mcu <id> cpu <id>
 *   dev <c> <d> logic <id>
 *   dev <c> <d> chip <type> <name> <ver> aicore <n>
 *   dev <c> <d> health <0..3> errors <n> [<0xcode> ...]
 *   dev <c> <d> hbm <total MB> <used MB> freq <MHz> temp <C>
 *   dev <c> <d> memory <total MB> <available MB> util <pct> hugepages <total> <free>
 *   dev <c> <d> temp <C> aicore_util <pct> hbm_util <pct>
 *   dev <c> <d> pcie <vendor>:<device> <subvendor>:<subdevice> <domain>:<bus>:<dev>.<fn>
 *   dev <c> <d> affinity <cpus>
 *   dev <c> <d> ip <address> <netmask>
 *   topo <c1> <d1> <c2> <d2> <type>
 *   phy <phy id> logic <id>
 *   vnpu create <c> <d> <template> rc <rc> id <id>       (with TEMPLATE: on the first device, then)
 *   vnpu destroy <c> <d> <id> rc <rc>
 *
 * A call that fails prints "<what> rc <code>" in place of its values. Exit status: 0 when dcmi_init
 * succeeded, 1 otherwise, 2 on bad usage or a missing symbol.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "dcmi_interface_api.h"

#define MAX_DEVICES_PER_CARD 8

struct dcmi {
  int (*init)(void);
  int (*card_num_list)(int*, int*, int);
  int (*device_num_in_card)(int, int*);
  int (*device_id_in_card)(int, int*, int*, int*);
  int (*logic_id)(int*, int, int);
  int (*logicid_from_phyid)(unsigned int, unsigned int*);
  int (*chip_info)(int, int, struct dcmi_chip_info*);
  int (*health)(int, int, unsigned int*);
  int (*errorcode_v2)(int, int, int*, unsigned int*, unsigned int);
  int (*hbm_info)(int, int, struct dcmi_hbm_info*);
  int (*memory_info_v3)(int, int, struct dcmi_get_memory_info_stru*);
  int (*temperature)(int, int, int*);
  int (*utilization_rate)(int, int, int, unsigned int*);
  int (*pcie_info_v2)(int, int, struct dcmi_pcie_info_all*);
  int (*affinity)(int, int, char*, int*);
  int (*topo)(int, int, int, int, int*);
  int (*ip)(int, int, enum dcmi_port_type, int, struct dcmi_ip_addr*, struct dcmi_ip_addr*);
  int (*create_vdevice)(int, int, struct dcmi_create_vdev_res_stru*, struct dcmi_create_vdev_out*);
  int (*destroy_vdevice)(int, int, unsigned int);
};

/* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer, which C spells
 * with a memcpy to stay free of -Wpedantic warnings. */
static int resolve(void* lib, const char* name, void* slot, size_t size) {
  void* sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "dcmi_client: %s: %s\n", name, dlerror());
    return 0;
  }
  memcpy(slot, &sym, size);
  return 1;
}

#define RESOLVE(field, name) ok &= resolve(lib, name, &d->field, sizeof d->field)

static int load(void* lib, struct dcmi* d) {
  int ok = 1;
  RESOLVE(init, "dcmi_init");
  RESOLVE(card_num_list, "dcmi_get_card_num_list");
  RESOLVE(device_num_in_card, "dcmi_get_device_num_in_card");
  RESOLVE(device_id_in_card, "dcmi_get_device_id_in_card");
  RESOLVE(logic_id, "dcmi_get_device_logic_id");
  RESOLVE(logicid_from_phyid, "dcmi_get_device_logicid_from_phyid");
  RESOLVE(chip_info, "dcmi_get_device_chip_info");
  RESOLVE(health, "dcmi_get_device_health");
  RESOLVE(errorcode_v2, "dcmi_get_device_errorcode_v2");
  RESOLVE(hbm_info, "dcmi_get_device_hbm_info");
  RESOLVE(memory_info_v3, "dcmi_get_device_memory_info_v3");
  RESOLVE(temperature, "dcmi_get_device_temperature");
  RESOLVE(utilization_rate, "dcmi_get_device_utilization_rate");
  RESOLVE(pcie_info_v2, "dcmi_get_device_pcie_info_v2");
  RESOLVE(affinity, "dcmi_get_affinity_cpu_info_by_device_id");
  RESOLVE(topo, "dcmi_get_topo_info_by_device_id");
  RESOLVE(ip, "dcmi_get_device_ip");
  RESOLVE(create_vdevice, "dcmi_create_vdevice");
  RESOLVE(destroy_vdevice, "dcmi_set_destroy_vdevice");
  return ok;
}

static void print_device(const struct dcmi* d, int c, int dev) {
  int rc;
  int logic = -1;
  struct dcmi_chip_info chip;
  unsigned int health = 0;
  int count = 0;
  unsigned int codes[DCMI_ERROR_CODE_MAX_COUNT];
  struct dcmi_hbm_info hbm;
  struct dcmi_get_memory_info_stru mem;
  int temp = 0;
  unsigned int aicore = 0;
  unsigned int hbm_util = 0;
  struct dcmi_pcie_info_all pcie;
  char cpus[TOPO_INFO_MAX_LENTH];
  int len = 0;
  struct dcmi_ip_addr ip;
  struct dcmi_ip_addr mask;
  int i;

  rc = d->logic_id(&logic, c, dev);
  if (rc == DCMI_OK) {
    printf("dev %d %d logic %d\n", c, dev, logic);
  } else {
    printf("dev %d %d logic rc %d\n", c, dev, rc);
  }

  memset(&chip, 0, sizeof chip);
  rc = d->chip_info(c, dev, &chip);
  if (rc == DCMI_OK) {
    printf("dev %d %d chip %s %s %s aicore %u\n", c, dev, (const char*)chip.chip_type,
           (const char*)chip.chip_name, (const char*)chip.chip_ver, chip.aicore_cnt);
  } else {
    printf("dev %d %d chip rc %d\n", c, dev, rc);
  }

  rc = d->health(c, dev, &health);
  if (rc == DCMI_OK) rc = d->errorcode_v2(c, dev, &count, codes, DCMI_ERROR_CODE_MAX_COUNT);
  if (rc == DCMI_OK) {
    printf("dev %d %d health %u errors %d", c, dev, health, count);
    for (i = 0; i < count; ++i) printf(" 0x%08X", codes[i]);
    printf("\n");
  } else {
    printf("dev %d %d health rc %d\n", c, dev, rc);
  }

  rc = d->hbm_info(c, dev, &hbm);
  if (rc == DCMI_OK) {
    printf("dev %d %d hbm %llu %llu freq %u temp %d\n", c, dev, hbm.memory_size, hbm.memory_usage, hbm.freq,
           hbm.temp);
  } else {
    printf("dev %d %d hbm rc %d\n", c, dev, rc);
  }

  rc = d->memory_info_v3(c, dev, &mem);
  if (rc == DCMI_OK) {
    printf("dev %d %d memory %llu %llu util %u hugepages %lu %lu\n", c, dev, mem.memory_size,
           mem.memory_available, mem.utiliza, mem.hugepages_total, mem.hugepages_free);
  } else {
    printf("dev %d %d memory rc %d\n", c, dev, rc);
  }

  rc = d->temperature(c, dev, &temp);
  if (rc == DCMI_OK) rc = d->utilization_rate(c, dev, DCMI_UTILIZATION_RATE_AICORE, &aicore);
  if (rc == DCMI_OK) rc = d->utilization_rate(c, dev, DCMI_UTILIZATION_RATE_HBM, &hbm_util);
  if (rc == DCMI_OK) {
    printf("dev %d %d temp %d aicore_util %u hbm_util %u\n", c, dev, temp, aicore, hbm_util);
  } else {
    printf("dev %d %d temp rc %d\n", c, dev, rc);
  }

  rc = d->pcie_info_v2(c, dev, &pcie);
  if (rc == DCMI_OK) {
    printf("dev %d %d pcie %04x:%04x %04x:%04x %04x:%02x:%02x.%x\n", c, dev, pcie.venderid, pcie.deviceid,
           pcie.subvenderid, pcie.subdeviceid, (unsigned int)pcie.domain, pcie.bdf_busid, pcie.bdf_deviceid,
           pcie.bdf_funcid);
  } else {
    printf("dev %d %d pcie rc %d\n", c, dev, rc);
  }

  rc = d->affinity(c, dev, cpus, &len);
  if (rc == DCMI_OK) {
    printf("dev %d %d affinity %s\n", c, dev, len > 0 ? cpus : "-");
  } else {
    printf("dev %d %d affinity rc %d\n", c, dev, rc);
  }

  rc = d->ip(c, dev, DCMI_ROCE_PORT, 0, &ip, &mask);
  if (rc == DCMI_OK) {
    printf("dev %d %d ip %u.%u.%u.%u %u.%u.%u.%u\n", c, dev, ip.u_addr.ip4[0], ip.u_addr.ip4[1],
           ip.u_addr.ip4[2], ip.u_addr.ip4[3], mask.u_addr.ip4[0], mask.u_addr.ip4[1], mask.u_addr.ip4[2],
           mask.u_addr.ip4[3]);
  } else {
    printf("dev %d %d ip rc %d\n", c, dev, rc);
  }
}

int main(int argc, char** argv) {
  void* lib;
  struct dcmi d;
  int rc;
  int cards[MAX_CARD_NUM];
  int ncards = 0;
  int ndev[MAX_CARD_NUM];
  int i, j, k, l;
  unsigned int phy;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: dcmi_client LIBDCMI [TEMPLATE]\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dcmi_client: %s\n", dlerror());
    return 2;
  }
  memset(&d, 0, sizeof d);
  if (!load(lib, &d)) return 2;

  rc = d.init();
  printf("init %d\n", rc);
  if (rc != DCMI_OK) return 1;

  rc = d.card_num_list(&ncards, cards, MAX_CARD_NUM);
  if (rc != DCMI_OK) {
    printf("cards rc %d\n", rc);
    return 0;
  }
  printf("cards %d:", ncards);
  for (i = 0; i < ncards; ++i) printf(" %d", cards[i]);
  printf("\n");

  for (i = 0; i < ncards; ++i) {
    int id_max = 0, mcu = 0, cpu = 0;
    ndev[i] = 0;
    rc = d.device_num_in_card(cards[i], &ndev[i]);
    if (rc == DCMI_OK) rc = d.device_id_in_card(cards[i], &id_max, &mcu, &cpu);
    if (rc != DCMI_OK) {
      printf("card %d rc %d\n", cards[i], rc);
      ndev[i] = 0;
      continue;
    }
    if (ndev[i] > MAX_DEVICES_PER_CARD) ndev[i] = MAX_DEVICES_PER_CARD;
    printf("card %d devices %d id_max %d mcu %d cpu %d\n", cards[i], ndev[i], id_max, mcu, cpu);
    for (j = 0; j < ndev[i]; ++j) print_device(&d, cards[i], j);
  }

  for (i = 0; i < ncards; ++i) {
    for (j = 0; j < ndev[i]; ++j) {
      for (k = 0; k < ncards; ++k) {
        for (l = 0; l < ndev[k]; ++l) {
          int topo = -1;
          rc = d.topo(cards[i], j, cards[k], l, &topo);
          if (rc == DCMI_OK) {
            printf("topo %d %d %d %d %d\n", cards[i], j, cards[k], l, topo);
          } else {
            printf("topo %d %d %d %d rc %d\n", cards[i], j, cards[k], l, rc);
          }
        }
      }
    }
  }

  for (phy = 0; phy < MAX_CARD_NUM; ++phy) {
    unsigned int logic = 0;
    if (d.logicid_from_phyid(phy, &logic) == DCMI_OK) printf("phy %u logic %u\n", phy, logic);
  }

  if (argc == 3 && ncards > 0 && ndev[0] > 0) {
    struct dcmi_create_vdev_res_stru in;
    struct dcmi_create_vdev_out out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.vdev_id = DCMI_VDEV_ID_AUTO;
    in.vfg_id = DCMI_VDEV_ID_AUTO;
    strncpy(in.template_name, argv[2], sizeof in.template_name - 1);
    rc = d.create_vdevice(cards[0], 0, &in, &out);
    printf("vnpu create %d 0 %s rc %d id %u\n", cards[0], in.template_name, rc, out.vdev_id);
    if (rc == DCMI_OK) {
      rc = d.destroy_vdevice(cards[0], 0, out.vdev_id);
      printf("vnpu destroy %d 0 %u rc %d\n", cards[0], out.vdev_id, rc);
    }
  }
  dlclose(lib);
  return 0;
}
