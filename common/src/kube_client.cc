// The Kubernetes API client (kube_client.h): connections, TLS, requests and streams over cpp-httplib.
#include "ascend/common/kube_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <mutex>
#include <set>

#include "ascend/common/fs.h"
#include "ascend/common/http_url.h"
#include "ascend/common/json_depth.h"

namespace ascend::kube {

using nlohmann::json;

namespace {

constexpr time_t kConnectTimeoutSec = 5;
constexpr time_t kReadTimeoutSec = 30;
constexpr time_t kStreamMarginSec = 30;
constexpr time_t kStreamDefaultSec = 3600;
constexpr std::size_t kMaxBody = 256U << 20;      // a LIST of every pod of a large cluster fits
constexpr std::size_t kMaxLine = 16U << 20;       // one watch event
constexpr std::size_t kMaxErrorBody = 64U << 10;  // a non-2xx answer to a stream
constexpr std::size_t kMaxMessage = 300;          // of a Status.message in an error
constexpr std::size_t kMaxIdle = 4;               // pooled keep-alive connections
constexpr int kMaxJsonDepth = 256;

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct StoreFree {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using StorePtr = std::unique_ptr<X509_STORE, StoreFree>;

BioPtr mem_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// scheme://host[:port][/prefix]; the host without IPv6 brackets, as httplib connects to it.
struct Endpoint {
  bool https = true;
  std::string host;
  int port = 443;
  std::string prefix;  // a path the API server is served under (a proxy's), without the trailing '/'
};

Result<Endpoint> parse_server(std::string_view url) {
  auto u = parse_http_url(url);
  if (!u.ok()) return Error::invalid(fmt::format("API server URL '{}': {}", url, u.error().message()));
  return Endpoint{u->https, u->host, u->port, u->prefix};
}

// The client's TLS material, parsed once; each connection gets its own SSL context from it.
struct Tls {
  std::string ca_pem;   // certificate-authority-data
  std::string ca_file;  // certificate-authority
  std::unique_ptr<X509, X509Free> cert;
  std::unique_ptr<EVP_PKEY, PkeyFree> key;
  bool insecure = false;
};

Result<std::string> pem_of(const std::string& data, const std::string& file, std::string_view what) {
  if (!data.empty() || file.empty()) return data;
  ASCEND_ASSIGN(std::string pem, read_file(file, 1U << 20), fmt::format("read the {}", what));
  return pem;
}

Result<StorePtr> ca_store(const std::string& pem) {
  StorePtr store(X509_STORE_new());
  BioPtr bio = mem_bio(pem);
  int n = 0;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store.get(), x);
    X509_free(x);
    ++n;
  }
  if (n == 0) return Error::invalid("certificate-authority-data holds no PEM certificate");
  return store;
}

Result<Tls> load_tls(const Config& c) {
  Tls t;
  t.insecure = c.insecure_skip_tls_verify;
  t.ca_pem = c.ca_data;
  if (t.ca_pem.empty()) t.ca_file = c.ca_file;
  if (!t.ca_pem.empty()) ASCEND_CHECK(ca_store(t.ca_pem), "");
  ASCEND_ASSIGN(std::string cert_pem, pem_of(c.client_cert_data, c.client_cert_file, "client certificate"),
                "");
  ASCEND_ASSIGN(std::string key_pem, pem_of(c.client_key_data, c.client_key_file, "client key"), "");
  if (cert_pem.empty() != key_pem.empty())
    return Error::invalid("a client certificate needs its key, and back");
  if (cert_pem.empty()) return t;
  t.cert.reset(PEM_read_bio_X509(mem_bio(cert_pem).get(), nullptr, nullptr, nullptr));
  if (!t.cert) return Error::invalid("the client certificate is not a PEM certificate");
  t.key.reset(PEM_read_bio_PrivateKey(mem_bio(key_pem).get(), nullptr, nullptr, nullptr));
  if (!t.key) return Error::invalid("the client key is not an unencrypted PEM private key");
  if (X509_check_private_key(t.cert.get(), t.key.get()) != 1)
    return Error::invalid("the client key does not belong to the client certificate");
  return t;
}

std::string one_line(std::string_view s, std::size_t max) {
  std::string out(s.substr(0, max));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  if (s.size() > max) out += "...";
  return out;
}

std::string short_path(std::string_view pq) {
  return one_line(pq, 200);
}

// The error for a non-2xx answer: "PATCH /api/v1/...: 409 Conflict: <Status.message>".
Error status_error(std::string_view method, std::string_view pq, int status, std::string_view http_reason,
                   std::string_view body) {
  std::string reason(http_reason), message;
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && !json_nests_deeper_than(body, kMaxJsonDepth)) {
    if (auto it = j.find("reason"); it != j.end() && it->is_string() && !it->get<std::string>().empty())
      reason = it->get<std::string>();
    if (auto it = j.find("message"); it != j.end() && it->is_string()) message = it->get<std::string>();
  } else {
    message = body;
  }
  const int code = kube_errno(status, j.is_object() ? reason : "");
  std::string text = fmt::format("{} {}: {}", method, short_path(pq), status);
  if (!reason.empty()) text += " " + reason;
  if (!message.empty()) text += ": " + one_line(message, kMaxMessage);
  return {code, text};
}

