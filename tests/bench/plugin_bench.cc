// ascend-device-plugin, measured from outside as the kubelet sees it: the plugin binary runs as its own
// process on an emulated Atlas 800T A2 host in a temporary root (logging at info to a file, as installed),
// and this program is its gRPC client over the plugin's unix socket, on one channel as the kubelet has.
//
// "64 concurrent callers" means 64 calls in flight at once, in three load forms:
//   closed   64 logical callers on grpc++'s callback client API; each issues its next call from the
//            completion of its previous one (50 calls each), so 64 calls are always in flight.
//   burst    64 calls issued at once from one thread, all awaited, repeated (50 bursts).
//   threads  64 OS threads with the blocking stub, 50 calls each (the client's own thread scheduling on
//            2 cores is part of this figure).
// and three targets:
//   Allocate  the plugin's Allocate (one chip, runtime mode): target p99 <= 1 ms.
//   Options   the plugin's GetDevicePluginOptions, an empty RPC: the same server's gRPC cost, same run.
//   Floor     a minimal grpc++ callback server with one empty unary method (GetDevicePluginOptions
//             answering an empty message) in a separate process on its own unix socket (plugin_bench_floor,
//             linked with gRPC and the generated API only): the floor that gRPC and this machine allow for
//             the load, and for the resident memory, with none of the plugin's code or other libraries.
// Each benchmark is repeated with random interleaving so background load falls on every target alike;
// the summary pools every call of every repetition.
//
//   BM_Allocate1Caller        one caller: latency without queueing behind other callers.
//   BM_AllocateInProcess      Plugin::allocate + the metrics update in this process: the plugin's own work.
//   BM_FaultToUnhealthy       Emulator::set_fault(critical) until the ListAndWatch stream shows the device
//                             Unhealthy (target <= 500 ms); manual time, one fault per iteration, each at a
//                             random moment (0-250 ms after the last recovery was seen).
//   BM_FaultToCallback        the same fault until a DeviceQuery subscription fires: the baseline.
// The device backend is $ASCEND_BENCH_BACKEND (emulator, the default, or dcmi): the plugin runs with
// --backend of that name and the callback baseline subscribes to the same backend; scripts/bench runs this
// program once per backend (DCMI polls, every 200 ms; the emulator watches its state file).
// $ASCEND_BENCH_SAMPLES set: every fault latency is printed on stderr, in the order measured.
//   BM_RssAfter10kAllocate    the VmRSS of a plugin started for this benchmark (with a floor server of its
//                             own) after 10 000 Allocate calls (target <= 20 MB); rss_idle_mb (just
//                             started) and rss_before_mb (before these calls) are the baselines; also the
//                             plugin's CPU time per call, and the shared plugin's and floor's VmRSS at that
//                             moment (after whichever benchmarks ran first). $ASCEND_BENCH_SMAPS set: the Rss
//                             of each mapped file after the calls, the plugin's beside the floor's
//                             ("segments": of each mapping).
// $ASCEND_BENCH_PLUGIN: the plugin binary to run instead of this build's (a before/after comparison);
// $ASCEND_BENCH_WRAP: words put before its command line (a profiler: "valgrind --tool=callgrind").
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "ascend/common/main_guard.h"
#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"
#include "ascend/plugin/metrics.h"
#include "ascend/plugin/plugin.h"
#include "bench_host.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Stub = v1beta1::DevicePlugin::Stub;

constexpr int kCallers = 64;
constexpr int kCallsPerCaller = 50;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "plugin_bench: %s\n", why.c_str());
  std::exit(1);
}

pid_t spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) die("spawn " + args[0]);
  return pid;
}

