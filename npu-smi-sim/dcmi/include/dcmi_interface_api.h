/*
 * The DCMI (Device Control Management Interface) C API of an Ascend host, as the emulated libdcmi.so of
 * this project offers it: the subset that the device query seam needs, declared from Huawei's public
 * "Ascend 910B DCMI API reference" (one page per function). Names, signatures, field order and constants
 * follow that reference; where older vendor headers differ (an older dcmi_create_vdevice took a template
 * name directly), the 910B reference wins. See npu-smi-sim/dcmi/REFERENCE.md for the page behind every
 * declaration and for what was assumed where the reference is silent.
 *
 * Plain C (C99 and later, and C++): a vendor tool includes this header and links or dlopens libdcmi.so.
 * Every function returns DCMI_OK (0) or one of the negative DCMI_ERR_CODE_* values below. Call dcmi_init
 * once before anything else. Every function may be called from any thread.
 *
 * Identifiers: a card_id is an NPU management unit as dcmi_get_card_num_list lists it (the NPU column of
 * `npu-smi info`); a device_id is a chip of that card, 0 .. device_num-1 (the Chip column).
 */
#ifndef ASCEND_SIM_DCMI_INTERFACE_API_H
#define ASCEND_SIM_DCMI_INTERFACE_API_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DCMIDLLEXPORT __attribute__((visibility("default")))
#else
#define DCMIDLLEXPORT
#endif

/* ---- return codes (reference: "返回码" / return codes page) ------------------------------------------- */
#define DCMI_OK 0
#define DCMI_ERR_CODE_INVALID_PARAMETER (-8001)        /* a parameter is wrong (NULL, range, name)  */
#define DCMI_ERR_CODE_OPER_NOT_PERMITTED (-8002)       /* the caller may not do this                */
#define DCMI_ERR_CODE_MEM_OPERATE_FAIL (-8003)         /* a memory operation failed                 */
#define DCMI_ERR_CODE_SECURE_FUN_FAIL (-8004)          /* a secure C function failed                */
#define DCMI_ERR_CODE_INNER_ERR (-8005)                /* internal error (also: init failed)        */
#define DCMI_ERR_CODE_TIME_OUT (-8006)                 /* no answer in time                         */
#define DCMI_ERR_CODE_INVALID_DEVICE_ID (-8007)        /* no such card_id / device_id               */
#define DCMI_ERR_CODE_DEVICE_NOT_EXIST (-8008)         /* the device (or vNPU) does not exist       */
#define DCMI_ERR_CODE_IOCTL_FAIL (-8009)               /* an ioctl failed                           */
#define DCMI_ERR_CODE_SEND_MSG_FAIL (-8010)            /* sending a message failed                  */
#define DCMI_ERR_CODE_RECV_MSG_FAIL (-8011)            /* receiving a message failed                */
#define DCMI_ERR_CODE_NOT_REDAY (-8012)                /* not ready yet, retry (sic, the name used) */
#define DCMI_ERR_CODE_NOT_SUPPORT_IN_CONTAINER (-8013) /* not available inside a container          */
#define DCMI_ERR_CODE_RESET_FAIL (-8015)               /* reset failed                              */
#define DCMI_ERR_CODE_ABORT_OPERATE (-8016)            /* reset cancelled                           */
#define DCMI_ERR_CODE_IS_UPGRADING (-8017)             /* an upgrade is running                     */
#define DCMI_ERR_CODE_RESOURCE_OCCUPIED (-8020)        /* the device's resources are taken          */
#define DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST (-8023)    /* the configuration asked for is not set    */
#define DCMI_ERR_CODE_NOT_SUPPORT (-8255)              /* not supported on this device              */