// The JSON body of a 2xx answer.
Result<json> parse_body(std::string_view method, std::string_view pq, const std::string& body) {
  if (body.empty()) return json(nullptr);
  json j = json_nests_deeper_than(body, kMaxJsonDepth) ? json(json::value_t::discarded)
                                                       : json::parse(body, nullptr, false);
  if (j.is_discarded())
    return Error(EIO, fmt::format("{} {}: the API server answered something that is not JSON", method,
                                  short_path(pq)));
  return j;
}

std::string resource_version_of(const json& obj) {
  if (!obj.is_object()) return {};
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return {};
  auto rv = meta->find("resourceVersion");
  return rv != meta->end() && rv->is_string() ? rv->get<std::string>() : std::string();
}

bool is_2xx(int status) {
  return status >= 200 && status < 300;
}

// The read timeout of a stream: the server ends a watch after its timeoutSeconds.
time_t stream_read_timeout(std::string_view pq) {
  const auto at = pq.find("timeoutSeconds=");
  if (at == std::string_view::npos) return kStreamDefaultSec + kStreamMarginSec;
  std::string_view v = pq.substr(at + 15);
  long t = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
  if (ec != std::errc() || t <= 0 || t > 24L * 3600L) return kStreamDefaultSec + kStreamMarginSec;
  return static_cast<time_t>(t) + kStreamMarginSec;
}

// What one exchange gave: the status line and a body read within bounds.
struct Exchange {
  int status = 0;
  std::string reason;
  std::string body;
};

// Splits a stream into lines; the partial tail waits for more.
class LineSplitter {
 public:
  // False when the consumer said stop; an error when a line outgrows kMaxLine. Empty lines are skipped.
  Result<bool> feed(std::string_view data, const std::function<bool(std::string_view)>& on_line) {
    buf_.append(data);
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf_.find('\n', scanned_)) != std::string::npos; scanned_ = start) {
      std::string_view line(buf_.data() + start, nl - start);
      if (line.ends_with('\r')) line.remove_suffix(1);
      start = nl + 1;
      if (line.size() > kMaxLine) return too_long();
      if (!line.empty() && !on_line(line)) return false;
    }
    buf_.erase(0, start);
    scanned_ = buf_.size();
    if (buf_.size() > kMaxLine) return too_long();
    return true;
  }

 private:
  static Error too_long() {
    return {EMSGSIZE, fmt::format("a line of the stream is longer than {} MiB", kMaxLine >> 20)};
  }

 private:
  std::string buf_;
  std::size_t scanned_ = 0;
};

}  // namespace

// ---- errno, paths ---------------------------------------------------------------------------------------

int kube_errno(int http_status, std::string_view reason) {
  switch (http_status) {
    case 400:
    case 422:
      return EINVAL;
    case 401:
    case 403:
      return EACCES;
    case 404:
      return ENOENT;
    case 405:
      return ENOTSUP;
    case 409:
      return reason == "AlreadyExists" ? EEXIST : EAGAIN;
    case 410:
      return ESTALE;
    case 429:
      return EBUSY;
    default:
      return EIO;
  }
}

