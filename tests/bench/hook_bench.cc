// The injection's cost: `runc run` of /bin/true in one busybox bundle, four ways, interleaved at random so
// that drift hits all alike:
//   plain        runc, no request (the baseline)
//   ascend       ascend-docker-runtime, ASCEND_VISIBLE_DEVICES=0-7, base.list (7 mounts), injection "spec"
//                (the default: the shim writes nodes and read-only bind mounts into config.json, runc makes
//                them; no hook process)
//   ascend_hook  the same with injection "hook": ascend-docker-hook mounts the driver files at prestart
//   passthrough  ascend-docker-runtime, no request (what every other container pays)
//   ascend_dcmi  `ascend` with the DCMI backend (backend: dcmi): the shim reads the device nodes under the
//                host root (node_query.h), its fast path, as it does for the emulator on such a request
//   ascend_hook_dcmi  `ascend_hook` with the DCMI backend: the hook forks its exec broker before hardening
//                (exec_broker.h; it would run the DCMI helper for a request the nodes cannot answer), and
//                reads the device nodes
//   ascend_dcmi_named  the same backend with the chips named (Ascend910-0 .. Ascend910-7): a request the
//                nodes cannot answer, so the shim runs the DCMI helper (ascend-dcmi-query, which dlopens the
//                emulated libdcmi.so): the slow path
// and two floors that say what no shim can avoid on this machine:
//   runc_edited  plain runc on the config.json the shim writes for `ascend` (runc's own work: 11 device
//   nodes,
//                their cgroup rules, 7 read-only bind mounts), no shim process
//   exec_floor   a static program that only execs runc (exec_floor.cc), no request: one exec's cost
// and, for the verbs that only pass through, create + start + delete --force of a container that asks for
// nothing (three runtime processes, as an engine drives them) by plain runc, the shim and the exec-only
// floor.
// and the shim alone, its runtime /bin/true, against the exec-only floor execing /bin/true (without runc's
// 40-80 ms and their noise, the shim's own start-up shows), and against the request's system calls alone
// (request_floor.cc: what the shim's own work on a request cannot go below here).
// One container per repetition, repetitions shuffled across all of them. Bundles and runc's state live on a
// tmpfs, as they do under an engine (containerd's /run/containerd/..., runc's /run/runc); this machine's /run
// is on ext4, where creating and renaming a file costs far more than on the tmpfs a real host has. Each run
// starts from the bundle's original config.json (restored outside the timed region). After the benchmarks the
// program prints the median added milliseconds and the ratio against plain runc; the target is at most 3 ms
// and 1.15 for `ascend`. Needs root and runc; otherwise it says why and exits 0.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "latency.h"
#include "support.h"