/* ---- sizes -------------------------------------------------------------------------------------------- */
#define MAX_CARD_NUM 64        /* a host has at most 64 cards                                  */
#define MAX_CHIP_NAME_LEN 32   /* chip_type / chip_name / chip_ver, NUL-terminated              */
#define TOPO_INFO_MAX_LENTH 32 /* the affinity string buffer the reference's example passes    */
#define DCMI_VDEV_FOR_RESERVE 32
#define DCMI_ERROR_CODE_MAX_COUNT 128 /* dcmi_get_device_errorcode_v2 reports 0..128 codes          */

/* A vdev_id / vfg_id of this value lets the driver choose (the lowest free id).                         */
#define DCMI_VDEV_ID_AUTO 0xFFFFFFFFU
/* dcmi_set_destroy_vdevice with this vdevid destroys every vNPU of the device.                          */
#define DCMI_VDEV_ID_ALL 65535U

/* ---- health (dcmi_get_device_health) ------------------------------------------------------------------ */
#define DCMI_HEALTH_OK 0U                 /* normal                                               */
#define DCMI_HEALTH_MINOR 1U              /* minor alarm      (npu-smi: Warning)                  */
#define DCMI_HEALTH_MAJOR 2U              /* major alarm      (npu-smi: Alarm)                    */
#define DCMI_HEALTH_CRITICAL 3U           /* critical alarm   (npu-smi: Critical)                 */
#define DCMI_HEALTH_NOT_EXIST 0xFFFFFFFFU /* the device does not exist                        */

/* ---- dcmi_get_device_utilization_rate input_type ------------------------------------------------------ */
#define DCMI_UTILIZATION_RATE_MEMORY 1
#define DCMI_UTILIZATION_RATE_AICORE 2
#define DCMI_UTILIZATION_RATE_AICPU 3
#define DCMI_UTILIZATION_RATE_CTRLCPU 4
#define DCMI_UTILIZATION_RATE_MEMORY_BANDWIDTH 5
#define DCMI_UTILIZATION_RATE_HBM 6
#define DCMI_UTILIZATION_RATE_DDR 8
#define DCMI_UTILIZATION_RATE_HBM_BANDWIDTH 10
#define DCMI_UTILIZATION_RATE_VECTOR_CORE 12
#define DCMI_UTILIZATION_RATE_NPU 13

/* ---- dcmi_get_device_network_health: the RoCE port's detection result ([200I A2] api_074) ------------- */
enum dcmi_rdfx_detect_result {
  DCMI_RDFX_DETECT_OK = 0,            /* the network is healthy                                       */
  DCMI_RDFX_DETECT_SOCK_FAIL = 1,     /* the socket could not be created                              */
  DCMI_RDFX_DETECT_RECV_TIMEOUT = 2,  /* no packet received in time                                  */
  DCMI_RDFX_DETECT_UNREACH = 3,       /* the detection address is unreachable                         */
  DCMI_RDFX_DETECT_TIME_EXCEEDED = 4, /* sending the detection packet timed out                       */
  DCMI_RDFX_DETECT_FAULT = 5,         /* sending the detection packet failed                          */
  DCMI_RDFX_DETECT_INIT = 6,          /* the detection task is starting                               */
  DCMI_RDFX_DETECT_THREAD_ERR = 7,    /* the detection task could not be created                      */
  DCMI_RDFX_DETECT_IP_SET = 8,        /* the detection address is being set                           */
  DCMI_RDFX_DETECT_MAX = 0xFF
};

/* ---- dcmi_get_device_die_v2 ([200I A2] api_021) -------------------------------------------------------- */
#define DIE_ID_COUNT 5
enum dcmi_die_type { NDIE, VDIE }; /* the reference: NDIE is not supported */
struct dcmi_die_id {
  unsigned int soc_die[DIE_ID_COUNT];
};

/* ---- structures --------------------------------------------------------------------------------------- */

/* dcmi_get_device_chip_info: chip_type "Ascend", chip_name e.g. "910B3", chip_ver e.g. "V1". */
struct dcmi_chip_info {
  unsigned char chip_type[MAX_CHIP_NAME_LEN];
  unsigned char chip_name[MAX_CHIP_NAME_LEN];
  unsigned char chip_ver[MAX_CHIP_NAME_LEN];
  unsigned int aicore_cnt;
};

