#include "ascend/plugin/scheduler_client.h"

#include <httplib.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <nlohmann/json.hpp>

#include "ascend/common/fs.h"
#include "ascend/common/http_url.h"
#include "ascend/common/kube_client.h"
#include "ascend/plugin/config.h"
#include "ascend/plugin/metrics.h"

namespace ascend::plugin {

using nlohmann::json;

// ---- JSON
// ---------------------------------------------------------------------------------------------------

// The telemetry fields only when known (a scheduler before them reads the rest the same).
void to_json(json& j, const ChipReport& c) {
  j = {{"phy_id", c.phy_id}, {"healthy", c.healthy}, {"in_use", c.in_use}};
  if (c.aicore_pct >= 0) j["aicore_pct"] = c.aicore_pct;
  if (c.hbm_total_mb > 0 && c.hbm_used_mb >= 0) {
    j["hbm_used_mb"] = c.hbm_used_mb;
    j["hbm_total_mb"] = c.hbm_total_mb;
  }
}
void from_json(const json& j, ChipReport& c) {
  j.at("phy_id").get_to(c.phy_id);
  j.at("healthy").get_to(c.healthy);
  j.at("in_use").get_to(c.in_use);
  c.aicore_pct = j.value("aicore_pct", -1);
  c.hbm_used_mb = j.value("hbm_used_mb", -1LL);
  c.hbm_total_mb = j.value("hbm_total_mb", -1LL);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(InventoryReport, resource, chips)

// Bodies that only this file sees (a named namespace: the macros' functions are inline, and unused ones in an
// anonymous namespace would be flagged).
namespace wire {

struct AllocationRequest {
  std::vector<int> chips;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AllocationRequest, chips)

struct ErrorBody {
  std::string error;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ErrorBody, error)

}  // namespace wire

// "namespace" is a C++ keyword, so the NLOHMANN_DEFINE_* macros cannot name that key: the two types that
// carry it are mapped by hand. Wrong types throw json::type_error, caught in parse() below.
void from_json(const json& j, Reservation& r) {
  j.at("namespace").get_to(r.pod_namespace);
  j.at("pod").get_to(r.pod);
  r.job = j.contains("job") ? j.at("job").get<std::string>() : "";
  j.at("chips").get_to(r.chips);
}

void from_json(const json& j, Grant& g) {
  j.at("namespace").get_to(g.pod_namespace);
  j.at("pod").get_to(g.pod);
  g.job = j.contains("job") ? j.at("job").get<std::string>() : "";
  g.env = j.contains("env") ? j.at("env").get<std::map<std::string, std::string>>()
                            : std::map<std::string, std::string>{};
  const bool has_path = j.contains("ranktable_path");
  const bool has_table = j.contains("ranktable");
  if (has_path != has_table) {
    throw std::invalid_argument("\"ranktable\" and \"ranktable_path\" come together or not at all");
  }
  if (has_table) {
    j.at("ranktable_path").get_to(g.ranktable_path);
    const json& t = j.at("ranktable");
    if (!t.is_object()) throw std::invalid_argument("\"ranktable\" is not a JSON object");
    g.ranktable = t.dump(4);
  }
}

namespace {

// The parse boundary: a body from the network becomes a value or an Error, never an exception.
template <typename T, typename Get>
Result<T> parse(std::string_view body, std::string_view what, Get get) {
  try {
    return get(json::parse(body));
  } catch (const std::exception& e) {
    return Error(EPROTO, fmt::format("{}: {}", what, e.what()));
  }
}

}  // namespace

std::string inventory_body(const InventoryReport& r) {
  return json(r).dump();
}

std::string allocation_body(const std::vector<int>& chips) {
  return json(wire::AllocationRequest{chips}).dump();
}

Result<std::vector<Reservation>> parse_reservations(std::string_view body) {
  return parse<std::vector<Reservation>>(body, "the scheduler's reservations", [](const json& j) {
    return j.at("reservations").get<std::vector<Reservation>>();
  });
}

Result<Grant> parse_grant(std::string_view body) {
  return parse<Grant>(body, "the scheduler's allocation answer",
                      [](const json& j) { return j.get<Grant>(); });
}

Result<std::string> parse_ranktable(std::string_view body) {
  return parse<std::string>(body, "the scheduler's rank table", [](const json& j) {
    if (!j.is_object()) throw std::invalid_argument("not a JSON object");
    return j.dump(4);
  });
}

std::string error_text(std::string_view body) {
  auto e = parse<wire::ErrorBody>(body, "", [](const json& j) { return j.get<wire::ErrorBody>(); });
  if (e.ok() && !e->error.empty()) return e->error;
  constexpr std::size_t kMax = 200;
  std::string out(body.substr(0, kMax));
  std::replace(out.begin(), out.end(), '\n', ' ');
  if (body.size() > kMax) out += "...";
  return out.empty() ? "(no body)" : out;
}

// ---- the URL
// ------------------------------------------------------------------------------------------------

Result<SchedulerUrl> parse_scheduler_url(std::string_view url) {
  auto u = parse_http_url(url);
  if (!u.ok())
    return Error::invalid(fmt::format("'{}' is not a scheduler URL: {}", url, u.error().message()));
  return SchedulerUrl{u->origin(), u->prefix, u->https, u->host};
}

bool loopback_host(std::string_view host) {
  const std::string h(host);
  if (h.size() == 9 && ::strncasecmp(h.c_str(), "localhost", 9) == 0) return true;
  // inet_pton takes only the strict forms (four decimal parts; no "127.1" or "0x7f.0.0.1", which
  // getaddrinfo would read as other addresses), so what passes here is what the client connects to.
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

// ---- HTTP
// ---------------------------------------------------------------------------------------------------

namespace {

std::string trim(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  return s;
}

int transport_errno(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress:
      return ECONNREFUSED;
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::Read:  // httplib reports a read timeout as a read error
      return ETIMEDOUT;
    default:
      return EIO;
  }
}

// What went wrong on the way, in words: for a certificate the scheduler's CA (or the system's) does not
// vouch for, OpenSSL's reason ("self-signed certificate", "certificate has expired"), since that is what
// the operator has to fix.
std::string transport_text(httplib::Client& client, httplib::Error e) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (e == httplib::Error::SSLServerVerification) {
    const long v = client.get_openssl_verify_result();
    return v == X509_V_OK
               ? "the server's certificate does not name this host"
               : fmt::format("the server's certificate is not trusted: {}", X509_verify_cert_error_string(v));
  }
  if (e == httplib::Error::SSLLoadingCerts) return "the CA certificates cannot be loaded";
#else
  (void)client;
#endif
  return httplib::to_string(e);
}

int status_errno(int status) {
  if (status >= 500) return EAGAIN;
  switch (status) {
    case 400:
      return EINVAL;
    case 401:
    case 403:
      return EACCES;
    case 404:
      return ENOENT;
    case 409:
      return EBUSY;
    default:
      return EPROTO;
  }
}

}  // namespace

Status check_ca_file(const std::string& path) {
  auto pem = read_file(path, 4U << 20);
  if (!pem) return pem.error().context("--scheduler-ca-file");
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())),
                                                &BIO_free);
  if (!bio) return Error(ENOMEM, "--scheduler-ca-file " + path + ": out of memory");
  STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr);
  int certs = 0;
  if (infos != nullptr) {
    for (int i = 0; i < sk_X509_INFO_num(infos); ++i) certs += sk_X509_INFO_value(infos, i)->x509 != nullptr;
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
  }
  if (certs == 0) return Error::invalid("--scheduler-ca-file " + path + " holds no PEM certificate");
  return {};
}

