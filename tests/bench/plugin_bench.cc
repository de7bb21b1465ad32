// ascend-device-plugin, measured from outside as the kubelet sees it: the plugin binary runs as its own
// process on an emulated Atlas 800T A2 host in a temporary root, and this program is its gRPC client.
//
//   BM_Allocate64Callers      64 threads call Allocate at once; p50/p99 per call (target p99 <= 1 ms).
//   BM_Options64Callers       the same with GetDevicePluginOptions (an empty RPC): the gRPC baseline.
//                             Arg 50: each caller makes 50 calls back to back; Arg 1: bursts of 64.
//   BM_Allocate1Caller        one caller: latency without queueing behind other callers.
//   BM_FaultToUnhealthy       Emulator::set_fault(critical) until the ListAndWatch stream shows the device
//                             Unhealthy (target <= 500 ms); manual time, one fault per iteration.
//   BM_FaultToCallback        the same fault until a DeviceQuery subscription fires: the baseline.
//   BM_RssAfter10kAllocate    the plugin's VmRSS after 10 000 more Allocate calls (target <= 20 MB);
//                             rss_idle_mb (just started) and rss_before_mb (after the other
//                             benchmarks) are the baselines; also the plugin's CPU time per call.
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The emulated host and the plugin process, for the whole run.
class Setup {
 public:
  Setup() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "plugin-bench-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    emu_ = std::make_unique<ascend::npu::Emulator>(dir_ + "/root");
    ascend::npu::LoadOptions o;
    o.make_nodes = ::geteuid() == 0;
    o.majors = ascend::npu::DeviceMajors{240, 241, 242, 243, 244};
    o.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
    if (auto st = emu_->load(*ascend::npu::builtin_profile("atlas800t-a2"), o); !st)
      die(st.error().message());
    std::filesystem::create_directories(dir_ + "/dp");
    const std::string bin = std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin";
    std::vector<std::string> args = {
        bin, "--kubelet-socket-dir", dir_ + "/dp", "--host-root", dir_ + "/root", "--log-level", "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) die("spawn " + bin);
    const std::string sock = dir_ + "/dp/ascend-Ascend910.sock";
    for (int i = 0; i < 500 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(10ms);
    if (!std::filesystem::exists(sock)) die("the plugin did not serve on " + sock);
    channel_ = grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials());
    std::this_thread::sleep_for(200ms);
    idle_rss_mb_ = rss_mb();
  }
  ~Setup() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  [[noreturn]] static void die(const std::string& why) {
    std::fprintf(stderr, "plugin_bench: %s\n", why.c_str());
    std::exit(1);
  }

  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub() const {
    return v1beta1::DevicePlugin::NewStub(channel_);
  }
  ascend::npu::Emulator& emu() { return *emu_; }
  double idle_rss_mb() const { return idle_rss_mb_; }
  // A field of /proc/<plugin>/status in MB: VmRSS (all), RssAnon (heap, stacks), RssFile (mapped libraries).
  double status_mb(const std::string& field = "VmRSS") const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
    }
    return -1;
  }
  double rss_mb() const { return status_mb(); }
  // CPU seconds (user + system) the plugin process has used so far.
  double cpu_seconds() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::istringstream in(text.substr(text.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0;
    unsigned long long stime = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

 private:
  std::string dir_;
  std::unique_ptr<ascend::npu::Emulator> emu_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  double idle_rss_mb_ = 0;
};

Setup& setup() {
  static Setup s;
  return s;
}

bool allocate_once(v1beta1::DevicePlugin::Stub& stub, int i) {
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("Ascend910-" + std::to_string(i % 8));
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  return stub.Allocate(&ctx, req, &resp).ok();
}

bool options_once(v1beta1::DevicePlugin::Stub& stub, int /*i*/) {
  v1beta1::Empty req;
  v1beta1::DevicePluginOptions resp;
  grpc::ClientContext ctx;
  return stub.GetDevicePluginOptions(&ctx, req, &resp).ok();
}

// 64 callers, each making `per_caller` calls as fast as it can; every call's latency is kept.
template <typename Call>
void concurrent_callers(benchmark::State& state, Call call) {
  constexpr int kCallers = 64;
  const int per_caller = static_cast<int>(state.range(0));
  std::vector<double> all;
  auto stub = setup().stub();
  for (int i = 0; i < 64; ++i) call(*stub, i);  // warm the channel
  for (auto _ : state) {
    std::vector<std::vector<double>> lat(kCallers);
    std::atomic<int> failures{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kCallers; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < per_caller; ++i) {
          auto t0 = Clock::now();
          if (!call(*stub, t * per_caller + i)) failures++;
          lat[static_cast<std::size_t>(t)].push_back(
              std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    if (failures > 0) state.SkipWithError("a call failed");
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0 : all[static_cast<std::size_t>(p * (all.size() - 1))]; };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  state.counters["max_us"] = all.empty() ? 0 : all.back();
  state.counters["calls"] = static_cast<double>(all.size());
  state.SetItemsProcessed(static_cast<int64_t>(all.size()));
}

void BM_Allocate64Callers(benchmark::State& state) {
  concurrent_callers(state, allocate_once);
}
void BM_Options64Callers(benchmark::State& state) {
  concurrent_callers(state, options_once);
}
BENCHMARK(BM_Options64Callers)->Arg(50)->Iterations(5)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Allocate64Callers)->Arg(50)->Iterations(5)->UseRealTime()->Unit(benchmark::kMillisecond);
// A burst: 64 callers with one call each, repeated.
BENCHMARK(BM_Allocate64Callers)->Arg(1)->Iterations(50)->UseRealTime()->Unit(benchmark::kMillisecond);

// One caller: the latency of an Allocate call with no queueing behind other callers.
void BM_Allocate1Caller(benchmark::State& state) {
  auto stub = setup().stub();
  std::vector<double> lat;
  int i = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    if (!allocate_once(*stub, i++)) state.SkipWithError("a call failed");
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(lat.begin(), lat.end());
  state.counters["p50_us"] = lat[lat.size() / 2];
  state.counters["p99_us"] = lat[static_cast<std::size_t>(0.99 * (lat.size() - 1))];
}
BENCHMARK(BM_Allocate1Caller)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One ListAndWatch stream; `wait_health` blocks until the latest list shows `id` with `health`.
class Stream {
 public:
  Stream() : stub_(setup().stub()) {
    reader_ = std::thread([this] {
      v1beta1::Empty req;
      auto r = stub_->ListAndWatch(&ctx_, req);
      v1beta1::ListAndWatchResponse resp;
      while (r->Read(&resp)) {
        std::lock_guard lock(mu_);
        last_ = resp;
        cv_.notify_all();
      }
      r->Finish();
    });
  }
  ~Stream() {
    ctx_.TryCancel();
    reader_.join();
  }
  bool wait_health(const std::string& id, const std::string& health, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (const auto& d : last_.devices()) {
        if (d.id() == id) return d.health() == health;
      }
      return false;
    });
  }

 private:
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  v1beta1::ListAndWatchResponse last_;
  std::thread reader_;
};