/* dcmi_get_device_hbm_info: sizes in MB, frequency in MHz. */
struct dcmi_hbm_info {
  unsigned long long memory_size;
  unsigned int freq;
  unsigned long long memory_usage;
  int temp;
  unsigned int bandwith_util_rate; /* (sic) */
};

/* dcmi_get_device_memory_info_v3: the chip's DDR. memory_size in MB; memory_available = free +
 * hugepages_free * hugepagesize; hugepagesize in KB. */
struct dcmi_get_memory_info_stru {
  unsigned long long memory_size;
  unsigned long long memory_available;
  unsigned int freq;
  unsigned long hugepagesize;
  unsigned long hugepages_total;
  unsigned long hugepages_free;
  unsigned int utiliza;
  unsigned char reserve[60];
};

/* dcmi_get_device_pcie_info_v2: the PCI identity and address (domain:bus:device.function). */
struct dcmi_pcie_info_all {
  unsigned int venderid; /* (sic) */
  unsigned int subvenderid;
  unsigned int deviceid;
  unsigned int subdeviceid;
  int domain;
  unsigned int bdf_busid;
  unsigned int bdf_deviceid;
  unsigned int bdf_funcid;
  unsigned char reserve[32];
};

/* dcmi_get_topo_info_by_device_id: how two devices are connected (npu-smi info -t topo). */
enum dcmi_topo_type {
  DCMI_TOPO_TYPE_SELF = 0, /* the same device                                       */
  DCMI_TOPO_TYPE_SYS,      /* PCIe across NUMA nodes (SMP: QPI, UPI)                */
  DCMI_TOPO_TYPE_PHB,      /* PCIe through one CPU's PCIe host bridge               */
  DCMI_TOPO_TYPE_HCCS,     /* HCCS                                                  */
  DCMI_TOPO_TYPE_PXB,      /* PCIe through several PCIe switches                    */
  DCMI_TOPO_TYPE_PIX,      /* PCIe through one PCIe switch                          */
  DCMI_TOPO_TYPE_BUTT = 6, /* unknown                                               */
  DCMI_TOPO_TYPE_MAX
};

/* dcmi_get_device_ip */
enum dcmi_port_type {
  DCMI_VNIC_PORT = 0, /* virtual NIC */
  DCMI_ROCE_PORT = 1, /* RoCE NIC    */
  DCMI_INVALID_PORT
};

enum dcmi_ip_addr_type { DCMI_IPADDR_TYPE_V4 = 0, DCMI_IPADDR_TYPE_V6 = 1, DCMI_IPADDR_TYPE_ANY = 2 };

struct dcmi_ip_addr {
  union {
    unsigned char ip6[16];
    unsigned char ip4[4]; /* network order: 10.100.0.1 is {10, 100, 0, 1} */
  } u_addr;
  enum dcmi_ip_addr_type ip_type;
};

/* dcmi_create_vdevice input: vdev_id DCMI_VDEV_ID_AUTO picks the lowest free id; vfg_id is reserved
 * (DCMI_VDEV_ID_AUTO); template_name is a template of `npu-smi info -t template-info`. */
struct dcmi_create_vdev_res_stru {
  unsigned int vdev_id;
  unsigned int vfg_id;
  char template_name[32];
  unsigned char reserved[64];
};

/* dcmi_create_vdevice output: only vdev_id is filled; the other fields are reserved. */
struct dcmi_create_vdev_out {
  unsigned int vdev_id;
  unsigned int pcie_bus;
  unsigned int pcie_device;
  unsigned int pcie_func;
  unsigned int vfg_id;
  unsigned char reserved[DCMI_VDEV_FOR_RESERVE];
};

/* ---- dcmi_get_device_info ----------------------------------------------------------------------------- */

/* The module a dcmi_get_device_info query addresses (values as the 910B reference's enum numbers them; the
 * emulation answers DCMI_MAIN_CMD_VDEV_MNG only). */
