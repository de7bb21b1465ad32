// The plugin's side of the HTTP contract with the scheduler extender (`ascend-scheduler serve`): the wire
// values, the JSON that carries them, and the one narrow interface through which the plugin talks to the
// scheduler (SchedulerApi), with its real implementation over cpp-httplib (HttpScheduler). Tests put a
// recording fake behind the same interface.
//
//   PUT  {url}/v1/nodes/{node}               the node's whole chips: health and whether they are in use
//   GET  {url}/v1/nodes/{node}/reservations  chip sets reserved for bound pods that have no devices yet
//   POST {url}/v1/nodes/{node}/allocations   "these chips were taken": the pod's launch env and rank table
//   GET  {url}/v1/jobs/{ns}/{job}/ranktable  the job's rank table now (rewritten after a fault recovery)
//
// Chips are named by their physical id on the wire. The parse functions are pure and never throw: bad JSON
// from the scheduler is an Error (EPROTO). HttpScheduler is thread-safe: every call opens its own
// connection, so a slow call (the reporter's PUT) never holds up another (Allocate's POST).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ascend/common/error.h"

namespace ascend::plugin {

struct Config;
class Metrics;

// ---- wire values
// --------------------------------------------------------------------------------------------

struct ChipReport {
  int phy_id = 0;
  bool healthy = true;  // the plugin's Healthy: health OK or Warning
  bool in_use = false;  // handed to a container, or holds vNPUs (not allocatable whole)
  // Telemetry for the scheduler's dashboard, as the last device snapshot showed it; -1: not known (not sent).
  int aicore_pct = -1;
  long long hbm_used_mb = -1, hbm_total_mb = -1;
  bool operator==(const ChipReport&) const = default;
};

// The body of PUT /v1/nodes/{node}: every whole chip of the node, ascending phy id.
struct InventoryReport {
  std::string resource;  // the whole-chip resource ("huawei.com/Ascend910")
  std::vector<ChipReport> chips;
  bool operator==(const InventoryReport&) const = default;
};

// One entry of GET /v1/nodes/{node}/reservations.
struct Reservation {
  std::string pod_namespace;
  std::string pod;
  std::string job;  // "" for a pod without a job
  std::vector<int> chips;
  bool operator==(const Reservation&) const = default;
};

// The 200 answer of POST /v1/nodes/{node}/allocations: the reservation these chips belong to and what the
// container of that pod gets.
struct Grant {
  std::string pod_namespace;
  std::string pod;
  std::string job;
  std::map<std::string, std::string> env;
  std::string ranktable_path;  // where the container sees the rank table; empty: no rank table
  std::string ranktable;       // the job's rank table, dumped with indent 4 (the file's content)
};

std::string inventory_body(const InventoryReport& r);
std::string allocation_body(const std::vector<int>& chips);
Result<std::vector<Reservation>> parse_reservations(std::string_view body);
Result<Grant> parse_grant(std::string_view body);
// The body of GET /v1/jobs/{ns}/{job}/ranktable: a JSON object, dumped with indent 4 as Grant::ranktable is
// (the same table gives the same text).
Result<std::string> parse_ranktable(std::string_view body);
// The "error" of a {"error": "..."} body; else the body itself, cut short.
std::string error_text(std::string_view body);

// ---- the URL
// ------------------------------------------------------------------------------------------------

struct SchedulerUrl {
  std::string origin;  // "http://host:port" or "https://host:port" (what the HTTP client connects to)
  std::string prefix;  // a path prefix without the trailing '/' ("" or "/ascend")
  bool https = false;
  std::string host;  // the host as written, an IPv6 address without its brackets ("::1")
  bool operator==(const SchedulerUrl&) const = default;
};

// http[s]://host[:port][/prefix]; a host may be a name, an IPv4 or a bracketed IPv6 address. No user
// info, query or fragment.
Result<SchedulerUrl> parse_scheduler_url(std::string_view url);

// True when `host` (a SchedulerUrl::host) can only be this machine: `localhost` (any case), an IPv4
// address in 127.0.0.0/8 in dotted-quad form, ::1, or an IPv4-mapped ::ffff:127.x.y.z. Any other name is
// the network, even one that resolves to a loopback address today: what a name resolves to can change.
bool loopback_host(std::string_view host);

// The --scheduler-ca-file must be readable and hold at least one PEM certificate: one that holds none would
// fail every https request, which is better said once at start than on every report.
Status check_ca_file(const std::string& path);

// ---- the interface
// ------------------------------------------------------------------------------------------

// How a call failed, as the Error's code:
//   ECONNREFUSED   no connection (refused, no route, name not resolved)
//   ETIMEDOUT      no answer in time
//   EIO            the connection broke, or TLS failed
//   EAGAIN         the scheduler answered 5xx
//   EINVAL 400, EACCES 401/403 (or a token file that cannot be read), ENOENT 404, EBUSY 409 (the message
//   carries the scheduler's "error" text; for an allocation it is "the scheduler refuses chips 2,3: <text>",
//   fit for the pod's event)
//   EPROTO         another status, or a 200 whose body breaks the contract
class SchedulerApi {
 public:
  virtual ~SchedulerApi() = default;
  virtual Status put_inventory(const InventoryReport& report) = 0;
  virtual Result<std::vector<Reservation>> reservations() = 0;
  // `chips`: the phy ids of one container's whole-chip request, ascending.
  virtual Result<Grant> allocation_taken(const std::vector<int>& chips) = 0;
  // Undoes allocation_taken when the Allocate failed after it: the pod waits for these chips again.
  virtual Status allocation_returned(const std::vector<int>& chips) = 0;
  // The job's rank table now, as Grant::ranktable holds it; ENOENT when the scheduler has no such job.
  virtual Result<std::string> job_ranktable(const std::string& ns, const std::string& job) = 0;
};

// The scheduler is away (no connection, no answer, 5xx): retry soon, and answer the kubelet as if there were
// no scheduler. Anything else is an answer (a refusal) from a scheduler that is up.
bool scheduler_unavailable(const Error& e);

// Per-call time limits (connect, and each read or write).
struct SchedulerTimeouts {
  std::chrono::milliseconds inventory{2000};
  std::chrono::milliseconds reservations{500};
  std::chrono::milliseconds allocation{1000};
  std::chrono::milliseconds ranktable{1000};
};

// The most a GET answer may hold (a rank table of some 100 000 chips): a longer one fails (EPROTO) and is
// not read further.
inline constexpr std::size_t kMaxAnswerBytes = 16U << 20;

class HttpScheduler final : public SchedulerApi {
 public:
  // `cfg.node_name` must be set. The token file's content, trimmed, is the bearer token; it is read for
  // every request (a Secret may be rotated, or appear after the plugin started), and a request whose token
  // cannot be read fails with EACCES without being sent. `metrics` (may be null) counts requests and
  // errors per call and must outlive the client.
  static Result<std::unique_ptr<HttpScheduler>> create(const Config& cfg, Metrics* metrics,
                                                       SchedulerTimeouts timeouts = {});

  Status put_inventory(const InventoryReport& report) override;
  Result<std::vector<Reservation>> reservations() override;
  Result<Grant> allocation_taken(const std::vector<int>& chips) override;
  Status allocation_returned(const std::vector<int>& chips) override;
  Result<std::string> job_ranktable(const std::string& ns, const std::string& job) override;

  const std::string& node() const { return node_; }

 private:
  HttpScheduler() = default;
  struct Answer {
    int code = 0;      // the HTTP status; 0: none came
    std::string text;  // not 2xx: the scheduler's "error"
  };
  // One request: a 2xx body, or the Error described above.
  Result<std::string> exchange(const char* method, const std::string& path, const std::string& body,
                               std::chrono::milliseconds timeout, Answer* answer) const;
  void count(const char* call, bool answered) const;
  Result<std::string> token() const;

  SchedulerUrl url_;
  std::string node_;
  std::string token_file_;
  std::string ca_file_;
  SchedulerTimeouts timeouts_;
  Metrics* metrics_ = nullptr;
};

}  // namespace ascend::plugin