namespace {

using namespace ascend::hook::testing;  // NOLINT(google-build-using-namespace)

extern "C" char** environ;

struct Setup {
  TempDir tmp{"hook-bench"};
  std::unique_ptr<EmulatedHost> host;
  std::string run;               // a tmpfs: bundles and runc's state
  std::string config;            // injection: spec (the default)
  std::string hook_config;       // injection: hook
  std::string dcmi_config;       // injection: spec, backend: dcmi
  std::string hook_dcmi_config;  // injection: hook, backend: dcmi
  std::unique_ptr<Bundle> named;
  std::string named_spec;
  std::unique_ptr<Bundle> plain;
  std::unique_ptr<Bundle> ascend;
  std::string plain_spec;
  std::string ascend_spec;
  std::string edited_spec;     // ascend_spec as the shim rewrites it
  std::string alone_config;    // injection: spec, runtime-path: /bin/true (the shim alone)
  std::string fake_runc_path;  // PATH=<a folder whose runc is /bin/true> (the exec-only floor alone)
};

Setup* g_setup = nullptr;
std::map<std::string, std::vector<double>> g_samples;  // wall ms per run, by benchmark
std::map<std::string, std::vector<double>> g_cpu;      // CPU ms (user + system) of the whole process tree

// posix_spawn + wait with stdio on /dev/null: no pipes, no polling in the measurement. `cpu_ms` gets the CPU
// time of the runtime and everything it reaped (runc init, the hook, the container's process).
int spawn_wait(const std::vector<std::string>& argv, double& cpu_ms, char** env = environ) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd : {0, 1, 2})
    posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  struct rusage ru {};
  while (::wait4(pid, &status, 0, &ru) < 0) {
  }
  auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1000 + static_cast<double>(t.tv_usec) / 1000;
  };
  cpu_ms = ms(ru.ru_utime) + ms(ru.ru_stime);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void run_container(benchmark::State& state, const std::string& name, const std::vector<std::string>& runtime,
                   const Bundle& bundle, const std::string& spec) {
  int n = 0;
  for (auto _ : state) {
    spit(bundle.config_path(), spec);  // the shim rewrites it: start every run from the original
    std::vector<std::string> argv = runtime;
    std::string id = "hook-bench-" + std::to_string(::getpid()) + "-" + name + "-" + std::to_string(n++);
    argv.insert(argv.end(), {"--root", g_setup->run + "/runc-state", "run", "--bundle", bundle.dir(), id});
    auto t0 = std::chrono::steady_clock::now();
    double cpu = 0;
    int rc = spawn_wait(argv, cpu);
    auto t1 = std::chrono::steady_clock::now();
    if (rc != 0) {
      state.SkipWithError(("container exited with " + std::to_string(rc)).c_str());
      return;
    }
    double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    g_samples[name].push_back(s * 1000);
    g_cpu[name].push_back(cpu);
  }
}

void BM_Plain(benchmark::State& s) {
  run_container(s, "plain", {"runc"}, *g_setup->plain, g_setup->plain_spec);
}
void BM_Ascend(benchmark::State& s) {
  run_container(s, "ascend", {bin("ascend-docker-runtime"), "--config", g_setup->config}, *g_setup->ascend,
                g_setup->ascend_spec);
}
void BM_AscendHook(benchmark::State& s) {
  run_container(s, "ascend_hook", {bin("ascend-docker-runtime"), "--config", g_setup->hook_config},
                *g_setup->ascend, g_setup->ascend_spec);
}
void BM_AscendDcmi(benchmark::State& s) {
  run_container(s, "ascend_dcmi", {bin("ascend-docker-runtime"), "--config", g_setup->dcmi_config},
                *g_setup->ascend, g_setup->ascend_spec);
}
void BM_AscendHookDcmi(benchmark::State& s) {
  run_container(s, "ascend_hook_dcmi", {bin("ascend-docker-runtime"), "--config", g_setup->hook_dcmi_config},
                *g_setup->ascend, g_setup->ascend_spec);
}
void BM_AscendDcmiNamed(benchmark::State& s) {
  run_container(s, "ascend_dcmi_named", {bin("ascend-docker-runtime"), "--config", g_setup->dcmi_config},
                *g_setup->named, g_setup->named_spec);
}
void BM_RuncEdited(benchmark::State& s) {
  run_container(s, "runc_edited", {"runc"}, *g_setup->ascend, g_setup->edited_spec);
}
void BM_ExecFloor(benchmark::State& s) {
  run_container(s, "exec_floor", {ASCEND_EXEC_FLOOR}, *g_setup->plain, g_setup->plain_spec);
}
void BM_Passthrough(benchmark::State& s) {
  run_container(s, "passthrough", {bin("ascend-docker-runtime"), "--config", g_setup->config},
                *g_setup->plain, g_setup->plain_spec);
}