enum dcmi_main_cmd {
  DCMI_MAIN_CMD_DVPP = 0,
  DCMI_MAIN_CMD_ISP = 1,
  DCMI_MAIN_CMD_TS_GROUP_NUM = 2,
  DCMI_MAIN_CMD_CAN = 3,
  DCMI_MAIN_CMD_UART = 4,
  DCMI_MAIN_CMD_UPGRADE = 5,
  DCMI_MAIN_CMD_UFS = 6,
  DCMI_MAIN_CMD_OS_POWER = 7,
  DCMI_MAIN_CMD_LP = 8,
  DCMI_MAIN_CMD_MEMORY = 9,
  DCMI_MAIN_CMD_RECOVERY = 10,
  DCMI_MAIN_CMD_TS = 11,
  DCMI_MAIN_CMD_CHIP_INF = 12,
  DCMI_MAIN_CMD_QOS = 13,
  DCMI_MAIN_CMD_SOC_INFO = 14,
  DCMI_MAIN_CMD_SILS = 15,
  DCMI_MAIN_CMD_HCCS = 16,
  DCMI_MAIN_CMD_TEMP = 50,
  DCMI_MAIN_CMD_SVM = 51,
  DCMI_MAIN_CMD_VDEV_MNG = 52, /* vNPU management: the DCMI_VMNG_SUB_CMD_* below */
  DCMI_MAIN_CMD_SEC = 53,
  DCMI_MAIN_CMD_PCIE = 55,
  DCMI_MAIN_CMD_SIO = 56,
  DCMI_MAIN_CMD_EX_COMPUTING = 0x8000,
  DCMI_MAIN_CMD_DEVICE_SHARE = 0x8001,
  DCMI_MAIN_CMD_EX_CERT = 0x8003,
  DCMI_MAIN_CMD_MAX
};

/* sub_cmd of DCMI_MAIN_CMD_VDEV_MNG, and the buffer each one fills. */
typedef enum {
  DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE = 0,  /* struct dcmi_vdev_query_stru: one vNPU (vdev_id is the input) */
  DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE = 1, /* struct dcmi_soc_total_resource: the chip's vNPUs and totals  */
  DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE = 2,  /* struct dcmi_soc_free_resource: what is left for new vNPUs    */
  DCMI_VMNG_SUB_CMD_SET_SRIOV_SWITCH = 3    /* dcmi_set_device_info only (not emulated)                    */
} DCMI_VDEV_MNG_SUB_CMD;

#define DCMI_VDEV_RES_NAME_LEN 16 /* dcmi_vdev_query_info.name, NUL-terminated                          */
#define DCMI_SOC_SPLIT_MAX 32     /* capacity of dcmi_soc_total_resource.vdev_id                         */
#define DCMI_VDEV_SIZE 20         /* bytes of the vNPU fields at the end of dcmi_computing_resource     */

/* Scheduling resources of a vNPU (or of the chip). Not modelled by the emulation except vfg_id. */
struct dcmi_base_resource {
  unsigned long long token;
  unsigned long long token_max;
  unsigned long long task_timeout;
  unsigned int vfg_id; /* the vNPU's group (npu-smi info -t info-vnpu "Vgroup ID")           */
  unsigned char vip_mode;
  unsigned char reserved[DCMI_VDEV_FOR_RESERVE - 1];
};

/* Computing resources. A chip-wide value that the chip cannot report is "NA": -1.0 for the floats,
 * all bits set for memory_size and the unsigned shorts. */