bool scheduler_unavailable(const Error& e) {
  return e.code() == ECONNREFUSED || e.code() == ETIMEDOUT || e.code() == EIO || e.code() == EAGAIN;
}

Result<std::unique_ptr<HttpScheduler>> HttpScheduler::create(const Config& cfg, Metrics* metrics,
                                                             SchedulerTimeouts timeouts) {
  std::unique_ptr<HttpScheduler> s(new HttpScheduler());
  ASCEND_ASSIGN(s->url_, parse_scheduler_url(cfg.scheduler_url), "--scheduler-url");
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (s->url_.https) return Error::invalid("--scheduler-url: this build of cpp-httplib has no TLS support");
#endif
  if (!cfg.scheduler_ca_file.empty()) ASCEND_CHECK(check_ca_file(cfg.scheduler_ca_file), "");
  if (cfg.node_name.empty())
    return Error::invalid("--node-name is empty (and so are $NODE_NAME and the host name)");
  s->node_ = cfg.node_name;
  s->token_file_ = cfg.scheduler_token_file;
  if (!s->token_file_.empty()) {
    // Not fatal: a Kubernetes Secret may appear (or be rotated) after the plugin starts.
    if (auto t = s->token(); !t)
      spdlog::warn("{}; requests go without a token until it can be read", t.error().message());
  }
  s->ca_file_ = cfg.scheduler_ca_file;
  s->timeouts_ = timeouts;
  s->metrics_ = metrics;
  return s;
}