// create, start and delete --force of one container, as an engine drives a runtime: three runtime processes
// (the shim's pass-through verbs start and delete included), no request. The spec is never edited.
void run_lifecycle(benchmark::State& state, const std::string& name,
                   const std::vector<std::string>& runtime) {
  int n = 0;
  for (auto _ : state) {
    std::string id = "hook-bench-" + std::to_string(::getpid()) + "-" + name + "-" + std::to_string(n++);
    std::vector<std::string> base = runtime;
    base.insert(base.end(), {"--root", g_setup->run + "/runc-state"});
    const std::vector<std::vector<std::string>> verbs = {
        {"create", "--bundle", g_setup->plain->dir(), id}, {"start", id}, {"delete", "--force", id}};
    double cpu_all = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& verb : verbs) {
      std::vector<std::string> argv = base;
      argv.insert(argv.end(), verb.begin(), verb.end());
      double cpu = 0;
      if (int rc = spawn_wait(argv, cpu); rc != 0) {
        state.SkipWithError((verb[0] + " exited with " + std::to_string(rc)).c_str());
        return;
      }
      cpu_all += cpu;
    }
    auto t1 = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    g_samples[name].push_back(s * 1000);
    g_cpu[name].push_back(cpu_all);
  }
}

void BM_LifecyclePlain(benchmark::State& s) {
  run_lifecycle(s, "life_plain", {"runc"});
}
void BM_LifecycleShim(benchmark::State& s) {
  run_lifecycle(s, "life_shim", {bin("ascend-docker-runtime"), "--config", g_setup->config});
}
void BM_LifecycleFloor(benchmark::State& s) {
  run_lifecycle(s, "life_exec_floor", {ASCEND_EXEC_FLOOR});
}

// The shim alone, its runtime /bin/true (runtime-path), against the exec-only floor execing /bin/true as its
// "runc": runc's 40-80 ms and their noise are gone, so what the shim itself adds to an exec shows.
void run_alone(benchmark::State& state, const std::string& name, const std::vector<std::string>& runtime,
               const Bundle& bundle, const std::string& spec, char** env) {
  int n = 0;
  for (auto _ : state) {
    spit(bundle.config_path(), spec);
    std::vector<std::string> argv = runtime;
    argv.insert(argv.end(), {"create", "--bundle", bundle.dir(), "alone-" + std::to_string(n++)});
    double cpu = 0;
    auto t0 = std::chrono::steady_clock::now();
    int rc = spawn_wait(argv, cpu, env);
    auto t1 = std::chrono::steady_clock::now();
    if (rc != 0) {
      state.SkipWithError(("exited with " + std::to_string(rc)).c_str());
      return;
    }
    double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    g_samples[name].push_back(s * 1000);
    g_cpu[name].push_back(cpu);
  }
}

void BM_AloneFloor(benchmark::State& s) {
  std::string path = g_setup->fake_runc_path;
  char* env[] = {path.data(), nullptr};
  run_alone(s, "alone_floor", {ASCEND_EXEC_FLOOR}, *g_setup->plain, g_setup->plain_spec, env);
}
void BM_AloneShim(benchmark::State& s) {
  run_alone(s, "alone_shim", {bin("ascend-docker-runtime"), "--config", g_setup->alone_config},
            *g_setup->plain, g_setup->plain_spec, environ);
}
void BM_AloneShimRequest(benchmark::State& s) {
  run_alone(s, "alone_shim_request", {bin("ascend-docker-runtime"), "--config", g_setup->alone_config},
            *g_setup->ascend, g_setup->ascend_spec, environ);
}
void BM_AloneRequestFloor(benchmark::State& s) {
  run_alone(s, "alone_request_floor", {ASCEND_REQUEST_FLOOR, "--config", g_setup->alone_config},
            *g_setup->ascend, g_setup->ascend_spec, environ);
}

using ascend::bench::median;

// "ratio 1.012 (0.998-1.027)": the ratio of the two medians with its 95 % bootstrap interval.
std::string ratio_with_interval(const std::vector<double>& a, const std::vector<double>& b) {
  const auto in = ascend::bench::median_ratio_interval(a, b);
  char text[64];
  std::snprintf(text, sizeof text, "ratio %.3f (%.3f-%.3f)", median(a) / median(b), in.lo, in.hi);
  return text;
}

}  // namespace