struct dcmi_computing_resource {
  float aic; /* AI Cores                                                                */
  float aiv;
  unsigned short dsa;
  unsigned short rtsq;
  unsigned short acsq;
  unsigned short cdqm;
  unsigned short c_core;
  unsigned short ffts;
  unsigned short sdma;
  unsigned short pcie_dma;
  unsigned long long memory_size; /* MB                                                      */
  unsigned int event_id;
  unsigned int notify_id;
  unsigned int stream_id;
  unsigned int model_id;
  unsigned short topic_schedule_aicpu;
  unsigned short host_ctrl_cpu;
  unsigned short host_aicpu;
  unsigned short device_aicpu; /* AI CPUs                                                   */
  unsigned short topic_ctrl_cpu_slot;
  unsigned int vdev_aicore_utilization; /* newer drivers; older ones keep these 20 bytes reserved */
  unsigned long long vdev_memory_total;
  unsigned long long vdev_memory_free;
  unsigned char reserved[DCMI_VDEV_FOR_RESERVE - DCMI_VDEV_SIZE];
};

/* Media (DVPP) units; NA is -1.0. */
struct dcmi_media_resource {
  float jpegd;
  float jpege;
  float vpc;
  float vdec;
  float pngd;
  float venc;
  unsigned char reserved[DCMI_VDEV_FOR_RESERVE];
};

/* One vNPU, as DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE reports it. */
struct dcmi_vdev_query_info {
  char name[DCMI_VDEV_RES_NAME_LEN]; /* the template it was made from, e.g. "vir10_3c_16g"    */
  unsigned int status;
  unsigned int is_container_used; /* 1: a container holds it (npu-smi info-vnpu "Status") */
  unsigned int vfid;
  unsigned int vfg_id;
  unsigned long long container_id; /* npu-smi prints it as %012llx ("Container ID")        */
  struct dcmi_base_resource base;
  struct dcmi_computing_resource computing;
  struct dcmi_media_resource media;
};

/* DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE: set vdev_id, then call; query_info is filled. */
struct dcmi_vdev_query_stru {
  unsigned int vdev_id;
  struct dcmi_vdev_query_info query_info;
};

/* DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE: what the chip still has for new vNPUs. */
struct dcmi_soc_free_resource {
  unsigned int vfg_num;
  unsigned int vfg_bitmap;
  struct dcmi_base_resource base;
  struct dcmi_computing_resource computing;
  struct dcmi_media_resource media;
};

/* DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE: the chip's vNPUs (vdev_id[0 .. vdev_num-1]) and its totals. */
struct dcmi_soc_total_resource {
  unsigned int vdev_num;
  unsigned int vdev_id[DCMI_SOC_SPLIT_MAX];
  unsigned int vfg_num;
  unsigned int vfg_bitmap;
  struct dcmi_base_resource base;
  struct dcmi_computing_resource computing;
  struct dcmi_media_resource media;
};

/* ---- functions ---------------------------------------------------------------------------------------- */

/* Opens the library on the host. Fails with DCMI_ERR_CODE_INNER_ERR when no host (or no device) is there. */
DCMIDLLEXPORT int dcmi_init(void);

/* The cards: *card_num of them, their ids in card_list[0 .. *card_num-1]; list_len is card_list's size. */
DCMIDLLEXPORT int dcmi_get_card_num_list(int* card_num, int* card_list, int list_len);
/* The newer name of dcmi_get_card_num_list (same behaviour). */
DCMIDLLEXPORT int dcmi_get_card_list(int* card_num, int* card_list, int list_len);

/* How many NPU chips the card holds. */
DCMIDLLEXPORT int dcmi_get_device_num_in_card(int card_id, int* device_num);

/* The card's chip count (device_id_max), its MCU id (-1: none) and control CPU id (-1). */
DCMIDLLEXPORT int dcmi_get_device_id_in_card(int card_id, int* device_id_max, int* mcu_id, int* cpu_id);

/* The logical id of a chip (npu-smi info -m "Chip Logic ID"). */
DCMIDLLEXPORT int dcmi_get_device_logic_id(int* device_logic_id, int card_id, int device_id);

/* The logical id of the chip whose physical id (/dev/davinci<phyid>) is phyid. */
DCMIDLLEXPORT int dcmi_get_device_logicid_from_phyid(unsigned int phyid, unsigned int* logicid);