void wait_for_socket(const std::string& sock, const std::string& who) {
  for (int i = 0; i < 6000 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(10ms);
  if (!std::filesystem::exists(sock)) die(who + " did not serve on " + sock);
}

// A plugin process and a floor server process on the emulated host under `dir` (their sockets, the plugin's
// log in `dir`/`name`), the gRPC channels to them, and what /proc says of them.
class Served {
 public:
  Served(const std::string& dir, const std::string& name, const std::string& backend) {
    const std::string own = dir + "/" + name;
    std::filesystem::create_directories(own + "/dp");
    // $ASCEND_BENCH_WRAP: words put before the plugin's command line (a profiler: "valgrind
    // --tool=callgrind").
    std::vector<std::string> cmd;
    if (const char* w = std::getenv("ASCEND_BENCH_WRAP"); w != nullptr) {
      std::istringstream words(w);
      for (std::string word; words >> word;) cmd.push_back(word);
    }
    // $ASCEND_BENCH_PLUGIN: another build of the plugin to measure (a before/after comparison in one tree).
    const char* plugin = std::getenv("ASCEND_BENCH_PLUGIN");
    for (std::string a :
         {plugin != nullptr && *plugin != '\0' ? std::string(plugin)
                                               : std::string(ASCEND_BIN_DIR) + "/ascend-device-plugin",
          std::string("--kubelet-socket-dir"), own + "/dp", std::string("--host-root"), dir + "/root",
          std::string("--backend"), backend, std::string("--log-level"), std::string("info"),
          std::string("--log-file"), own + "/plugin.log", std::string("--fault-codes"),
          dir + "/fault-codes.yaml"}) {
      cmd.push_back(std::move(a));
    }
    pid_ = spawn(cmd);
    floor_pid_ = spawn({ASCEND_BENCH_FLOOR, "--serve", own + "/floor.sock"});
    wait_for_socket(own + "/dp/ascend-Ascend910.sock", "the plugin");
    wait_for_socket(own + "/floor.sock", "the floor server");
    channel_ = grpc::CreateChannel("unix://" + own + "/dp/ascend-Ascend910.sock",
                                   grpc::InsecureChannelCredentials());
    floor_channel_ = grpc::CreateChannel("unix://" + own + "/floor.sock", grpc::InsecureChannelCredentials());
    std::this_thread::sleep_for(200ms);
    idle_rss_mb_ = rss_mb();
  }
  ~Served() {
    for (pid_t p : {pid_, floor_pid_}) {
      ::kill(p, SIGTERM);
      ::waitpid(p, nullptr, 0);
    }
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;

  std::unique_ptr<Stub> stub() const { return v1beta1::DevicePlugin::NewStub(channel_); }
  std::unique_ptr<Stub> floor_stub() const { return v1beta1::DevicePlugin::NewStub(floor_channel_); }
  double idle_rss_mb() const { return idle_rss_mb_; }
  // A field of /proc/<plugin>/status in MB: VmRSS (all), RssAnon (heap, stacks), RssFile (mapped libraries).
  double status_mb(const std::string& field = "VmRSS", bool floor = false) const {
    std::ifstream f("/proc/" + std::to_string(floor ? floor_pid_ : pid_) + "/status");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
    }
    return -1;
  }
  double rss_mb() const { return status_mb(); }
  // Rss per mapped file of /proc/<plugin>/smaps in KB ("[anon]" for every mapping without a file, which holds
  // the heap and the stacks), the copy-on-write pages of a file's mappings (relocations, .data) counted with
  // it and also apart (the second figure: Anonymous). With `by_segment` each mapping of a file apart ("path
  // perms offset").
  std::map<std::string, std::pair<long, long>> rss_by_file_kb(bool floor = false,
                                                              bool by_segment = false) const {
    std::ifstream f("/proc/" + std::to_string(floor ? floor_pid_ : pid_) + "/smaps");
    std::map<std::string, std::pair<long, long>> out;
    std::string line;
    std::string current;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      if (line.rfind("Rss:", 0) == 0) {
        out[current].first += std::stol(line.substr(4));
      } else if (line.rfind("Anonymous:", 0) == 0) {
        out[current].second += std::stol(line.substr(10));
      } else if (std::isxdigit(static_cast<unsigned char>(line[0])) != 0 && line.find('-') < line.find(' ')) {
        // "start-end perms offset dev inode   path"
        std::istringstream in(line);
        std::string range;
        std::string perms;
        std::string offset;
        std::string dev;
        std::string inode;
        std::string path;
        in >> range >> perms >> offset >> dev >> inode;
        std::getline(in >> std::ws, path);
        current = path.empty() || path[0] == '[' ? "[anon]" : path;
        if (by_segment && current != "[anon]") current.append(" ").append(perms).append(" ").append(offset);
      }
    }
    return out;
  }
  // CPU seconds (user + system) the plugin process (or the floor server) has used so far.
  double cpu_seconds(bool floor = false) const {
    std::ifstream f("/proc/" + std::to_string(floor ? floor_pid_ : pid_) + "/stat");
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
  pid_t pid_ = -1;
  pid_t floor_pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<grpc::Channel> floor_channel_;
  double idle_rss_mb_ = 0;
};

// The emulated host for the whole run, and the plugin and floor processes the benchmarks share (each
// benchmark that needs processes of its own starts them with `served`).
class Setup {
 public:
  Setup() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "plugin-bench-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    emu_ = std::make_unique<ascend::npu::Emulator>(dir_ + "/root");
    if (auto st = ascend::bench::load_bench_host(*emu_); !st) die(st.error().message());
    // BM_FaultToUnhealthy faults chip 3 twenty times: with the built-in escalation (3 faults within a day)
    // the plugin isolates it after the third (docs/device-plugin.md, "Health and graded faults"), and every
    // later benchmark calling Allocate on it would fail. The bench measures detection, not escalation.
    std::ofstream(dir_ + "/fault-codes.yaml") << "escalation:\n  times: 1000\n  window_seconds: 86400\n";
    const char* b = std::getenv("ASCEND_BENCH_BACKEND");
    backend_ = b != nullptr && *b != '\0' ? b : "emulator";
    ascend::npu::BackendOptions bo;
    bo.backend = *ascend::npu::parse_backend(backend_);
    bo.root = dir_ + "/root";
    auto q = ascend::npu::open_device_query(bo);
    if (!q) die(q.error().message());
    query_ = std::move(*q);
    std::printf("plugin_bench: device backend %s\n", backend_.c_str());
    shared_ = served("shared");
  }
  ~Setup() {
    shared_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Setup(const Setup&) = delete;
  Setup& operator=(const Setup&) = delete;

  // A plugin and a floor server started now, their files under `name`.
  std::unique_ptr<Served> served(const std::string& name) const {
    return std::make_unique<Served>(dir_, name, backend_);
  }
  const Served& shared() const { return *shared_; }
  std::unique_ptr<Stub> stub() const { return shared_->stub(); }
  std::unique_ptr<Stub> floor_stub() const { return shared_->floor_stub(); }
  double cpu_seconds(bool floor = false) const { return shared_->cpu_seconds(floor); }
  ascend::npu::Emulator& emu() { return *emu_; }
  ascend::npu::DeviceQuery& query() { return *query_; }  // the backend under measurement

 private:
  std::string dir_;
  std::unique_ptr<ascend::npu::Emulator> emu_;
  std::string backend_;
  std::unique_ptr<ascend::npu::DeviceQuery> query_;
  std::unique_ptr<Served> shared_;
};

Setup& setup() {
  static Setup s;
  return s;
}

// Every call's latency (microseconds) and the wall time spent, per load form and target, pooled over the
// repetitions for the summary.
struct Pool {
  std::vector<double> lat;
  double seconds = 0;
  double client_cpu = 0;  // CPU seconds of this process (all its threads) during the timed calls
  double server_cpu = 0;  // CPU seconds of the server process during the timed calls
};
std::map<std::string, Pool> g_pool;
std::map<std::string, std::vector<double>> g_ms;  // fault latencies
std::map<std::string, double> g_value;            // single figures (RSS, CPU per call)
// The plugin's Rss and Anonymous per mapped file after the 10 000 calls, and the floor's.
std::map<std::string, std::pair<long, long>> g_files;
std::map<std::string, std::pair<long, long>> g_floor_files;

double pct(const std::vector<double>& sorted, double p) {
  return sorted.empty() ? 0 : sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))];
}

