// ascend-scheduler serve in this process as a cache of an API server (the stand-in, fake_apiserver.h): its
// views and its extender on loopback ports of their own, served on a thread of its own until it ends.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "ascend/common/error.h"
#include "ascend/scheduler/server.h"
#include "ascend/topology/cluster.h"

namespace ascend::testing {

class ServedScheduler {
 public:
  // Starts `cluster`'s scheduler (reporting instance `instance`) against the API server at `api_url`; the
  // error of Server::create when it cannot.
  static Result<std::unique_ptr<ServedScheduler>> start(topology::Cluster cluster, const std::string& api_url,
                                                        const std::string& instance = "bench");
  // Stops the server and waits for its thread.
  ~ServedScheduler();
  ServedScheduler(const ServedScheduler&) = delete;
  ServedScheduler& operator=(const ServedScheduler&) = delete;

  int port() const { return server_->port(); }                    // the views (/readyz, /v1/cluster, ...)
  int extender_port() const { return server_->extender_port(); }  // /filter, /bind, ...
  scheduler::Server& server() { return *server_; }

 private:
  explicit ServedScheduler(std::unique_ptr<scheduler::Server> server);

  std::unique_ptr<scheduler::Server> server_;
  std::thread thread_;
};

}  // namespace ascend::testing