std::string escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string path_of(std::string_view group_version, std::string_view resource, std::string_view ns,
                    std::string_view name, std::string_view subresource) {
  std::string p = group_version == "v1" ? "/api/v1" : "/apis/" + std::string(group_version);
  if (!ns.empty()) p += "/namespaces/" + escape(ns);
  p += "/" + escape(resource);
  if (!name.empty()) p += "/" + escape(name);
  if (!name.empty() && !subresource.empty()) p += "/" + escape(subresource);
  return p;
}

// ---- cancellation ---------------------------------------------------------------------------------------

namespace {

struct ActiveStream {
  httplib::ClientImpl* cli = nullptr;
  std::atomic<bool> cancelled{false};
};

}  // namespace

struct CancelToken::State {
  std::mutex mu;
  bool cancelled = false;  // sticky for a token, never set for a client's own set
  std::set<ActiveStream*> streams;

  bool add(ActiveStream* s) {
    std::lock_guard lock(mu);
    if (cancelled) return false;
    streams.insert(s);
    return true;
  }
  void remove(ActiveStream* s) {
    std::lock_guard lock(mu);
    streams.erase(s);
  }
  // httplib's stop() shuts the socket down under the client's own lock: a blocked read returns at once. A
  // stream not connected yet sees its flag in its response handler.
  void cancel_all(bool sticky) {
    std::lock_guard lock(mu);
    cancelled = cancelled || sticky;
    for (ActiveStream* s : streams) {
      s->cancelled = true;
      s->cli->stop();
    }
  }
};

CancelToken::CancelToken() : state_(std::make_unique<State>()) {}
CancelToken::~CancelToken() = default;
void CancelToken::cancel() {
  state_->cancel_all(true);
}
void CancelToken::reset() {
  std::lock_guard lock(state_->mu);
  state_->cancelled = false;
}
bool CancelToken::cancelled() const {
  std::lock_guard lock(state_->mu);
  return state_->cancelled;
}

// ---- the client -----------------------------------------------------------------------------------------

struct Client::Impl {
  Config cfg;
  Status init;  // a bad server URL or TLS file: every request answers it
  Endpoint ep;
  Tls tls;
  std::mutex token_mu;
  std::string token;
  std::mutex pool_mu;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle;
  CancelToken::State streams;

  explicit Impl(Config c);
  std::unique_ptr<httplib::ClientImpl> connect(time_t read_timeout) const;
  std::unique_ptr<httplib::ClientImpl> take();
  void give_back(std::unique_ptr<httplib::ClientImpl> cli);
  httplib::Request make_request(const std::string& method, const std::string& pq, const std::string& body,
                                const std::string& content_type);
  bool reload_token();
  Result<Exchange> exchange(const std::string& method, const std::string& pq, const std::string& body,
                            const std::string& content_type);
  Result<Exchange> stream_once(const std::string& pq, const std::function<bool(std::string_view)>& on_line,
                               CancelToken* token);
};

Client::Impl::Impl(Config c) : cfg(std::move(c)), token(cfg.token) {
  auto e = parse_server(cfg.server);
  if (!e) {
    init = std::move(e).error().context(fmt::format("kube client ({})", cfg.source));
    return;
  }
  ep = std::move(*e);
  if (!ep.https) return;
  auto t = load_tls(cfg);
  if (!t) {
    init = std::move(t).error().context(fmt::format("kube client ({}): TLS", cfg.source));
    return;
  }
  tls = std::move(*t);
}