double self_cpu_seconds() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// CPU time of the client (this process) and of the server process between two marks.
struct CpuMark {
  explicit CpuMark(bool floor) : floor_(floor) { reset(); }
  void reset() {
    client0 = self_cpu_seconds();
    server0 = setup().cpu_seconds(floor_);
  }
  void add_to(double* client, double* server) const {
    *client += self_cpu_seconds() - client0;
    *server += setup().cpu_seconds(floor_) - server0;
  }
  bool floor_;
  double client0 = 0;
  double server0 = 0;
};

void report(benchmark::State& state, const std::string& key, std::vector<double> lat, double seconds,
            int failures, double client_cpu = 0, double server_cpu = 0) {
  if (failures > 0) state.SkipWithError("a call failed");
  auto& pool = g_pool[key];
  pool.lat.insert(pool.lat.end(), lat.begin(), lat.end());
  pool.seconds += seconds;
  pool.client_cpu += client_cpu;
  pool.server_cpu += server_cpu;
  if (!lat.empty() && (client_cpu > 0 || server_cpu > 0)) {
    state.counters["client_cpu_us"] = client_cpu * 1e6 / static_cast<double>(lat.size());
    state.counters["server_cpu_us"] = server_cpu * 1e6 / static_cast<double>(lat.size());
  }
  std::sort(lat.begin(), lat.end());
  state.counters["p50_us"] = pct(lat, 0.50);
  state.counters["p99_us"] = pct(lat, 0.99);
  state.counters["max_us"] = lat.empty() ? 0 : lat.back();
  if (seconds > 0) state.counters["calls_per_s"] = static_cast<double>(lat.size()) / seconds;
  state.SetItemsProcessed(static_cast<int64_t>(lat.size()));
}