void BM_FaultToUnhealthy(benchmark::State& state) {
  Stream stream;
  auto& emu = setup().emu();
  if (!stream.wait_health("Ascend910-3", "Healthy", 5s)) state.SkipWithError("no first list");
  std::vector<double> ms;
  for (auto _ : state) {
    auto t0 = Clock::now();
    (void)emu.set_fault(3, 0x80E01801, ascend::npu::Health::kCritical);
    if (!stream.wait_health("Ascend910-3", "Unhealthy", 5s)) state.SkipWithError("no Unhealthy within 5 s");
    auto took = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(took);
    ms.push_back(took * 1000);
    (void)emu.clear_faults(3);
    if (!stream.wait_health("Ascend910-3", "Healthy", 5s)) state.SkipWithError("no recovery within 5 s");
  }
  std::sort(ms.begin(), ms.end());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["max_ms"] = ms.back();
}
BENCHMARK(BM_FaultToUnhealthy)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_FaultToCallback(benchmark::State& state) {
  auto& emu = setup().emu();
  std::mutex mu;
  std::condition_variable cv;
  bool faulty = false;
  auto sub = emu.subscribe([&](const ascend::npu::HostState& s) {
    std::lock_guard lock(mu);
    faulty = s.chip(3)->health() == ascend::npu::Health::kCritical;
    cv.notify_all();
  });
  if (!sub) state.SkipWithError("subscribe failed");
  std::vector<double> ms;
  for (auto _ : state) {
    auto t0 = Clock::now();
    (void)emu.set_fault(3, 0x80E01801, ascend::npu::Health::kCritical);
    {
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, 5s, [&] { return faulty; })) state.SkipWithError("no callback within 5 s");
    }
    auto took = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(took);
    ms.push_back(took * 1000);
    (void)emu.clear_faults(3);
    std::unique_lock lock(mu);
    cv.wait_for(lock, 5s, [&] { return !faulty; });
  }
  std::sort(ms.begin(), ms.end());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["max_ms"] = ms.back();
}
BENCHMARK(BM_FaultToCallback)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_RssAfter10kAllocate(benchmark::State& state) {
  auto stub = setup().stub();
  for (auto _ : state) {
    const double before = setup().rss_mb();
    const double cpu0 = setup().cpu_seconds();
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 10000 / 8; ++i) {
          if (!allocate_once(*stub, t + i)) failures++;
        }
      });
    }
    for (auto& th : threads) th.join();
    if (failures > 0) state.SkipWithError("a call failed");
    state.counters["plugin_cpu_us_per_call"] = (setup().cpu_seconds() - cpu0) * 1e6 / 10000;
    state.counters["rss_idle_mb"] = setup().idle_rss_mb();
    state.counters["rss_before_mb"] = before;
    state.counters["rss_after_mb"] = setup().rss_mb();
    state.counters["anon_after_mb"] = setup().status_mb("RssAnon");
    state.counters["file_after_mb"] = setup().status_mb("RssFile");
    state.counters["threads"] = setup().status_mb("Threads") * 1024.0;
  }
}
BENCHMARK(BM_RssAfter10kAllocate)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