std::unique_ptr<httplib::ClientImpl> Client::Impl::connect(time_t read_timeout) const {
  std::unique_ptr<httplib::ClientImpl> cli;
  if (!ep.https) {
    cli = std::make_unique<httplib::ClientImpl>(ep.host, ep.port);
  } else {
    // SSL_CTX_use_certificate/PrivateKey take references of their own: ours stay valid.
    auto ssl = tls.cert
                   ? std::make_unique<httplib::SSLClient>(ep.host, ep.port, tls.cert.get(), tls.key.get())
                   : std::make_unique<httplib::SSLClient>(ep.host, ep.port);
    if (!tls.ca_pem.empty()) ssl->set_ca_cert_store(ca_store(tls.ca_pem)->release());  // takes ownership
    if (!tls.ca_file.empty()) ssl->set_ca_cert_path(tls.ca_file);
    ssl->enable_server_certificate_verification(!tls.insecure);
    cli = std::move(ssl);
  }
  cli->set_connection_timeout(kConnectTimeoutSec);
  cli->set_read_timeout(read_timeout);
  cli->set_write_timeout(kReadTimeoutSec);
  cli->set_url_encode(false);  // path_of() and escape() encoded it already
  cli->set_keep_alive(true);
  // A POST's headers and body go out in two writes: with Nagle's algorithm the body waits for the ACK of the
  // headers, which the server delays (40 ms on Linux), so every create, patch, Binding and Eviction took over
  // 40 ms (recovery_bench). Go's net package, the API server's side, sets TCP_NODELAY on every connection.
  cli->set_tcp_nodelay(true);
  return cli;
}

std::unique_ptr<httplib::ClientImpl> Client::Impl::take() {
  {
    std::lock_guard lock(pool_mu);
    if (!idle.empty()) {
      auto cli = std::move(idle.back());
      idle.pop_back();
      return cli;
    }
  }
  return connect(kReadTimeoutSec);
}

void Client::Impl::give_back(std::unique_ptr<httplib::ClientImpl> cli) {
  std::lock_guard lock(pool_mu);
  if (idle.size() < kMaxIdle) idle.push_back(std::move(cli));
}

httplib::Request Client::Impl::make_request(const std::string& method, const std::string& pq,
                                            const std::string& body, const std::string& content_type) {
  httplib::Request req;
  req.method = method;
  req.path = ep.prefix + pq;
  req.headers.emplace("Accept", "application/json");
  {
    std::lock_guard lock(token_mu);
    if (!token.empty()) req.headers.emplace("Authorization", "Bearer " + token);
  }
  if (!body.empty()) {
    req.headers.emplace("Content-Type", content_type);
    req.body = body;
  }
  return req;
}

// A 401 with a token file: the token may have rotated (bound service-account tokens do, hourly).
bool Client::Impl::reload_token() {
  if (cfg.token_file.empty()) return false;
  auto text = read_file(cfg.token_file, 1U << 20);
  if (!text) {
    spdlog::warn("kube client: re-read the token after 401: {}", text.error().message());
    return false;
  }
  std::string t = *text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())) != 0) t.pop_back();
  std::lock_guard lock(token_mu);
  if (t.empty() || t == token) return false;
  token = std::move(t);
  return true;
}

namespace {

// httplib's error names ("Read") as a person reads them.
std::string describe(const httplib::ClientImpl& cli, httplib::Error e) {
  using E = httplib::Error;
  switch (e) {
    case E::Connection:
      return "cannot connect";
    case E::ConnectionTimeout:
      return fmt::format("no connection within {} s", kConnectTimeoutSec);
    case E::Read:
      return "the connection broke or timed out while reading the answer";
    case E::Write:
      return "the connection broke while sending the request";
    case E::SSLConnection:
      return "the TLS handshake failed (is a client certificate needed, or the wrong one given?)";
    case E::SSLLoadingCerts:
      return "cannot load the CA certificates";
    case E::SSLServerVerification: {
      const auto* ssl = dynamic_cast<const httplib::SSLClient*>(&cli);
      return fmt::format(
          "the server's certificate is not trusted: {}",
          ssl != nullptr ? X509_verify_cert_error_string(ssl->get_openssl_verify_result()) : "?");
    }
    default:
      return httplib::to_string(e);
  }
}

}  // namespace

Result<Exchange> Client::Impl::exchange(const std::string& method, const std::string& pq,
                                        const std::string& body, const std::string& content_type) {
  httplib::Request req = make_request(method, pq, body, content_type);
  Exchange ex;
  bool too_big = false;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    too_big = ex.body.size() + n > kMaxBody;
    if (!too_big) ex.body.append(data, n);
    return !too_big;
  };
  auto cli = take();
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  if (!cli->send(req, res, err) || too_big) {
    if (too_big)
      return Error(EFBIG, fmt::format("{} {}: the answer is larger than {} MiB", method, short_path(pq),
                                      kMaxBody >> 20));
    return Error(EIO, fmt::format("{} {}: {} ({})", method, short_path(pq), describe(*cli, err), cfg.server));
  }
  give_back(std::move(cli));
  ex.status = res.status;
  ex.reason = res.reason;
  return ex;
}