// The three targets, each as a blocking call and as a callback-API call. A caller's request is the same
// for all its calls (Allocate: chip caller % 8).
enum class Target { kAllocate, kOptions, kFloor };
const char* name(Target t) {
  return t == Target::kAllocate ? "Allocate" : t == Target::kOptions ? "Options" : "Floor";
}

struct CallSlot {
  v1beta1::AllocateRequest alloc_req;
  v1beta1::AllocateResponse alloc_resp;
  v1beta1::Empty empty_req;
  v1beta1::DevicePluginOptions options_resp;

  void init(int caller) {
    alloc_req.add_container_requests()->add_devices_ids("Ascend910-" + std::to_string(caller % 8));
  }
  void start_async(Target t, Stub& stub, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
    if (t == Target::kAllocate) {
      stub.async()->Allocate(ctx, &alloc_req, &alloc_resp, std::move(done));
    } else {
      stub.async()->GetDevicePluginOptions(ctx, &empty_req, &options_resp, std::move(done));
    }
  }
  bool call_blocking(Target t, Stub& stub) {
    grpc::ClientContext ctx;
    if (t == Target::kAllocate) return stub.Allocate(&ctx, alloc_req, &alloc_resp).ok();
    return stub.GetDevicePluginOptions(&ctx, empty_req, &options_resp).ok();
  }
};

std::unique_ptr<Stub> stub_for(Target t) {
  return t == Target::kFloor ? setup().floor_stub() : setup().stub();
}

// One slot per caller, and the channel warmed with 64 blocking calls.
std::vector<CallSlot> warmed_slots(Target t, Stub& stub) {
  std::vector<CallSlot> slots(kCallers);
  for (int c = 0; c < kCallers; ++c) slots[static_cast<std::size_t>(c)].init(c);
  for (int i = 0; i < 64; ++i) slots[0].call_blocking(t, stub);
  return slots;
}

// Waits until `n` completions were counted.
class Latch {
 public:
  explicit Latch(int n) : left_(n) {}
  void count_down() {
    std::lock_guard lock(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// Closed loop: 64 logical callers, each starting its next call from its previous call's completion.
// Contexts are made before the clock starts and outlive their calls.
class ClosedLoop {
 public:
  ClosedLoop(Target t, Stub& stub) : target_(t), stub_(stub), callers_(kCallers), latch_(kCallers) {
    for (int c = 0; c < kCallers; ++c) {
      auto& caller = callers_[static_cast<std::size_t>(c)];
      caller.slot.init(c);
      caller.lat.reserve(kCallsPerCaller);
      for (int i = 0; i < kCallsPerCaller; ++i) caller.ctx.push_back(std::make_unique<grpc::ClientContext>());
    }
  }
  void run() {
    for (int c = 0; c < kCallers; ++c) issue(c);
    latch_.wait();
  }
  std::vector<double> latencies() const {
    std::vector<double> all;
    for (const auto& c : callers_) all.insert(all.end(), c.lat.begin(), c.lat.end());
    return all;
  }
  int failures() const { return failures_.load(); }

 private:
  struct Caller {
    CallSlot slot;
    std::vector<std::unique_ptr<grpc::ClientContext>> ctx;
    std::vector<double> lat;
    Clock::time_point t0;
  };
  void issue(int c) {
    auto& caller = callers_[static_cast<std::size_t>(c)];
    auto* ctx = caller.ctx[caller.lat.size()].get();
    caller.t0 = Clock::now();
    caller.slot.start_async(target_, stub_, ctx, [this, c](const grpc::Status& s) {
      auto& me = callers_[static_cast<std::size_t>(c)];
      me.lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - me.t0).count());
      if (!s.ok()) failures_++;
      if (me.lat.size() < kCallsPerCaller) {
        issue(c);
      } else {
        latch_.count_down();
      }
    });
  }

  Target target_;
  Stub& stub_;
  std::vector<Caller> callers_;
  Latch latch_;
  std::atomic<int> failures_{0};
};

void closed_loop(benchmark::State& state, Target t) {
  auto stub = stub_for(t);
  CallSlot warm;
  warm.init(0);
  for (int i = 0; i < 64; ++i) warm.call_blocking(t, *stub);
  std::vector<double> lat;
  double seconds = 0;
  double client_cpu = 0;
  double server_cpu = 0;
  int failures = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ClosedLoop loop(t, *stub);
    state.ResumeTiming();
    CpuMark cpu(t == Target::kFloor);
    auto t0 = Clock::now();
    loop.run();
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    cpu.add_to(&client_cpu, &server_cpu);
    auto l = loop.latencies();
    lat.insert(lat.end(), l.begin(), l.end());
    failures += loop.failures();
  }
  report(state, std::string("closed/") + name(t), std::move(lat), seconds, failures, client_cpu, server_cpu);
}

