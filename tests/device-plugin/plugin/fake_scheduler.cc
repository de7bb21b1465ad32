#include "fake_scheduler.h"

#include <httplib.h>

namespace ascend::testing {

using nlohmann::json;

FakeScheduler::FakeScheduler(std::string prefix) : prefix_(std::move(prefix)) {}

FakeScheduler::~FakeScheduler() {
  stop();
}

int FakeScheduler::start(int port, const std::string& cert, const std::string& key, const std::string& host) {
  stop();
  host_ = host;
  https_ = !cert.empty();
  if (https_) {
    server_ = std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) return -1;
  routes();
  if (port == 0) {
    port_ = server_->bind_to_any_port(host_.c_str());
  } else {
    port_ = server_->bind_to_port(host_.c_str(), port) ? port : -1;
  }
  if (port_ <= 0) return -1;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 200 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return port_;
}

void FakeScheduler::stop() {
  if (!server_) return;
  release();
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

std::string FakeScheduler::url() const {
  return std::string(https_ ? "https" : "http") + "://" + host_ + ":" + std::to_string(port_) + prefix_;
}

void FakeScheduler::set_inventory_answer(int status, const std::string& error) {
  std::lock_guard lock(mu_);
  inventory_status_ = status;
  inventory_error_ = error;
}

void FakeScheduler::set_reservations(json reservations) {
  std::lock_guard lock(mu_);
  reservations_ = std::move(reservations);
}

void FakeScheduler::set_allocation_answer(std::vector<int> chips, int status, json body) {
  std::lock_guard lock(mu_);
  allocations_[std::move(chips)] = {status, std::move(body)};
}

void FakeScheduler::set_job_ranktable(const std::string& ns, const std::string& job, json table) {
  std::lock_guard lock(mu_);
  ranktables_[ns + "/" + job] = std::move(table);
}

void FakeScheduler::erase_job_ranktable(const std::string& ns, const std::string& job) {
  std::lock_guard lock(mu_);
  ranktables_.erase(ns + "/" + job);
}

void FakeScheduler::hold() {
  std::lock_guard lock(mu_);
  holding_ = true;
}

void FakeScheduler::release() {
  {
    std::lock_guard lock(mu_);
    holding_ = false;
  }
  cv_.notify_all();
}

int FakeScheduler::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

void FakeScheduler::require_token(std::string token) {
  std::lock_guard lock(mu_);
  token_ = std::move(token);
}

std::vector<SchedulerRequest> FakeScheduler::requests() const {
  std::lock_guard lock(mu_);
  return got_;
}

std::vector<SchedulerRequest> FakeScheduler::requests(const std::string& method) const {
  std::vector<SchedulerRequest> out;
  for (auto& r : requests()) {
    if (r.method == method) out.push_back(std::move(r));
  }
  return out;
}

bool FakeScheduler::wait_for(const std::function<bool(const SchedulerRequest&)>& pred,
                             std::chrono::milliseconds timeout, SchedulerRequest* out) {
  std::unique_lock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (; cursor_ < got_.size(); ++cursor_) {
      if (pred(got_[cursor_])) {
        if (out != nullptr) *out = got_[cursor_];
        ++cursor_;
        return true;
      }
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && cursor_ == got_.size()) return false;
  }
}

void FakeScheduler::routes() {
  // Records the request and checks the token; false (with the answer set) when the token is wrong.
  auto admit = [this](const httplib::Request& req, httplib::Response& res) {
    std::string token;
    {
      std::unique_lock lock(mu_);
      got_.push_back({req.method, req.path, req.body, req.get_header_value("Authorization"),
                      req.get_header_value("Content-Type"), std::chrono::steady_clock::now()});
      cv_.notify_all();
      ++held_;
      cv_.wait(lock, [this] { return !holding_; });
      --held_;
      token = token_;
    }
    if (token.empty()) return true;
    const std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + token) return true;
    res.status = auth.empty() ? 401 : 403;
    res.set_content(json{{"error", auth.empty() ? "a bearer token is required" : "wrong token"}}.dump(),
                    "application/json");
    return false;
  };
  const std::string node = prefix_ + "/v1/nodes/([^/]+)";
  server_->Put(node, [this, admit](const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res)) return;
    const json body = json::parse(req.body, nullptr, false);
    std::lock_guard lock(mu_);
    res.status = inventory_status_;
    if (inventory_status_ == 200) {
      const std::size_t n = body.is_object() && body.contains("chips") ? body["chips"].size() : 0;
      res.set_content(json{{"node", req.matches[1].str()}, {"chips", n}}.dump(), "application/json");
    } else {
      res.set_content(json{{"error", inventory_error_}}.dump(), "application/json");
    }
  });
  server_->Get(node + "/reservations", [this, admit](const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res)) return;
    std::lock_guard lock(mu_);
    res.set_content(json{{"node", req.matches[1].str()}, {"reservations", reservations_}}.dump(),
                    "application/json");
  });
  server_->Post(node + "/allocations", [this, admit](const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res)) return;
    const json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("chips") || !body["chips"].is_array()) {
      res.status = 400;
      res.set_content(json{{"error", "bad body"}}.dump(), "application/json");
      return;
    }
    const auto chips = body["chips"].get<std::vector<int>>();
    std::lock_guard lock(mu_);
    auto it = allocations_.find(chips);
    if (it == allocations_.end()) {
      res.status = 404;
      res.set_content(
          json{{"error", "no pending reservation of " + std::to_string(chips.size()) + " chips"}}.dump(),
          "application/json");
      return;
    }
    res.status = it->second.first;
    res.set_content(it->second.second.dump(), "application/json");
  });
  server_->Get(prefix_ + "/v1/jobs/([^/]+)/([^/]+)/ranktable",
               [this, admit](const httplib::Request& req, httplib::Response& res) {
                 if (!admit(req, res)) return;
                 const std::string key = req.matches[1].str() + "/" + req.matches[2].str();
                 std::lock_guard lock(mu_);
                 auto it = ranktables_.find(key);
                 if (it == ranktables_.end()) {
                   res.status = 404;
                   res.set_content(json{{"error", "no job " + key}}.dump(), "application/json");
                   return;
                 }
                 res.set_content(it->second.dump() + "\n", "application/json");
               });
}

}  // namespace ascend::testing
