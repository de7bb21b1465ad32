// A library that leaves a file behind when a process loads it: the proof that a hook did (or did not) take
// LD_PRELOAD from the container's environment.
#include <fcntl.h>
#include <unistd.h>

namespace {

__attribute__((constructor)) void touch_canary() {
  int fd = ::open(ASCEND_CANARY_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

}  // namespace
