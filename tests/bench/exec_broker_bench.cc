// What the hook's exec broker (common/exec_broker.h) costs on a DCMI host, where the hook forks it before
// hardening on every start:
//   broker_start_stop   ExecBroker::start and its destruction (fork, the child's set-up, EOF, exit, wait)
//   floor_fork_exit     fork, the child's _exit, waitpid: what any broker process costs at least
//   run_true/brokered   /bin/true through a running broker
//   run_true/direct     /bin/true through run_capture() (what an unhardened caller pays)
// Run it twice; the figures to compare are the medians of the repetitions.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <span>

#include "ascend/common/exec_broker.h"

namespace {

using namespace std::chrono_literals;

ascend::BrokerProgram true_program() {
  ascend::BrokerProgram p;
  p.prefix = {"/bin/true"};
  p.env = {"PATH=/usr/bin:/bin"};
  p.admit = [](std::span<const std::string>) { return ascend::Status(); };
  return p;
}

void BM_BrokerStartStop(benchmark::State& state) {
  for (auto _ : state) {
    auto b = ascend::ExecBroker::start(true_program());
    if (!b) {
      state.SkipWithError(b.error().message().c_str());
      return;
    }
  }
}

void BM_FloorForkExit(benchmark::State& state) {
  for (auto _ : state) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
}

void BM_RunTrueBrokered(benchmark::State& state) {
  auto b = ascend::ExecBroker::start(true_program());
  if (!b) {
    state.SkipWithError(b.error().message().c_str());
    return;
  }
  const auto p = true_program();
  for (auto _ : state) {
    auto r = (*b)->run(p.prefix, p.env, 1 << 20, 10s);
    if (!r) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
  }
}

void BM_RunTrueDirect(benchmark::State& state) {
  const auto p = true_program();
  for (auto _ : state) {
    auto r = ascend::run_capture(p.prefix, p.env, 1 << 20, 10s);
    if (!r) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
  }
}

}  // namespace

BENCHMARK(BM_BrokerStartStop)->Name("broker_start_stop")->Unit(benchmark::kMicrosecond)->Repetitions(5);
BENCHMARK(BM_FloorForkExit)->Name("floor_fork_exit")->Unit(benchmark::kMicrosecond)->Repetitions(5);
BENCHMARK(BM_RunTrueBrokered)->Name("run_true/brokered")->Unit(benchmark::kMicrosecond)->Repetitions(5);
BENCHMARK(BM_RunTrueDirect)->Name("run_true/direct")->Unit(benchmark::kMicrosecond)->Repetitions(5);
BENCHMARK_MAIN();
