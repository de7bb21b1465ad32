// What a Prometheus scrape costs the plugin for 16 chips (issue 26: "at most a few milliseconds"): an
// emulated atlas800t-a3 host (16 dies) in a temporary root, chips 0-3 held by a pod (a fixed attribution:
// the pod-resources List is a gRPC call on a unix socket, measured by plugin_bench's RPC floor), chip 1
// under load-gen and chip 2 faulted.
//   BM_Collect/emulator|dcmi     NpuExporter::Collect (one telemetry read through the backend, the labels,
//                                the families) and the text serialization
//   BM_CollectFloor              an empty prometheus::Registry collected and serialized (the floor)
//   BM_HttpScrape/emulator|dcmi  GET /metrics on the plugin's MetricsServer with the exporter attached
//   BM_HttpScrapeFloor           GET /metrics on a MetricsServer with nothing attached and no chips
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "ascend/npu/backend.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/workload.h"
#include "ascend/plugin/metrics.h"
#include "ascend/plugin/npu_exporter.h"

namespace {

using namespace ascend;

class Host {
 public:
  Host() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "metrics-bench-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    emu_ = std::make_unique<npu::Emulator>(dir_ + "/root");
    npu::LoadOptions o;
    o.make_nodes = false;
    o.majors = npu::DeviceMajors{240, 241, 242, 243, 244};
    o.npu_smi_binary = std::string(ASCEND_BIN_DIR) + "/npu-smi";
    check(emu_->load(*npu::builtin_profile("atlas800t-a3"), o), "load");
    check(emu_->set_workload(npu::Workload{1, 80, 10, 16384, 0}), "load-gen");
    check(emu_->set_fault(2, 0x80E18402, std::nullopt), "fault");
    for (auto b : {npu::Backend::kEmulator, npu::Backend::kDcmi}) {
      npu::BackendOptions bo;
      bo.backend = b;
      bo.root = emu_->root();
      auto q = npu::open_device_query(bo);
      check(q ? Status{} : Status(q.error()), "open backend");
      queries_.push_back(std::move(*q));
    }
    auto snap = queries_[0]->snapshot();
    check(snap ? Status{} : Status(snap.error()), "snapshot");
    snapshot_ = *snap;
    for (int phy = 0; phy < 4; ++phy) holders_[phy] = plugin::PodRef{"train", "job-0", "worker"};
  }
  ~Host() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  static void check(const Status& s, const char* what) {
    if (!s) {
      std::fprintf(stderr, "%s: %s\n", what, s.error().message().c_str());
      std::exit(1);
    }
  }
  // The sources a running plugin gives the exporter, with a fixed pod attribution.
  plugin::NpuExporter::Sources sources(int backend) const {
    plugin::NpuExporter::Sources s;
    const npu::DeviceQuery* q = queries_[static_cast<std::size_t>(backend)].get();
    s.telemetry = [q] { return q->telemetry(); };
    s.host = [this] { return snapshot_; };  // the plugin's host(): a copy of its snapshot
    s.holders = [this] { return holders_; };
    return s;
  }

 private:
  std::string dir_;
  std::unique_ptr<npu::Emulator> emu_;
  std::vector<std::unique_ptr<npu::DeviceQuery>> queries_;
  npu::DeviceSnapshot snapshot_;
  plugin::Attribution holders_;
};

Host& host() {
  static Host h;
  return h;
}

const char* backend_name(int b) {
  return b == 0 ? "emulator" : "dcmi";
}

void BM_Collect(benchmark::State& state) {
  const int b = static_cast<int>(state.range(0));
  plugin::NpuExporter exporter(host().sources(b));
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, exporter.Collect());
    bytes = out.str().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetLabel(std::string(backend_name(b)) + ", 16 chips, " + std::to_string(bytes) + " bytes");
}
BENCHMARK(BM_Collect)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_CollectFloor(benchmark::State& state) {
  prometheus::Registry empty;
  for (auto _ : state) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, empty.Collect());
    benchmark::DoNotOptimize(out.str().size());
  }
}
BENCHMARK(BM_CollectFloor)->Unit(benchmark::kMicrosecond);

void scrape_loop(benchmark::State& state, int port) {
  httplib::Client c("127.0.0.1", port);  // a connection per scrape, as Prometheus without keep-alive
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto r = c.Get("/metrics");
    if (!r || r->status != 200) {
      state.SkipWithError("scrape failed");
      break;
    }
    bytes = r->body.size();
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

void BM_HttpScrape(benchmark::State& state) {
  const int b = static_cast<int>(state.range(0));
  plugin::Metrics metrics;
  metrics.attach(std::make_shared<plugin::NpuExporter>(host().sources(b)));
  auto server = plugin::MetricsServer::start("127.0.0.1:0", metrics);
  if (!server) {
    state.SkipWithError(server.error().message().c_str());
    return;
  }
  scrape_loop(state, (*server)->port());
  state.SetLabel(std::string(backend_name(b)) + ", 16 chips");
}
BENCHMARK(BM_HttpScrape)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_HttpScrapeFloor(benchmark::State& state) {
  plugin::Metrics metrics;
  auto server = plugin::MetricsServer::start("127.0.0.1:0", metrics);
  if (!server) {
    state.SkipWithError(server.error().message().c_str());
    return;
  }
  scrape_loop(state, (*server)->port());
  state.SetLabel("nothing attached, no chips");
}
BENCHMARK(BM_HttpScrapeFloor)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