Result<std::string> HttpScheduler::token() const {
  // Read for every request, so that a rotated Secret takes effect without a restart.
  auto t = read_file(token_file_, 64U << 10);
  if (!t) return Error(EACCES, "--scheduler-token-file: " + t.error().message());
  std::string out = trim(std::move(t).value());
  if (out.empty()) return Error(EACCES, "--scheduler-token-file " + token_file_ + " is empty");
  return out;
}

Result<std::string> HttpScheduler::exchange(const char* method, const std::string& path,
                                            const std::string& body, std::chrono::milliseconds timeout,
                                            Answer* answer) const {
  const std::string what = fmt::format("scheduler {} {}{}", method, url_.origin, path);
  httplib::Client client(url_.origin);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  client.set_keep_alive(false);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (url_.https) {
    client.enable_server_certificate_verification(true);
    if (!ca_file_.empty()) client.set_ca_cert_path(ca_file_);
  }
#endif
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!token_file_.empty()) {
    auto t = token();
    if (!t) return t.error().context(what);
    headers.emplace("Authorization", "Bearer " + *t);
  }

  const std::string_view m = method;
  // A GET's answer is read through a receiver that stops at kMaxAnswerBytes (chunked or not).
  std::string got;
  bool too_long = false;
  auto receive = [&](const char* data, std::size_t n) {
    too_long = got.size() + n > kMaxAnswerBytes;
    if (!too_long) got.append(data, n);
    return !too_long;
  };
  httplib::Result res = m == "GET"   ? client.Get(path, headers, receive)
                        : m == "PUT" ? client.Put(path, headers, body, "application/json")
                                     : client.Post(path, headers, body, "application/json");
  if (too_long)
    return Error(EPROTO, fmt::format("{}: the answer is longer than {} bytes", what, kMaxAnswerBytes));
  if (!res) {
    return Error(transport_errno(res.error()),
                 fmt::format("{}: {}", what, transport_text(client, res.error())));
  }
  if (m == "GET") res->body = std::move(got);
  answer->code = res->status;
  if (res->status >= 200 && res->status < 300) return std::move(res->body);
  answer->text = error_text(res->body);
  return Error(status_errno(res->status), fmt::format("{}: {} {}", what, res->status, answer->text));
}

void HttpScheduler::count(const char* call, bool answered) const {
  if (metrics_ != nullptr) metrics_->observe_scheduler_call(call, answered);
}

Status HttpScheduler::put_inventory(const InventoryReport& report) {
  Answer answer;
  auto r = exchange("PUT", url_.prefix + "/v1/nodes/" + kube::escape(node_), inventory_body(report),
                    timeouts_.inventory, &answer);
  count("inventory", r.ok());
  if (!r) return r.error();
  return {};
}

Result<std::vector<Reservation>> HttpScheduler::reservations() {
  Answer answer;
  auto r = exchange("GET", url_.prefix + "/v1/nodes/" + kube::escape(node_) + "/reservations", "",
                    timeouts_.reservations, &answer);
  auto out = r ? parse_reservations(*r) : Result<std::vector<Reservation>>(r.error());
  count("reservations", out.ok());
  return out;
}

Result<Grant> HttpScheduler::allocation_taken(const std::vector<int>& chips) {
  Answer answer;
  auto r = exchange("POST", url_.prefix + "/v1/nodes/" + kube::escape(node_) + "/allocations",
                    allocation_body(chips), timeouts_.allocation, &answer);
  auto out = r ? parse_grant(*r) : Result<Grant>(r.error());
  // 404 (no reservation of this size) and 409 (none with these chips) are answers, not failures.
  count("allocation", out.ok() || answer.code == 404 || answer.code == 409);
  if (answer.code == 409) {
    // This message fails the pod: the scheduler's reason, without the URL.
    return Error(EBUSY,
                 fmt::format("the scheduler refuses chips {}: {}", fmt::join(chips, ","), answer.text));
  }
  return out;
}

Status HttpScheduler::allocation_returned(const std::vector<int>& chips) {
  Answer answer;
  auto r = exchange("POST", url_.prefix + "/v1/nodes/" + kube::escape(node_) + "/allocations/return",
                    allocation_body(chips), timeouts_.allocation, &answer);
  count("allocation", r.ok());
  if (!r) return r.error();
  return {};
}

Result<std::string> HttpScheduler::job_ranktable(const std::string& ns, const std::string& job) {
  Answer answer;
  auto r =
      exchange("GET", url_.prefix + "/v1/jobs/" + kube::escape(ns) + "/" + kube::escape(job) + "/ranktable",
               "", timeouts_.ranktable, &answer);
  auto out = r ? parse_ranktable(*r) : Result<std::string>(r.error());
  count("ranktable", out.ok() || answer.code == 404);  // a job the scheduler no longer has is an answer
  return out;
}

}  // namespace ascend::plugin
