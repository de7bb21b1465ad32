// A fake scheduler extender for the device plugin's tests, written with cpp-httplib's server on loopback: it
// answers the plugin's side of the scheduler contract (inventory PUT, reservations GET, allocations POST,
// a job's rank table GET) with what the test sets, and records every request. It can listen late (start after
// the plugin), slowly (a delay before each answer), over https, and require a bearer token (401 missing, 403
// wrong).
//
// Thread-safe: the test thread sets answers and reads requests while httplib's threads serve.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace ascend::testing {

struct SchedulerRequest {
  std::string method;
  std::string path;
  std::string body;
  std::string authorization;
  std::string content_type;
  std::chrono::steady_clock::time_point at;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

class FakeScheduler {
 public:
  // `prefix`: the path under which the endpoints live ("" or "/ascend").
  explicit FakeScheduler(std::string prefix = "");
  ~FakeScheduler();
  FakeScheduler(const FakeScheduler&) = delete;
  FakeScheduler& operator=(const FakeScheduler&) = delete;

  // Listens on `host`:`port` (0: a free port) and returns the port; -1 when it cannot. With a cert and
  // key, serves https. `host` is an IPv4 address.
  int start(int port = 0, const std::string& cert = "", const std::string& key = "",
            const std::string& host = "127.0.0.1");
  void stop();
  std::string url() const;  // http(s)://<host>:<port><prefix>
  int port() const { return port_; }

  // Answers. Inventory: 200 {"node", "chips"} unless set otherwise. Reservations: the list set here.
  // Allocations: the answer set for exactly those chips, else 404 as for a pod the scheduler does not know.
  void set_inventory_answer(int status, const std::string& error = "");
  void set_reservations(nlohmann::json reservations);
  void set_allocation_answer(std::vector<int> chips, int status, nlohmann::json body);
  // GET /v1/jobs/{ns}/{job}/ranktable: the table set here, else 404 as for a job the scheduler does not have.
  void set_job_ranktable(const std::string& ns, const std::string& job, nlohmann::json table);
  void erase_job_ranktable(const std::string& ns, const std::string& job);
  // While held, every request is recorded and then left unanswered until release() (or stop()).
  void hold();
  void release();
  // How many requests wait for release() now.
  int held() const;
  void require_token(std::string token);

  std::vector<SchedulerRequest> requests() const;
  std::vector<SchedulerRequest> requests(const std::string& method) const;
  // Waits for a request, after the one the previous wait_for matched, that satisfies `pred`.
  bool wait_for(const std::function<bool(const SchedulerRequest&)>& pred, std::chrono::milliseconds timeout,
                SchedulerRequest* out = nullptr);

 private:
  void routes();

  const std::string prefix_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool https_ = false;
  std::string host_ = "127.0.0.1";

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SchedulerRequest> got_;
  std::size_t cursor_ = 0;
  int inventory_status_ = 200;
  std::string inventory_error_;
  nlohmann::json reservations_ = nlohmann::json::array();
  std::map<std::vector<int>, std::pair<int, nlohmann::json>> allocations_;
  std::map<std::string, nlohmann::json> ranktables_;  // "ns/job"
  bool holding_ = false;
  int held_ = 0;
  std::string token_;
};

}  // namespace ascend::testing