// Bursts: 64 calls started at once from this thread, then all awaited; kCallsPerCaller bursts.
void bursts(benchmark::State& state, Target t) {
  auto stub = stub_for(t);
  std::vector<CallSlot> slots = warmed_slots(t, *stub);
  std::vector<double> lat;
  double seconds = 0;
  double client_cpu = 0;
  double server_cpu = 0;
  std::atomic<int> failures{0};
  for (auto _ : state) {
    for (int b = 0; b < kCallsPerCaller; ++b) {
      std::vector<std::unique_ptr<grpc::ClientContext>> ctx;
      ctx.reserve(kCallers);
      for (int c = 0; c < kCallers; ++c) ctx.push_back(std::make_unique<grpc::ClientContext>());
      std::vector<double> one(kCallers);
      std::vector<Clock::time_point> t0(kCallers);
      Latch latch(kCallers);
      CpuMark cpu(t == Target::kFloor);
      auto start = Clock::now();
      for (int c = 0; c < kCallers; ++c) {
        const auto i = static_cast<std::size_t>(c);
        t0[i] = Clock::now();
        slots[i].start_async(t, *stub, ctx[i].get(), [&, i](const grpc::Status& s) {
          one[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0[i]).count();
          if (!s.ok()) failures++;
          latch.count_down();
        });
      }
      latch.wait();
      seconds += std::chrono::duration<double>(Clock::now() - start).count();
      cpu.add_to(&client_cpu, &server_cpu);
      lat.insert(lat.end(), one.begin(), one.end());
    }
  }
  report(state, std::string("burst/") + name(t), std::move(lat), seconds, failures.load(), client_cpu,
         server_cpu);
}

// 64 OS threads with the blocking stub, each making kCallsPerCaller calls back to back.
void threads(benchmark::State& state, Target t) {
  auto stub = stub_for(t);
  std::vector<CallSlot> slots = warmed_slots(t, *stub);
  std::vector<double> all;
  double seconds = 0;
  double client_cpu = 0;
  double server_cpu = 0;
  std::atomic<int> failures{0};
  for (auto _ : state) {
    std::vector<std::vector<double>> lat(kCallers);
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    pool.reserve(kCallers);
    for (int c = 0; c < kCallers; ++c) {
      pool.emplace_back([&, c] {
        const auto i = static_cast<std::size_t>(c);
        while (!go.load()) std::this_thread::yield();
        for (int k = 0; k < kCallsPerCaller; ++k) {
          auto t0 = Clock::now();
          if (!slots[i].call_blocking(t, *stub)) failures++;
          lat[i].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      });
    }
    CpuMark cpu(t == Target::kFloor);
    auto t0 = Clock::now();
    go = true;
    for (auto& th : pool) th.join();
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    cpu.add_to(&client_cpu, &server_cpu);
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  }
  report(state, std::string("threads/") + name(t), std::move(all), seconds, failures.load(), client_cpu,
         server_cpu);
}

#define LOAD_BENCH(form, target, iters)                  \
  void BM_##target##64_##form(benchmark::State& state) { \
    form(state, Target::k##target);                      \
  }                                                      \
  BENCHMARK(BM_##target##64_##form)                      \
      ->Iterations(iters)                                \
      ->Repetitions(3)                                   \
      ->ReportAggregatesOnly(true)                       \
      ->UseRealTime()                                    \
      ->Unit(benchmark::kMillisecond)

LOAD_BENCH(closed_loop, Allocate, 5);
LOAD_BENCH(closed_loop, Options, 5);
LOAD_BENCH(closed_loop, Floor, 5);
LOAD_BENCH(bursts, Allocate, 1);
LOAD_BENCH(bursts, Options, 1);
LOAD_BENCH(bursts, Floor, 1);
LOAD_BENCH(threads, Allocate, 1);
LOAD_BENCH(threads, Options, 1);
LOAD_BENCH(threads, Floor, 1);

// One caller: the latency of an Allocate call with no queueing behind other callers.
void BM_Allocate1Caller(benchmark::State& state) {
  auto stub = setup().stub();
  CallSlot slot;
  slot.init(3);
  std::vector<double> lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    if (!slot.call_blocking(Target::kAllocate, *stub)) state.SkipWithError("a call failed");
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  report(state, "single/Allocate", std::move(lat), 0, 0);
}
BENCHMARK(BM_Allocate1Caller)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The plugin's own work for one Allocate call, without gRPC: Plugin::allocate and the metrics update, on
// the same emulated host and configuration as the plugin process.
void BM_AllocateInProcess(benchmark::State& state) {
  ascend::plugin::Metrics metrics;
  auto plugin = ascend::plugin::Plugin::create(setup().emu(), ascend::plugin::Config{}, &metrics);
  if (!plugin) {
    state.SkipWithError(plugin.error().message().c_str());
    return;
  }
  const auto& res = (*plugin)->resources().front();
  const auto series = metrics.allocate_series(res.name);
  std::vector<double> lat;
  int i = 0;
  for (auto _ : state) {
    const std::vector<std::vector<std::string>> req{{"Ascend910-" + std::to_string(i++ % 8)}};
    auto t0 = Clock::now();
    auto r = (*plugin)->allocate(res, req);
    series.observe(Clock::now() - t0, r.ok());
    if (!r) state.SkipWithError(r.error().message().c_str());
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  report(state, "inprocess/Allocate", std::move(lat), 0, 0);
}
BENCHMARK(BM_AllocateInProcess)->Iterations(20000)->UseRealTime()->Unit(benchmark::kMicrosecond);

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
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
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
  std::unique_ptr<Stub> stub_;
  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  v1beta1::ListAndWatchResponse last_;
  std::thread reader_;
};

void finish_ms(benchmark::State& state, const std::string& key, std::vector<double> ms) {
  g_ms[key].insert(g_ms[key].end(), ms.begin(), ms.end());
  if (std::getenv("ASCEND_BENCH_SAMPLES") != nullptr) {
    for (double x : ms) std::fprintf(stderr, "%s %.1f\n", key.c_str(), x);
  }
  std::sort(ms.begin(), ms.end());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["max_ms"] = ms.back();
}

// Waits a random 0-250 ms before a fault, so that faults land at every phase of a polling backend's interval
// (DCMI's poll, every 200 ms) as real ones do; without it each fault would follow the poll that saw the last
// recovery, one whole interval before the next poll, and every sample would be the same phase.
void random_phase(std::mt19937& rng) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 250)(rng)));
}

