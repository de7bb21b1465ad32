// DCMI's return codes in the seam's terms (dcmi_errors.h).
#include "dcmi_errors.h"

#include <cerrno>
#include <string>

#include "dcmi_interface_api.h"

namespace ascend::npu::dcmi_backend {
namespace {

// The meaning of a DCMI return code, for messages.
const char* dcmi_meaning(int code) {
  switch (code) {
    case DCMI_ERR_CODE_INVALID_PARAMETER:
      return "invalid parameter";
    case DCMI_ERR_CODE_OPER_NOT_PERMITTED:
      return "operation not permitted";
    case DCMI_ERR_CODE_MEM_OPERATE_FAIL:
      return "memory operation failed";
    case DCMI_ERR_CODE_SECURE_FUN_FAIL:
      return "secure function failed";
    case DCMI_ERR_CODE_INNER_ERR:
      return "internal error";
    case DCMI_ERR_CODE_TIME_OUT:
      return "timed out";
    case DCMI_ERR_CODE_INVALID_DEVICE_ID:
      return "invalid device id";
    case DCMI_ERR_CODE_DEVICE_NOT_EXIST:
      return "device does not exist";
    case DCMI_ERR_CODE_IOCTL_FAIL:
      return "ioctl failed";
    case DCMI_ERR_CODE_NOT_REDAY:
      return "not ready, retry";
    case DCMI_ERR_CODE_NOT_SUPPORT_IN_CONTAINER:
      return "not supported in a container";
    case DCMI_ERR_CODE_IS_UPGRADING:
      return "an upgrade is running";
    case DCMI_ERR_CODE_RESOURCE_OCCUPIED:
      return "resources occupied";
    case DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST:
      return "configuration does not exist";
    case DCMI_ERR_CODE_NOT_SUPPORT:
      return "not supported";
    default:
      return "unknown DCMI error";
  }
}

// The errno the seam uses for a DCMI code (the emulator's codes for the same failures).
int errno_of(int code) {
  switch (code) {
    case DCMI_ERR_CODE_INVALID_PARAMETER:
      return EINVAL;
    case DCMI_ERR_CODE_OPER_NOT_PERMITTED:
      return EPERM;
    case DCMI_ERR_CODE_INVALID_DEVICE_ID:
      return ENODEV;
    case DCMI_ERR_CODE_DEVICE_NOT_EXIST:
      return ENOENT;
    case DCMI_ERR_CODE_RESOURCE_OCCUPIED:
      return ENOSPC;
    case DCMI_ERR_CODE_NOT_SUPPORT:
      return EOPNOTSUPP;
    default:
      return EIO;
  }
}

}  // namespace

Status check(int rc, const char* fn) {
  if (rc == DCMI_OK) return {};
  return Error(errno_of(rc),
               std::string(fn) + " failed: DCMI error " + std::to_string(rc) + " (" + dcmi_meaning(rc) + ")");
}

}  // namespace ascend::npu::dcmi_backend