// One container per repetition and the repetitions of all three shuffled together, so that every variant sees
// the same machine load, run after run.
constexpr int kRuns = 200;
BENCHMARK(BM_Plain)
    ->Name("runc_run/plain")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_Ascend)
    ->Name("runc_run/ascend_0-7_base")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AscendHook)
    ->Name("runc_run/ascend_0-7_base_by_hook")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AscendDcmi)
    ->Name("runc_run/ascend_0-7_base_dcmi")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AscendHookDcmi)
    ->Name("runc_run/ascend_0-7_base_by_hook_dcmi")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AscendDcmiNamed)
    ->Name("runc_run/ascend_named_0-7_base_dcmi_helper")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_Passthrough)
    ->Name("runc_run/shim_no_request")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);

BENCHMARK(BM_RuncEdited)
    ->Name("runc_run/floor_runc_on_the_edited_spec")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_ExecFloor)
    ->Name("runc_run/floor_exec_only_shim")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);

BENCHMARK(BM_LifecyclePlain)
    ->Name("lifecycle/plain")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_LifecycleShim)
    ->Name("lifecycle/shim_no_request")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_LifecycleFloor)
    ->Name("lifecycle/floor_exec_only_shim")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kRuns)
    ->ReportAggregatesOnly(true);

// The shim alone takes a few milliseconds: more repetitions for the same noise.
constexpr int kAloneRuns = 1000;
BENCHMARK(BM_AloneFloor)
    ->Name("alone/floor_exec_only")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kAloneRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AloneRequestFloor)
    ->Name("alone/floor_request_system_calls")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kAloneRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AloneShim)
    ->Name("alone/shim_no_request")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kAloneRuns)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AloneShimRequest)
    ->Name("alone/shim_0-7_base")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kAloneRuns)
    ->ReportAggregatesOnly(true);

