/*
 * A vendor-style DCMI client for vNPUs: plain C, compiled only against the public dcmi_interface_api.h,
 * loading the library with dlopen. It lists every chip's vNPUs the way npu-smi's `info -t info-vnpu` does
 * (DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, _GET_FREE_RESOURCE, then _GET_VDEV_RESOURCE per listed id) and
 * tries the error paths on one chip, printing one fact per line for a test to hold against npu-smi and the
 * reference captures:
 *
 *   dcmi_vnpu_client LIBDCMI CARD DEVICE [TEMPLATE ...]
 *
 *   init <rc>
 *   create <card> <device> <template> rc <rc> id <vdev_id>        (each TEMPLATE, on CARD/DEVICE)
 *   chip <c> <d> vnpus <n>: <id> ...
 *   chip <c> <d> resources aic <free>/<total> mem <free MB>/<total MB> aicpu <f>/<t> vpc <f>/<t>
 *        venc <f>/<t> vdec <f>/<t> jpegd <f>/<t> jpege <f>/<t> pngd <f>/<t>     (one line)
 *   chip <c> <d> sizes <total> <free>                               (the *size each call reported)
 *   vnpu <c> <d> <id> name <template> status <s> used <0|1> container <%012llx> vgroup <base.vfg_id>
 *        vfg <vfg_id> aic <n> mem <MB> aicpu <n> vpc <n> venc <n> vdec <n> jpegd <n> jpege <n> pngd <n>
 *   error <what> rc <rc>                                            (the error paths, on CARD/DEVICE)
 *
 * A value the library reports as NA (-1.0 for a unit count, all bits set for memory and AICPU, as npu-smi
 * reads them) prints as NA. A failing call prints "<what> rc <code>" in place of its values. Exit status:
 * 0 when dcmi_init succeeded, 1 otherwise, 2 on bad usage or a missing symbol.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcmi_interface_api.h"

#define MAX_DEVICES_PER_CARD 8

/* The layouts on LP64, as the library pins them too: a header edit that moves a field fails here. */
#if defined(__LP64__)
_Static_assert(sizeof(struct dcmi_vdev_query_stru) == 264, "dcmi_vdev_query_stru layout");
_Static_assert(sizeof(struct dcmi_soc_total_resource) == 360, "dcmi_soc_total_resource layout");
_Static_assert(sizeof(struct dcmi_soc_free_resource) == 224, "dcmi_soc_free_resource layout");
#endif

struct dcmi {
  int (*init)(void);
  int (*card_num_list)(int*, int*, int);
  int (*device_num_in_card)(int, int*);
  int (*create_vdevice)(int, int, struct dcmi_create_vdev_res_stru*, struct dcmi_create_vdev_out*);
  int (*device_info)(int, int, enum dcmi_main_cmd, unsigned int, void*, unsigned int*);
};

static int resolve(void* lib, const char* name, void* slot, size_t size) {
  void* sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "dcmi_vnpu_client: %s: %s\n", name, dlerror());
    return 0;
  }
  memcpy(slot, &sym, size); /* object to function pointer without a -Wpedantic warning */
  return 1;
}

#define RESOLVE(field, name) ok &= resolve(lib, name, &d->field, sizeof d->field)

static int load(void* lib, struct dcmi* d) {
  int ok = 1;
  RESOLVE(init, "dcmi_init");
  RESOLVE(card_num_list, "dcmi_get_card_num_list");
  RESOLVE(device_num_in_card, "dcmi_get_device_num_in_card");
  RESOLVE(create_vdevice, "dcmi_create_vdevice");
  RESOLVE(device_info, "dcmi_get_device_info");
  return ok;
}

/* "<free>/<total>" of a unit count, NA/NA when the chip reports NA. */
static void units(const char* what, float free_units, float total_units) {
  if (free_units == -1.0F) {
    printf(" %s NA/NA", what);
  } else {
    printf(" %s %.0f/%.0f", what, (double)free_units, (double)total_units);
  }
}