/* The physical id (/dev/davinci<phyid>) of the chip whose logical id is logicid. */
DCMIDLLEXPORT int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int* phyid);

/* The driver's version, NUL-terminated (the reference passes 64 bytes). */
DCMIDLLEXPORT int dcmi_get_driver_version(char* driver_ver, unsigned int len);

/* The vNPU (AVI) mode of the host: 0 container mode, 1 virtual-machine mode. */
DCMIDLLEXPORT int dcmi_get_vdevice_mode(int* mode);

DCMIDLLEXPORT int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info* chip_info);

/* DCMI_HEALTH_OK .. DCMI_HEALTH_CRITICAL: the most severe alarm the chip has. */
DCMIDLLEXPORT int dcmi_get_device_health(int card_id, int device_id, unsigned int* health);

/* The chip's current fault codes: *error_count of them (0..128), at most list_len copied. */
DCMIDLLEXPORT int dcmi_get_device_errorcode_v2(int card_id, int device_id, int* error_count,
                                               unsigned int* error_code_list, unsigned int list_len);

DCMIDLLEXPORT int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info* hbm_info);

DCMIDLLEXPORT int dcmi_get_device_memory_info_v3(int card_id, int device_id,
                                                 struct dcmi_get_memory_info_stru* memory_info);

/* Degrees Celsius. */
DCMIDLLEXPORT int dcmi_get_device_temperature(int card_id, int device_id, int* temperature);

/* The chip's VDIE id, five 32-bit words; NDIE: -8255 ([200I A2] api_021). */
DCMIDLLEXPORT int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type,
                                         struct dcmi_die_id* die_id);

/* The chip's power draw in units of 0.1 W ([200I A2] api_020). */
DCMIDLLEXPORT int dcmi_get_device_power_info(int card_id, int device_id, int* power);

/* Whether the chip's RoCE port reaches its detection address ([200I A2] api_074). */
DCMIDLLEXPORT int dcmi_get_device_network_health(int card_id, int device_id,
                                                 enum dcmi_rdfx_detect_result* result);

/* Percent busy of one unit (DCMI_UTILIZATION_RATE_*). */
DCMIDLLEXPORT int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type,
                                                   unsigned int* utilization_rate);

DCMIDLLEXPORT int dcmi_get_device_pcie_info_v2(int card_id, int device_id,
                                               struct dcmi_pcie_info_all* pcie_info);

/* The CPUs near the chip, e.g. "144-167", NUL-terminated; affinity_cpu must hold TOPO_INFO_MAX_LENTH
 * bytes. *length is the string's length (0: the host records no affinity). */
DCMIDLLEXPORT int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char* affinity_cpu,
                                                          int* length);

/* *topo_type: an enum dcmi_topo_type value. */
DCMIDLLEXPORT int dcmi_get_topo_info_by_device_id(int card_id1, int device_id1, int card_id2, int device_id2,
                                                  int* topo_type);

/* The chip's address and netmask on its RoCE port (port_id is reserved, 0..255). */
DCMIDLLEXPORT int dcmi_get_device_ip(int card_id, int device_id, enum dcmi_port_type input_type, int port_id,
                                     struct dcmi_ip_addr* ip, struct dcmi_ip_addr* mask);

/* Creates a vNPU on the chip from vdev->template_name; out->vdev_id is its id (100 + 16*phy + k). */
DCMIDLLEXPORT int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru* vdev,
                                      struct dcmi_create_vdev_out* out);

/* Destroys vNPU vdevid of the chip (DCMI_VDEV_ID_ALL: every vNPU of the chip). */
DCMIDLLEXPORT int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid);

/* The generic query: main_cmd names the module, sub_cmd the item; buf receives it. *size is buf's size
 * on input (at least the item's size) and the size written on output. */
DCMIDLLEXPORT int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd,
                                       unsigned int sub_cmd, void* buf, unsigned int* size);

#ifdef __cplusplus
}
#endif

#endif /* ASCEND_SIM_DCMI_INTERFACE_API_H */
