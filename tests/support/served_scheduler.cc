#include "served_scheduler.h"

#include "ascend/common/kube_client.h"

namespace ascend::testing {

Result<std::unique_ptr<ServedScheduler>> ServedScheduler::start(topology::Cluster cluster,
                                                                const std::string& api_url,
                                                                const std::string& instance) {
  scheduler::ServeOptions o;
  o.listen = "127.0.0.1:0";
  o.extender_listen = "127.0.0.1:0";
  o.instance = instance;
  kube::Config cfg;
  cfg.server = api_url;
  auto s = scheduler::Server::create(o, std::move(cluster), nullptr, std::make_shared<kube::Client>(cfg));
  if (!s.ok()) return s.error();
  return std::unique_ptr<ServedScheduler>(new ServedScheduler(std::move(*s)));
}

ServedScheduler::ServedScheduler(std::unique_ptr<scheduler::Server> server) : server_(std::move(server)) {
  thread_ = std::thread([this] { (void)server_->run(); });
}

ServedScheduler::~ServedScheduler() {
  server_->stop();
  thread_.join();
}

}  // namespace ascend::testing