void BM_FaultToUnhealthy(benchmark::State& state) {
  Stream stream;
  auto& emu = setup().emu();
  if (!stream.wait_health("Ascend910-3", "Healthy", 5s)) state.SkipWithError("no first list");
  std::mt19937 rng(7);
  std::vector<double> ms;
  for (auto _ : state) {
    random_phase(rng);
    auto t0 = Clock::now();
    (void)emu.set_fault(3, 0x80E18402, ascend::npu::Health::kCritical);
    if (!stream.wait_health("Ascend910-3", "Unhealthy", 5s)) state.SkipWithError("no Unhealthy within 5 s");
    auto took = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(took);
    ms.push_back(took * 1000);
    (void)emu.clear_faults(3);
    if (!stream.wait_health("Ascend910-3", "Healthy", 5s)) state.SkipWithError("no recovery within 5 s");
  }
  finish_ms(state, "fault/stream", std::move(ms));
}
BENCHMARK(BM_FaultToUnhealthy)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_FaultToCallback(benchmark::State& state) {
  auto& emu = setup().emu();
  std::mutex mu;
  std::condition_variable cv;
  bool faulty = false;
  auto sub = setup().query().subscribe([&](const ascend::npu::DeviceSnapshot& s) {
    std::lock_guard lock(mu);
    faulty = s.chip(3)->health() == ascend::npu::Health::kCritical;
    cv.notify_all();
  });
  if (!sub) state.SkipWithError("subscribe failed");
  std::mt19937 rng(7);
  std::vector<double> ms;
  for (auto _ : state) {
    random_phase(rng);
    auto t0 = Clock::now();
    (void)emu.set_fault(3, 0x80E18402, ascend::npu::Health::kCritical);
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
  finish_ms(state, "fault/callback", std::move(ms));
}
BENCHMARK(BM_FaultToCallback)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);

// 10 000 blocking calls of `t` from 8 threads; false when one failed.
bool call_10k(Target t, Stub& stub) {
  std::vector<std::thread> pool;
  pool.reserve(8);
  std::atomic<int> failures{0};
  for (int c = 0; c < 8; ++c) {
    pool.emplace_back([&, c] {
      CallSlot slot;
      slot.init(c);
      for (int i = 0; i < 10000 / 8; ++i) {
        if (!slot.call_blocking(t, stub)) failures++;
      }
    });
  }
  for (auto& th : pool) th.join();
  return failures == 0;
}