Client::Client(Config c) : impl_(std::make_unique<Impl>(std::move(c))) {}
Client::~Client() {
  cancel();
}

const Config& Client::config() const {
  return impl_->cfg;
}

Result<Response> Client::request(const std::string& method, const std::string& path_and_query,
                                 const std::string& body, const std::string& content_type) {
  if (!impl_->init) return impl_->init.error();
  for (int attempt = 0;; ++attempt) {
    ASCEND_ASSIGN(Exchange ex, impl_->exchange(method, path_and_query, body, content_type), "");
    if (ex.status == 401 && attempt == 0 && impl_->reload_token()) continue;
    return Response{ex.status, std::move(ex.body), std::move(ex.reason)};
  }
}

namespace {

// A request whose non-2xx answer is an error and whose 2xx body is JSON.
Result<json> call(Client& c, const std::string& method, const std::string& pq, const std::string& body,
                  const std::string& content_type = "application/json") {
  ASCEND_ASSIGN(Response r, c.request(method, pq, body, content_type), "");
  if (!is_2xx(r.status)) return status_error(method, pq, r.status, r.reason, r.body);
  return parse_body(method, pq, r.body);
}

}  // namespace

Result<json> Client::get(const std::string& path) {
  return call(*this, "GET", path, {});
}

Result<json> Client::create(const std::string& collection_path, const json& obj) {
  return call(*this, "POST", collection_path, obj.dump());
}

Result<json> Client::replace(const std::string& path, const json& obj) {
  return call(*this, "PUT", path, obj.dump());
}

Result<json> Client::merge_patch(const std::string& path, const json& patch) {
  return call(*this, "PATCH", path, patch.dump(), "application/merge-patch+json");
}

Status Client::del(const std::string& path, const std::string& uid, const std::string& resource_version) {
  std::string body;
  if (!uid.empty() || !resource_version.empty()) {
    json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", json::object()}};
    if (!uid.empty()) opts["preconditions"]["uid"] = uid;
    if (!resource_version.empty()) opts["preconditions"]["resourceVersion"] = resource_version;
    body = opts.dump();
  }
  ASCEND_CHECK(call(*this, "DELETE", path, body), "");
  return ok_status();
}

Result<json> Client::update(const std::string& path, const Change& change, int attempts) {
  Error last(EAGAIN, fmt::format("update {}: no attempt made", short_path(path)));
  for (int i = 0; i < std::max(attempts, 1); ++i) {
    ASCEND_ASSIGN(json current, get(path), "update");
    std::optional<json> patch = change(current);
    if (!patch) return current;
    if (!patch->is_object())
      return Error::invalid(fmt::format("update {}: the change is not a JSON object", path));
    const std::string rv = resource_version_of(current);
    if (rv.empty())
      return Error(EIO, fmt::format("update {}: the object has no metadata.resourceVersion", path));
    (*patch)["metadata"]["resourceVersion"] = rv;
    auto r = merge_patch(path, *patch);
    if (r.ok() || r.error().code() != EAGAIN) return std::move(r).context("update");
    last = r.error();
  }
  return std::move(last).context(fmt::format("update: {} conflicts in a row", std::max(attempts, 1)));
}

Status Client::bind(const std::string& ns, const std::string& pod, const std::string& uid,
                    const std::string& node) {
  json meta = {{"name", pod}, {"namespace", ns}};
  if (!uid.empty()) meta["uid"] = uid;
  const json binding = {{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", meta},
                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  ASCEND_CHECK(create(path_of("v1", "pods", ns, pod, "binding"), binding), fmt::format("bind to {}", node));
  return ok_status();
}

Status Client::evict(const std::string& ns, const std::string& pod) {
  const json eviction = {
      {"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", pod}, {"namespace", ns}}}};
  ASCEND_CHECK(create(path_of("v1", "pods", ns, pod, "eviction"), eviction), "evict");
  return ok_status();
}

