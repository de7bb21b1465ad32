// `ascend-scheduler serve`: reads the cluster file, opens the server and runs it until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "ascend/common/guarded.h"
#include "ascend/common/kube_client.h"
#include "ascend/common/log.h"
#include "ascend/scheduler/commands.h"
#include "ascend/scheduler/input.h"

namespace ascend::scheduler {

int run_serve(const ServeCommand& o, std::ostream& err) {
  if (auto s = setup_logging({o.log_level, o.log_file}); !s.ok()) {
    err << "ascend-scheduler: " << s.error().message() << "\n";
    return kExitBadInput;
  }
  auto cluster = load_cluster(o.server.cluster);
  if (!cluster.ok()) {
    err << "ascend-scheduler: " << cluster.error().message() << "\n";
    return kExitBadInput;
  }
  std::shared_ptr<kube::Client> api;
  if (!o.server.no_kube) {
    auto cfg = kube::resolve_config(
        {o.server.kubeconfig, o.server.kube_api, o.server.kube_token_file, o.server.kube_ca_file, true});
    if (!cfg.ok()) {
      err << "ascend-scheduler: " << cfg.error().message() << "\n";
      return kExitBadInput;
    }
    if (*cfg) {
      spdlog::info("API server {} ({})", (*cfg)->server, (*cfg)->source);
      api = std::make_shared<kube::Client>(std::move(**cfg));
    }
  }
  ServeOptions so = o.server;
  if (so.instance.empty()) {
    const char* pod = std::getenv("POD_NAME");
    char host[256] = {};
    so.instance =
        pod != nullptr ? pod : (gethostname(host, sizeof host - 1) == 0 ? host : "ascend-scheduler");
  }
  // Signals are taken by one thread with sigwait (the server's stop is not async-signal-safe); every other
  // thread, started after this, inherits the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);  // sent by this function to end the signal thread when the server stops itself
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto server = Server::create(so, std::move(*cluster), nullptr, std::move(api));
  if (!server.ok()) {
    err << "ascend-scheduler: " << server.error().message() << "\n";
    return server.error().code() == EADDRINUSE || server.error().code() == EIO ? kExitIo : kExitBadInput;
  }
  Server& srv = **server;
  std::thread waiter([&srv, set] {
    int sig = 0;
    sigwait(&set, &sig);
    // A stop that throws would leave the server running deaf to signals: exit with the reason instead.
    if (!run_guarded(
            "signal thread", [&srv] { srv.stop(); }, "exiting")) {
      spdlog::shutdown();  // flushes the log
      ::_exit(kExitIo);
    }
  });
  auto host_of = [](const std::string& listen) { return listen.substr(0, listen.rfind(':')); };
  // The two lines a supervisor or test reads to learn the ports (with HOST:0): the plugins' first.
  std::cout << "ascend-scheduler: serving " << (o.server.tls_cert.empty() ? "http" : "https") << "://"
            << host_of(o.server.listen) << ":" << srv.port() << "\n"
            << "ascend-scheduler: extender " << (o.server.extender_tls_cert.empty() ? "http" : "https")
            << "://" << host_of(o.server.extender_listen) << ":" << srv.extender_port() << std::endl;
  auto st = srv.run();
  // Wake the signal thread if the server stopped by itself.
  pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  if (!st.ok()) {
    err << "ascend-scheduler: " << st.error().message() << "\n";
    return kExitIo;
  }
  return kExitOk;
}

}  // namespace ascend::scheduler
