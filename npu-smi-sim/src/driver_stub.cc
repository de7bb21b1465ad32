// The emulated driver's shared objects: a real ELF library so that tools that inspect or dlopen the driver
// tree inside a container find a loadable file. It offers one symbol to tell what it is.
extern "C" __attribute__((visibility("default"))) const char* ascend_emulated_driver() {
  return "ascend npu-sim emulated driver";
}
