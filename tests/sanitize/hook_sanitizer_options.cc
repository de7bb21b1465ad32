// Linked into ascend-docker-hook in the sanitizer tree only (cmake/sanitize.cmake). The hook drops every
// capability it does not need (CAP_SYS_PTRACE among them) and installs its seccomp filter before it exits,
// so LeakSanitizer's exit-time check, which stops the process's threads with ptrace, cannot run there and
// fails the hook ("LeakSanitizer has encountered a fatal error"). runc gives hooks only the environment in
// the spec (PATH), so ASAN_OPTIONS cannot say it: the default is compiled in. A test that runs the hook
// itself passes it scripts/test's ASAN_OPTIONS (detect_leaks=1), which win over that default, so the exit
// check is also turned off by LeakSanitizer's own switch, which no option overrides. Leaks of the hook's
// code are still checked in-process by the executor and unit tests.
extern "C" const char* __asan_default_options() {  // NOLINT(bugprone-reserved-identifier)
  return "detect_leaks=0";
}
extern "C" int __lsan_is_turned_off() {  // NOLINT(bugprone-reserved-identifier)
  return 1;
}
