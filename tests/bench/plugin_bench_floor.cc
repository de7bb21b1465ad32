// plugin_bench's floor server: the Device Plugin API's GetDevicePluginOptions on grpc++'s callback API
// (grpc_floor.h), on the unix socket of `--serve SOCKET`, until SIGTERM. A program of its own, linked
// with gRPC and the generated Device Plugin API only, so that its resident memory after as many calls is what
// a gRPC server of this service costs on these libraries, with none of the plugin's code or other libraries
// (spdlog, yaml-cpp, cpp-httplib, prometheus-cpp), nor the bench's (Google Benchmark, the emulator).
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "grpc_floor.h"

int main(int argc, char** argv) {
  // Alone (scripts/bench runs every program of bench/, with its own arguments): nothing to measure.
  if (argc != 3 || std::strcmp(argv[1], "--serve") != 0) {
    std::fprintf(
        stderr,
        "plugin_bench_floor: plugin_bench's floor server, started by plugin_bench (--serve SOCKET)\n");
    return 2;
  }
  ascend::bench::FloorService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix://") + argv[2], grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server) return 1;
  server->Wait();  // until SIGTERM ends the process
  return 0;
}