namespace {

// One table of medians against a baseline's: each variant's wall and CPU time, what it adds, and the ratio
// with its 95 % bootstrap interval. Nothing when the baseline did not run (a --benchmark_filter left it out).
void print_against(const char* what, const std::string& base, const char* base_label,
                   const std::vector<std::pair<std::string, const char*>>& variants, const char* target) {
  const double b = median(g_samples[base]);
  const double b_cpu = median(g_cpu[base]);
  if (b <= 0) return;
  std::printf("\nhook_bench: %s, median of %zu runs each\n", what, g_samples[base].size());
  std::printf("  %-32s wall %8.3f ms                          cpu %6.3f ms\n", base_label, b, b_cpu);
  for (const auto& [name, label] : variants) {
    const double m = median(g_samples[name]);
    const double c = median(g_cpu[name]);
    std::printf("  %-32s wall %8.3f ms (%+6.3f, %s)   cpu %6.3f ms (%+6.3f, %s)\n", label, m, m - b,
                ratio_with_interval(g_samples[name], g_samples[base]).c_str(), c, c - b_cpu,
                ratio_with_interval(g_cpu[name], g_cpu[base]).c_str());
  }
  std::printf("  target: %s\n", target);
}

int run_bench(int argc, char** argv) {
  if (::geteuid() != 0 || !have_program("runc") || ::access("/bin/busybox", X_OK) != 0) {
    std::printf("hook_bench: skipped (needs root, runc and /bin/busybox)\n");
    return 0;
  }
  std::vector<char*> args(argv, argv + argc);
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  args.push_back(interleave.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());

  Setup setup;
  g_setup = &setup;
  setup.host = std::make_unique<EmulatedHost>(setup.tmp / "host");
  if (!setup.host->ok()) {
    std::fprintf(stderr, "hook_bench: npu-sim load failed: %s\n", setup.host->error().c_str());
    return 1;
  }
  // Log at the installed default level (info), as production does.
  auto config = [&](const std::string& dir, const std::string& injection) {
    ::mkdir(dir.c_str(), 0755);
    std::string path = write_hook_config(dir, setup.tmp / "host", {}, injection);
    std::string cfg = slurp(path);
    cfg.replace(cfg.find("log-level: debug"), 16, "log-level: info");
    spit(path, cfg);
    return path;
  };
  setup.config = config(setup.tmp / "spec", "spec");
  setup.hook_config = config(setup.tmp / "hook", "hook");
  auto with_dcmi = [](const std::string& path) {
    std::string cfg = slurp(path);
    const auto at = cfg.find("backend: ");
    cfg.replace(at, cfg.find('\n', at) - at, "backend: dcmi");
    spit(path, cfg);
    return path;
  };
  setup.dcmi_config = with_dcmi(config(setup.tmp / "dcmi", "spec"));
  setup.hook_dcmi_config = with_dcmi(config(setup.tmp / "hook-dcmi", "hook"));
  setup.run = setup.tmp / "run";
  ::mkdir(setup.run.c_str(), 0755);
  if (::mount("tmpfs", setup.run.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
    std::fprintf(stderr, "hook_bench: mount a tmpfs on %s: %s\n", setup.run.c_str(), std::strerror(errno));
    return 1;
  }
  setup.plain = std::make_unique<Bundle>(setup.run + "/plain");
  setup.plain->set_args({"/bin/true"});
  setup.plain->save();
  setup.plain_spec = setup.plain->spec().dump();
  setup.ascend = std::make_unique<Bundle>(setup.run + "/ascend");
  setup.ascend->set_args({"/bin/true"});
  setup.ascend->add_env("ASCEND_VISIBLE_DEVICES=0-7");
  setup.ascend->save();
  setup.ascend_spec = setup.ascend->spec().dump();
  setup.named = std::make_unique<Bundle>(setup.run + "/named");
  setup.named->set_args({"/bin/true"});
  setup.named->add_env(
      "ASCEND_VISIBLE_DEVICES=Ascend910-0,Ascend910-1,Ascend910-2,Ascend910-3,Ascend910-4,Ascend910-5,"
      "Ascend910-6,Ascend910-7");
  setup.named->save();
  setup.named_spec = setup.named->spec().dump();
  {  // The spec the shim writes, captured by running it with /bin/true as the runtime.
    std::string cfg_dir = setup.tmp / "capture";
    std::string cfg = config(cfg_dir, "spec");
    spit(cfg, slurp(cfg) + "runtime-path: /bin/true\n");
    spit(setup.ascend->config_path(), setup.ascend_spec);
    double cpu = 0;
    if (spawn_wait({bin("ascend-docker-runtime"), "--config", cfg, "create", "--bundle", setup.ascend->dir(),
                    "capture"},
                   cpu) != 0) {
      std::fprintf(stderr, "hook_bench: the shim could not edit the spec (see %s)\n", cfg_dir.c_str());
      return 1;
    }
    setup.edited_spec = slurp(setup.ascend->config_path());
    setup.alone_config = cfg;
    std::string fake = setup.tmp / "fake-runc";
    ::mkdir(fake.c_str(), 0755);
    if (::symlink("/bin/true", (fake + "/runc").c_str()) != 0) return 1;
    setup.fake_runc_path = "PATH=" + fake;
    // The floor is only a floor if runc gets the whole injection: 8 chips + 3 control nodes, 7 mounts.
    auto edited = nlohmann::json::parse(setup.edited_spec);
    std::size_t binds = 0;
    for (const auto& m : edited["mounts"]) binds += m.value("type", "") == "bind" ? 1 : 0;
    std::printf("hook_bench: the shim's spec has %zu device nodes and %zu bind mounts\n",
                edited["linux"]["devices"].size(), binds);
    if (edited["linux"]["devices"].size() != 11 || binds != 7) return 1;
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  double plain = median(g_samples["plain"]);
  double plain_cpu = median(g_cpu["plain"]);
  if (plain > 0) {  // the runc run rows (a --benchmark_filter may leave them out)
    std::printf(
        "\nhook_bench: runc run /bin/true, median of %zu runs each (wall time; CPU time of the whole process "
        "tree)\n",
        g_samples["plain"].size());
    std::printf("  %-32s wall %8.2f ms                          cpu %6.2f ms\n", "plain runc (baseline)",
                plain, plain_cpu);
    const std::pair<const char*, const char*> variants[] = {
        {"ascend", "shim, 0-7, base.list (spec)"},
        {"ascend_hook", "shim+hook, 0-7, base.list"},
        {"ascend_dcmi", "shim, 0-7, base.list, dcmi"},
        {"ascend_hook_dcmi", "shim+hook, 0-7, dcmi (broker)"},
        {"ascend_dcmi_named", "shim, named 0-7, dcmi helper"},
        {"passthrough", "shim, no request"},
        {"runc_edited", "floor: runc on the edited spec"},
        {"exec_floor", "floor: exec-only static shim"}};
    std::map<std::string, double> added;
    for (const auto& [name, label] : variants) {
      double m = median(g_samples[name]);
      double c = median(g_cpu[name]);
      added[name] = m - plain;
      std::printf("  %-32s wall %8.2f ms (%+6.2f, ratio %.3f)   cpu %6.2f ms (%+6.2f, ratio %.3f)\n", label,
                  m, m - plain, m / plain, c, c - plain_cpu, c / plain_cpu);
    }
    std::printf(
        "  target for a request of 0-7 with base.list (the default injection): added <= 3 ms, ratio <= 1.15\n"
        "  floor for any shim that injects this request here (exec-only shim + runc's own injection work): "
        "%+.2f ms\n"
        "  the shim's own work (spec - floor): %+.2f ms\n",
        added["exec_floor"] + added["runc_edited"],
        added["ascend"] - added["exec_floor"] - added["runc_edited"]);
    if (added["exec_floor"] > 0.1) {
      std::printf(
          "  shim, no request: its added time over the exec-only floor's, ratio %.3f (target <= 1.2)\n",
          added["passthrough"] / added["exec_floor"]);
    } else {
      std::printf(
          "  shim, no request: the exec-only floor's added time (%+.2f ms) is within the noise here; see the "
          "shim alone below\n",
          added["exec_floor"]);
    }
  }
  print_against(
      "create + start + delete --force, no request", "life_plain", "plain runc (baseline)",
      {{"life_shim", "through the shim"}, {"life_exec_floor", "floor: exec-only static shim"}},
      "through the shim <= 1.05 x plain runc (in brackets: the ratio's 95 % bootstrap interval; the target "
      "holds when its upper end is at most 1.05)");
  print_against("the shim alone (create, its runtime /bin/true)", "alone_floor",
                "floor: exec-only static shim",
                {{"alone_shim", "shim, no request"},
                 {"alone_shim_request", "shim, 0-7, base.list (spec)"},
                 {"alone_request_floor", "floor: the request's system calls"}},
                "the shim with no request <= 1.2 x the exec-only floor (in brackets: the ratio's 95 % "
                "bootstrap interval)");
  const double floor = median(g_samples["alone_floor"]);
  const double request = median(g_samples["alone_shim_request"]) - floor;
  const double calls = median(g_samples["alone_request_floor"]) - floor;
  if (!g_samples["plain"].empty() && floor > 0) {
    std::printf(
        "  the shim's own work on the request, alone: %+.3f ms over the exec-only floor (target <= 1 %% of "
        "plain runc: %.3f ms); its system calls alone cost %+.3f ms, the rest (%+.3f ms) is the shim's "
        "computing, start-up and memory\n",
        request, median(g_samples["plain"]) / 100, calls, request - calls);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_bench(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hook_bench: %s\n", e.what());
  }
  return 1;
}