// A plugin and a floor server of its own, started for this benchmark: the shared ones have served whichever
// benchmarks the random interleaving ran first (gRPC keeps what 64 callers at once made it grow: about
// 1.7 MB, in the floor server as in the plugin), and this row is the plugin after 10 000 Allocate calls.
void BM_RssAfter10kAllocate(benchmark::State& state) {
  const auto served = setup().served("rss");
  auto stub = served->stub();
  for (auto _ : state) {
    const double before = served->rss_mb();
    const double cpu0 = served->cpu_seconds();
    if (!call_10k(Target::kAllocate, *stub)) state.SkipWithError("a call failed");
    g_value["cpu_us_per_call"] = (served->cpu_seconds() - cpu0) * 1e6 / 10000;
    // The floor: a bare gRPC server of the same service on the same gRPC libraries (grpc++, protobuf,
    // OpenSSL, absl: plugin_bench_floor), answering 10 000 calls of the one it serves
    // (GetDevicePluginOptions).
    if (!call_10k(Target::kFloor, *served->floor_stub())) state.SkipWithError("a floor call failed");
    g_value["floor_rss_mb"] = served->status_mb("VmRSS", true);
    g_value["floor_file_mb"] = served->status_mb("RssFile", true);
    g_value["floor_anon_mb"] = served->status_mb("RssAnon", true);
    g_value["rss_idle_mb"] = served->idle_rss_mb();
    g_value["rss_before_mb"] = before;
    g_value["rss_after_mb"] = served->rss_mb();
    // The shared plugin, after whatever ran before this (more the more of the 64-caller loads did).
    g_value["shared_rss_mb"] = setup().shared().rss_mb();
    g_value["shared_floor_rss_mb"] = setup().shared().status_mb("VmRSS", true);
    for (const auto& [k, v] : g_value) state.counters[k] = v;
    state.counters["anon_after_mb"] = g_value["anon_after_mb"] = served->status_mb("RssAnon");
    state.counters["file_after_mb"] = g_value["file_after_mb"] = served->status_mb("RssFile");
    state.counters["threads"] = served->status_mb("Threads") * 1024.0;
    const char* smaps = std::getenv("ASCEND_BENCH_SMAPS");
    const bool by_segment = smaps != nullptr && std::strcmp(smaps, "segments") == 0;
    g_files = served->rss_by_file_kb(false, by_segment);
    g_floor_files = served->rss_by_file_kb(true, by_segment);
  }
}
BENCHMARK(BM_RssAfter10kAllocate)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void print_summary() {
  std::printf(
      "\nplugin_bench: %d calls in flight on one channel over a unix socket, %d per caller per run, pooled "
      "over the repetitions (microseconds per call; cpu: CPU time of the client and the server process per "
      "call)\n",
      kCallers, kCallsPerCaller);
  std::printf("  %-8s %-10s %9s %9s %9s %9s %11s %11s %11s\n", "load", "target", "p50", "p99", "max", "mean",
              "calls/s", "client cpu", "server cpu");
  for (const char* form : {"closed", "burst", "threads"}) {
    for (Target t : {Target::kAllocate, Target::kOptions, Target::kFloor}) {
      auto it = g_pool.find(std::string(form) + "/" + name(t));
      if (it == g_pool.end()) continue;
      const Pool& pool = it->second;
      auto lat = pool.lat;
      if (lat.empty()) continue;
      std::sort(lat.begin(), lat.end());
      double mean = 0;
      for (double l : lat) mean += l;
      mean /= static_cast<double>(lat.size());
      const double n = static_cast<double>(lat.size());
      const double rate = pool.seconds > 0 ? n / pool.seconds : 0;
      std::printf("  %-8s %-10s %9.0f %9.0f %9.0f %9.0f %11.0f %11.1f %11.1f\n", form, name(t), pct(lat, 0.5),
                  pct(lat, 0.99), lat.back(), mean, rate, pool.client_cpu * 1e6 / n,
                  pool.server_cpu * 1e6 / n);
    }
    auto p99 = [&](Target t) {
      auto it = g_pool.find(std::string(form) + "/" + name(t));
      if (it == g_pool.end()) return 0.0;
      auto lat = it->second.lat;
      std::sort(lat.begin(), lat.end());
      return pct(lat, 0.99);
    };
    if (p99(Target::kOptions) > 0 && p99(Target::kFloor) > 0) {
      std::printf("  %-8s p99 ratio Allocate/Options %.2f, Allocate/Floor %.2f, Options/Floor %.2f\n", form,
                  p99(Target::kAllocate) / p99(Target::kOptions),
                  p99(Target::kAllocate) / p99(Target::kFloor), p99(Target::kOptions) / p99(Target::kFloor));
    }
  }
  for (const char* key : {"single/Allocate", "inprocess/Allocate"}) {
    auto it = g_pool.find(key);
    if (it == g_pool.end()) continue;
    auto lat = it->second.lat;
    std::sort(lat.begin(), lat.end());
    std::printf("  %-19s p50 %7.1f  p99 %7.1f\n",
                std::strcmp(key, "single/Allocate") == 0 ? "Allocate, 1 caller" : "Allocate in-process",
                pct(lat, 0.5), pct(lat, 0.99));
  }
  std::printf("  target: Allocate p99 <= 1000 us with 64 concurrent callers\n");
  // Little's law for a closed loop: mean latency = calls in flight / throughput, and the throughput of
  // two cores is at most 2 / (client cpu + server cpu) per call.
  for (Target t : {Target::kFloor, Target::kAllocate}) {
    auto it = g_pool.find(std::string("closed/") + name(t));
    if (it == g_pool.end() || it->second.lat.empty()) continue;
    const double n = static_cast<double>(it->second.lat.size());
    const double cpu_us = (it->second.client_cpu + it->second.server_cpu) * 1e6 / n;
    const double cores = static_cast<double>(std::thread::hardware_concurrency());
    std::printf(
        "  bound (%s, closed): %.1f us CPU per call on %.0f cores -> at most %.0f calls/s -> mean "
        "latency of %d in flight >= %.0f us\n",
        name(t), cpu_us, cores, cores * 1e6 / cpu_us, kCallers, kCallers * cpu_us / cores);
  }
  for (const char* key : {"fault/stream", "fault/callback"}) {
    auto ms = g_ms[key];
    if (ms.empty()) continue;
    std::sort(ms.begin(), ms.end());
    std::printf("  %-34s median %6.2f ms  max %6.2f ms\n",
                std::strcmp(key, "fault/stream") == 0 ? "fault to Unhealthy on ListAndWatch"
                                                      : "fault to query callback (baseline)",
                ms[ms.size() / 2], ms.back());
  }
  std::printf("  target: fault to Unhealthy <= 500 ms\n");
  if (g_value.count("rss_after_mb") != 0) {
    std::printf(
        "  plugin RSS (MB = 1024 kB), a plugin started for this row: idle %.2f MB, before 10 000 Allocate "
        "%.2f MB, after them %.2f MB (target <= 20 MB); plugin CPU %.0f us per Allocate call\n",
        g_value["rss_idle_mb"], g_value["rss_before_mb"], g_value["rss_after_mb"],
        g_value["cpu_us_per_call"]);
    std::printf(
        "    of which mapped files (libraries, the binary) %.2f MB, heap and stacks %.2f MB; floor (a bare "
        "gRPC "
        "server of the same service on the same gRPC libraries, after as many calls): %.2f MB = files %.2f + "
        "heap %.2f; plugin minus floor %+.2f MB\n",
        g_value["file_after_mb"], g_value["anon_after_mb"], g_value["floor_rss_mb"], g_value["floor_file_mb"],
        g_value["floor_anon_mb"], g_value["rss_after_mb"] - g_value["floor_rss_mb"]);
    std::printf(
        "    the plugin and the floor server the other benchmarks shared, at the same moment (after "
        "whichever "
        "ran first): %.2f MB and %.2f MB\n",
        g_value["shared_rss_mb"], g_value["shared_floor_rss_mb"]);
    // $ASCEND_BENCH_SMAPS set: where the pages are, per mapped file (KB), the plugin beside the floor;
    // "segments": per mapping of each file.
    if (std::getenv("ASCEND_BENCH_SMAPS") != nullptr) {
      struct Row {
        std::pair<long, long> plugin;
        std::pair<long, long> floor;
      };
      std::map<std::string, Row> both;
      for (const auto& [file, kb] : g_files) both[file].plugin = kb;
      for (const auto& [file, kb] : g_floor_files) both[file].floor = kb;
      std::printf(
          "    Rss per mapping, KB: plugin (of it copied on write), floor (of it copied), plugin - floor\n");
      for (const auto& [file, r] : both) {
        std::printf("      %6ld (%5ld) %6ld (%5ld) %+6ld  %s\n", r.plugin.first, r.plugin.second,
                    r.floor.first, r.floor.second, r.plugin.first - r.floor.first, file.c_str());
      }
    }
  }
}

int run_main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  args.push_back(interleave.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  setup();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ascend::guarded_main("plugin_bench", [&] { return run_main(argc, argv); });
}