namespace {

// RFC 3339 with microseconds, UTC: events.k8s.io/v1's eventTime (a MicroTime).
std::string micro_time_now() {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1'000'000);
}

// At most `max` bytes, not cutting a UTF-8 sequence.
std::string utf8_prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

}  // namespace

Status Client::event(const EventArgs& e) {
  const std::string ns = e.ns.empty() ? "default" : e.ns;
  json regarding = {{"apiVersion", e.api_version}, {"kind", e.kind}, {"name", e.name}};
  if (!e.ns.empty()) regarding["namespace"] = e.ns;
  if (!e.uid.empty()) regarding["uid"] = e.uid;
  // Named as client-go's recorder names them, "<object>.<unix nanoseconds in hex>": a generateName of
  // "<object>." is refused by the real API server (a name prefix must itself be a valid subdomain).
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const std::string suffix = fmt::format(".{:x}", static_cast<std::uint64_t>(nanos));
  const std::string name = e.name.substr(0, 253 - suffix.size()) + suffix;
  const json ev = {{"apiVersion", "events.k8s.io/v1"},
                   {"kind", "Event"},
                   {"metadata", {{"name", name}, {"namespace", ns}}},
                   {"regarding", regarding},
                   {"reason", e.reason},
                   {"action", e.action},
                   {"note", utf8_prefix(e.note, 1024)},
                   {"type", e.type},
                   {"eventTime", micro_time_now()},
                   {"reportingController", e.controller},
                   {"reportingInstance", e.instance}};
  ASCEND_CHECK(create(path_of("events.k8s.io/v1", "events", ns), ev),
               fmt::format("event {} about {}", e.reason, e.name));
  return ok_status();
}

// ---- streams --------------------------------------------------------------------------------------------

Result<Exchange> Client::Impl::stream_once(const std::string& pq,
                                           const std::function<bool(std::string_view)>& on_line,
                                           CancelToken* token) {
  auto cli = connect(stream_read_timeout(pq));
  ActiveStream st;
  st.cli = cli.get();
  streams.add(&st);
  const bool admitted = token == nullptr || token->state().add(&st);
  auto cleanup = [&] {
    streams.remove(&st);
    if (token != nullptr) token->state().remove(&st);
  };
  if (!admitted) {
    cleanup();
    return Error(ECANCELED, fmt::format("GET {}: cancelled", short_path(pq)));
  }
  Exchange ex;
  LineSplitter lines;
  Status line_error;
  bool consumer_stopped = false;
  httplib::Request req = make_request("GET", pq, {}, {});
  req.response_handler = [&](const httplib::Response& res) {
    ex.status = res.status;
    ex.reason = res.reason;
    return !st.cancelled;
  };
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (st.cancelled) return false;
    if (!is_2xx(ex.status)) {
      ex.body.append(data, std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, ex.body.size())));
      return true;
    }
    auto more = lines.feed(std::string_view(data, n), on_line);
    if (!more) line_error = more.error();
    consumer_stopped = more.ok() && !*more;
    return more.ok() && *more;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli->send(req, res, err);
  cleanup();
  if (st.cancelled) return Error(ECANCELED, fmt::format("GET {}: cancelled", short_path(pq)));
  if (!line_error) return std::move(line_error).error().context(fmt::format("GET {}", short_path(pq)));
  if (!sent && !consumer_stopped)
    return Error(EIO, fmt::format("GET {}: {} ({})", short_path(pq), describe(*cli, err), cfg.server));
  return ex;
}

Status Client::stream(const std::string& path_and_query,
                      const std::function<bool(std::string_view line)>& on_line, CancelToken* token) {
  if (!impl_->init) return impl_->init.error();
  for (int attempt = 0;; ++attempt) {
    ASCEND_ASSIGN(Exchange ex, impl_->stream_once(path_and_query, on_line, token), "");
    if (ex.status == 401 && attempt == 0 && impl_->reload_token()) continue;
    if (ex.status != 0 && !is_2xx(ex.status))
      return status_error("GET", path_and_query, ex.status, ex.reason, ex.body);
    return ok_status();
  }
}

void Client::cancel() {
  impl_->streams.cancel_all(false);
}

}  // namespace ascend::kube
