// The cheapest possible runtime shim, for hook_bench's floor: a static program that only execs runc with its
// own arguments. What it costs over plain runc is what any shim costs on this machine, before doing anything.
#include <unistd.h>

int main(int /*argc*/, char** argv) {
  ::execvp("runc", argv);
  return 127;
}