static void print_chip(const struct dcmi* d, int c, int dev) {
  struct dcmi_soc_total_resource total;
  struct dcmi_soc_free_resource free_res;
  unsigned int total_size = sizeof total;
  unsigned int free_size = sizeof free_res;
  unsigned int i;
  int rc;

  memset(&total, 0, sizeof total);
  memset(&free_res, 0, sizeof free_res);
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total,
                      &total_size);
  if (rc != DCMI_OK) {
    printf("chip %d %d total rc %d\n", c, dev, rc);
    return;
  }
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE, &free_res,
                      &free_size);
  if (rc != DCMI_OK) {
    printf("chip %d %d free rc %d\n", c, dev, rc);
    return;
  }
  printf("chip %d %d vnpus %u:", c, dev, total.vdev_num);
  for (i = 0; i < total.vdev_num && i < DCMI_SOC_SPLIT_MAX; ++i) printf(" %u", total.vdev_id[i]);
  printf("\n");

  printf("chip %d %d resources", c, dev);
  units("aic", free_res.computing.aic, total.computing.aic);
  if (free_res.computing.memory_size == ~0ULL) {
    printf(" mem NA/NA");
  } else {
    printf(" mem %llu/%llu", free_res.computing.memory_size, total.computing.memory_size);
  }
  if (free_res.computing.device_aicpu == 0xFFFF) {
    printf(" aicpu NA/NA");
  } else {
    printf(" aicpu %u/%u", (unsigned int)free_res.computing.device_aicpu,
           (unsigned int)total.computing.device_aicpu);
  }
  units("vpc", free_res.media.vpc, total.media.vpc);
  units("venc", free_res.media.venc, total.media.venc);
  units("vdec", free_res.media.vdec, total.media.vdec);
  units("jpegd", free_res.media.jpegd, total.media.jpegd);
  units("jpege", free_res.media.jpege, total.media.jpege);
  units("pngd", free_res.media.pngd, total.media.pngd);
  printf("\n");
  printf("chip %d %d sizes %u %u\n", c, dev, total_size, free_size);

  for (i = 0; i < total.vdev_num && i < DCMI_SOC_SPLIT_MAX; ++i) {
    struct dcmi_vdev_query_stru q;
    const struct dcmi_vdev_query_info* v = &q.query_info;
    unsigned int size = sizeof q;
    memset(&q, 0, sizeof q);
    q.vdev_id = total.vdev_id[i];
    rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &size);
    if (rc != DCMI_OK) {
      printf("vnpu %d %d %u rc %d\n", c, dev, total.vdev_id[i], rc);
      continue;
    }
    printf("vnpu %d %d %u name %.*s status %u used %u container %012llx vgroup %u vfg %u", c, dev, q.vdev_id,
           DCMI_VDEV_RES_NAME_LEN, v->name, v->status, v->is_container_used, v->container_id, v->base.vfg_id,
           v->vfg_id);
    printf(" aic %.0f mem %llu aicpu %u vpc %.0f venc %.0f vdec %.0f jpegd %.0f jpege %.0f pngd %g size %u\n",
           (double)v->computing.aic, v->computing.memory_size, (unsigned int)v->computing.device_aicpu,
           (double)v->media.vpc, (double)v->media.venc, (double)v->media.vdec, (double)v->media.jpegd,
           (double)v->media.jpege, (double)v->media.pngd, size);
  }
}

static void print_errors(const struct dcmi* d, int c, int dev) {
  struct dcmi_soc_total_resource total;
  struct dcmi_vdev_query_stru q;
  unsigned int size;
  int rc;

  memset(&total, 0, sizeof total);
  size = sizeof total - 1;
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, &size);
  printf("error small_total rc %d size %u\n", rc, size);

  memset(&q, 0, sizeof q);
  q.vdev_id = 99; /* below every chip's range (100 + 16*phy ..) */
  size = sizeof q - 1;
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &size);
  printf("error small_vdev rc %d\n", rc);

  size = sizeof q;
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE, &q, &size);
  printf("error unknown_vdev rc %d\n", rc);

  size = sizeof total;
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, 77, &total, &size);
  printf("error unknown_sub rc %d\n", rc);

  size = sizeof total;
  rc = d->device_info(c, dev, DCMI_MAIN_CMD_DVPP, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, &size);
  printf("error unknown_main rc %d\n", rc);

  rc = d->device_info(c, dev, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, NULL);
  printf("error null_size rc %d\n", rc);

  size = sizeof total;
  rc = d->device_info(c, MAX_DEVICES_PER_CARD, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE,
                      &total, &size);
  printf("error unknown_device rc %d\n", rc);
}

int main(int argc, char** argv) {
  void* lib;
  struct dcmi d;
  int rc;
  int cards[MAX_CARD_NUM];
  int ncards = 0;
  int card, device;
  int i, j;

  if (argc < 4) {
    fprintf(stderr, "usage: dcmi_vnpu_client LIBDCMI CARD DEVICE [TEMPLATE ...]\n");
    return 2;
  }
  card = atoi(argv[2]);
  device = atoi(argv[3]);
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dcmi_vnpu_client: %s\n", dlerror());
    return 2;
  }
  memset(&d, 0, sizeof d);
  if (!load(lib, &d)) return 2;

  rc = d.init();
  printf("init %d\n", rc);
  if (rc != DCMI_OK) return 1;

  for (i = 4; i < argc; ++i) {
    struct dcmi_create_vdev_res_stru in;
    struct dcmi_create_vdev_out out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.vdev_id = DCMI_VDEV_ID_AUTO;
    in.vfg_id = DCMI_VDEV_ID_AUTO;
    strncpy(in.template_name, argv[i], sizeof in.template_name - 1);
    rc = d.create_vdevice(card, device, &in, &out);
    printf("create %d %d %s rc %d id %u\n", card, device, in.template_name, rc, out.vdev_id);
  }

  rc = d.card_num_list(&ncards, cards, MAX_CARD_NUM);
  if (rc != DCMI_OK) {
    printf("cards rc %d\n", rc);
    ncards = 0;
  }
  for (i = 0; i < ncards; ++i) {
    int ndev = 0;
    if (d.device_num_in_card(cards[i], &ndev) != DCMI_OK) continue;
    for (j = 0; j < ndev && j < MAX_DEVICES_PER_CARD; ++j) print_chip(&d, cards[i], j);
  }
  print_errors(&d, card, device);
  dlclose(lib);
  return 0;
}
