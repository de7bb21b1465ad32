// npu-smi on an emulated 16-device host (atlas800t-a3) in a temporary root. As root the device nodes are
// real (visibility then stats 16 nodes, as on a host); otherwise every chip is visible without nodes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/smi.h"
#include "ascend/npu/smi/commands.h"
#include "ascend/npu/smi/view.h"

namespace {

using namespace ascend::npu;

// One loaded host for the whole run, removed at exit.
class Host {
 public:
  Host() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smi-bench-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    emu_ = std::make_unique<Emulator>(dir_ + "/root");
    LoadOptions o;
    o.make_nodes = ::geteuid() == 0;
    o.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
    auto st = emu_->load(*builtin_profile("atlas800t-a3"), o);
    if (!st) {
      std::fprintf(stderr, "load: %s\n", st.error().message().c_str());
      std::exit(1);
    }
  }
  ~Host() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const Emulator& emu() const { return *emu_; }
  const std::string& root() const { return emu_->root(); }

 private:
  std::string dir_;
  std::unique_ptr<Emulator> emu_;
};

Host& host() {
  static Host h;
  return h;
}

void BM_NpuSmiInfo16Devices(benchmark::State& state) {
  const std::string& root = host().root();
  for (auto _ : state) {
    auto out = smi::run({"info"}, root);
    benchmark::DoNotOptimize(out.out.data());
  }
  state.SetLabel(::geteuid() == 0 ? "with device nodes" : "no device nodes");
}
BENCHMARK(BM_NpuSmiInfo16Devices)->Unit(benchmark::kMicrosecond);

void BM_StateSnapshot(benchmark::State& state) {
  const Emulator& emu = host().emu();
  for (auto _ : state) {
    auto s = emu.snapshot();
    benchmark::DoNotOptimize(s.ok());
  }
}
BENCHMARK(BM_StateSnapshot)->Unit(benchmark::kMicrosecond);

void BM_FormatInfoTableOnly(benchmark::State& state) {
  HostState s = *builtin_profile("atlas800t-a3");
  smi::Visible v = smi::all_chips(s);
  for (auto _ : state) {
    auto out = smi::run_query({"info"}, s, v);
    benchmark::DoNotOptimize(out.out.data());
  }
}
BENCHMARK(BM_FormatInfoTableOnly)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
