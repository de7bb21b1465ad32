// Kubernetes API configuration (kube_client.h): in-cluster service account, kubeconfig, --kube-api URL.
#include <openssl/evp.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "ascend/common/fs.h"
#include "ascend/common/kube_client.h"
#include "ascend/common/yaml_json.h"

namespace ascend::kube {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxSecretFile = 1U << 20;  // tokens, namespaces, PEM bundles

std::string trimmed(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  return s;
}

Result<std::string> read_token(const std::string& path) {
  ASCEND_ASSIGN(std::string text, read_file(path, kMaxSecretFile), "read the token");
  std::string token = trimmed(std::move(text));
  if (token.empty()) return Error::invalid(fmt::format("the token file {} is empty", path));
  return token;
}

// base64 (RFC 4648, with padding) to bytes, through OpenSSL; whitespace (line breaks) is ignored.
Result<std::string> base64_decode(std::string_view in, std::string_view what) {
  std::string b64;
  std::copy_if(in.begin(), in.end(), std::back_inserter(b64),
               [](unsigned char c) { return std::isspace(c) == 0; });
  if (b64.size() % 4 != 0) return Error::invalid(fmt::format("{} is not base64 (length)", what));
  std::string out(b64.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (n < 0) return Error::invalid(fmt::format("{} is not base64", what));
  // EVP_DecodeBlock counts the zero bytes that the padding stands for.
  const auto pad = static_cast<std::size_t>(b64.ends_with("==") ? 2 : b64.ends_with('=') ? 1 : 0);
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

// ---- kubeconfig fields --------------------------------------------------------------------------------

struct Kubeconfig {
  std::string path;
  json doc;

  Error bad(std::string_view what) const {
    return Error::invalid(fmt::format("kubeconfig {}: {}", path, what));
  }

  // A string field of `obj` ("" when absent); `where` names it in errors ("users[\"u\"].user.token").
  Result<std::string> str(const json& obj, const char* key, std::string_view where) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::string();
    if (!it->is_string()) return bad(fmt::format("{}.{} must be a string", where, key));
    return it->get<std::string>();
  }

  // A file path field, made absolute against the kubeconfig's folder.
  Result<std::string> file(const json& obj, const char* key, std::string_view where) const {
    ASCEND_ASSIGN(std::string p, str(obj, key, where), "");
    if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
    return (std::filesystem::path(path).parent_path() / p).lexically_normal().string();
  }

  // A base64 *-data field, decoded.
  Result<std::string> data(const json& obj, const char* key, std::string_view where) const {
    ASCEND_ASSIGN(std::string b64, str(obj, key, where), "");
    if (b64.empty()) return b64;
    auto r = base64_decode(b64, fmt::format("{}.{}", where, key));
    if (!r) return bad(r.error().message());
    return r;
  }

  // The entry named `name` of the list `list` ("clusters", "users", "contexts"): its `field` object.
  Result<json> named(const char* list, const char* field, const std::string& name) const {
    auto it = doc.find(list);
    if (it != doc.end() && !it->is_null() && !it->is_array())
      return bad(fmt::format("{} must be a list", list));
    if (it != doc.end() && it->is_array()) {
      for (const json& e : *it) {
        if (!e.is_object() || !e.contains("name") || e["name"] != name) continue;
        auto f = e.find(field);
        if (f == e.end() || f->is_null()) return json::object();
        if (!f->is_object()) return bad(fmt::format("{}[\"{}\"].{} must be a mapping", list, name, field));
        return *f;
      }
    }
    return bad(fmt::format("no {} named \"{}\" in {}", field, name, list));
  }
};

Status apply_cluster(const Kubeconfig& kc, const json& cluster, std::string_view where, Config& c) {
  ASCEND_ASSIGN(c.server, kc.str(cluster, "server", where), "");
  if (c.server.empty()) return kc.bad(fmt::format("{}.server is missing", where));
  if (!c.server.starts_with("https://") && !c.server.starts_with("http://"))
    return kc.bad(fmt::format("{}.server \"{}\" must start with https:// or http://", where, c.server));
  ASCEND_ASSIGN(c.ca_file, kc.file(cluster, "certificate-authority", where), "");
  ASCEND_ASSIGN(c.ca_data, kc.data(cluster, "certificate-authority-data", where), "");
  if (auto it = cluster.find("insecure-skip-tls-verify"); it != cluster.end() && !it->is_null()) {
    if (!it->is_boolean())
      return kc.bad(fmt::format("{}.insecure-skip-tls-verify must be true or false", where));
    c.insecure_skip_tls_verify = it->get<bool>();
  }
  return ok_status();
}

Status apply_user(const Kubeconfig& kc, const json& user, std::string_view where, Config& c) {
  for (const char* plugin : {"exec", "auth-provider"}) {
    if (user.contains(plugin) && !user.contains("token") && !user.contains("client-certificate") &&
        !user.contains("client-certificate-data"))
      return kc.bad(
          fmt::format("{} authenticates with {}, which this client does not run: give it a token, "
                      "tokenFile or client certificate",
                      where, plugin));
  }
  ASCEND_ASSIGN(c.token, kc.str(user, "token", where), "");
  ASCEND_ASSIGN(c.token_file, kc.file(user, "tokenFile", where), "");
  if (c.token.empty() && !c.token_file.empty()) {
    ASCEND_ASSIGN(c.token, read_token(c.token_file),
                  fmt::format("kubeconfig {}: {}.tokenFile", kc.path, where));
  }
  ASCEND_ASSIGN(c.client_cert_file, kc.file(user, "client-certificate", where), "");
  ASCEND_ASSIGN(c.client_cert_data, kc.data(user, "client-certificate-data", where), "");
  ASCEND_ASSIGN(c.client_key_file, kc.file(user, "client-key", where), "");
  ASCEND_ASSIGN(c.client_key_data, kc.data(user, "client-key-data", where), "");
  const bool has_cert = !c.client_cert_file.empty() || !c.client_cert_data.empty();
  const bool has_key = !c.client_key_file.empty() || !c.client_key_data.empty();
  if (has_cert != has_key)
    return kc.bad(fmt::format("{} has a client certificate or key without the other", where));
  return ok_status();
}

// The context's cluster, user and namespace.
Status apply_context(const Kubeconfig& kc, const std::string& name, Config& c) {
  ASCEND_ASSIGN(json ctx, kc.named("contexts", "context", name), "");
  const std::string where = fmt::format("context \"{}\"", name);
  ASCEND_ASSIGN(std::string cluster_name, kc.str(ctx, "cluster", where), "");
  ASCEND_ASSIGN(std::string user_name, kc.str(ctx, "user", where), "");
  ASCEND_ASSIGN(std::string ns, kc.str(ctx, "namespace", where), "");
  if (!ns.empty()) c.ns = ns;
  if (cluster_name.empty()) return kc.bad(fmt::format("{} names no cluster", where));
  auto cluster = kc.named("clusters", "cluster", cluster_name);
  if (!cluster)
    return kc.bad(fmt::format("{} names cluster \"{}\" that is not in clusters", where, cluster_name));
  ASCEND_CHECK(apply_cluster(kc, *cluster, fmt::format("clusters[\"{}\"].cluster", cluster_name), c), "");
  if (user_name.empty()) return ok_status();  // an anonymous user
  auto user = kc.named("users", "user", user_name);
  if (!user) return kc.bad(fmt::format("{} names user \"{}\" that is not in users", where, user_name));
  return apply_user(kc, *user, fmt::format("users[\"{}\"].user", user_name), c);
}

}  // namespace

Result<Config> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0')
    return Error::not_found("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST is not set");
  if (port == nullptr || *port == '\0')
    return Error::invalid("KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not");
  const std::string h(host);
  Config c;
  c.server = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, port);
  c.token_file = sa_dir + "/token";
  ASCEND_ASSIGN(c.token, read_token(c.token_file), "in-cluster service account");
  if (std::filesystem::exists(sa_dir + "/ca.crt")) {
    c.ca_file = sa_dir + "/ca.crt";
  } else {
    spdlog::warn("in-cluster: {}/ca.crt is missing; the API server is verified against the system CAs",
                 sa_dir);
  }
  if (auto ns = read_file(sa_dir + "/namespace", kMaxSecretFile); ns.ok() && !trimmed(*ns).empty()) {
    c.ns = trimmed(std::move(*ns));
  }
  c.source = "in-cluster";
  return c;
}

Result<Config> load_kubeconfig(const std::string& path, const std::string& context) {
  Kubeconfig kc{path, {}};
  ASCEND_ASSIGN(kc.doc, load_yaml_file(path), "kubeconfig");
  if (!kc.doc.is_object()) return kc.bad("not a mapping");
  std::string name = context;
  if (name.empty()) {
    ASCEND_ASSIGN(name, kc.str(kc.doc, "current-context", "the file"), "");
    if (name.empty()) return kc.bad("no current-context, and no context was given");
  }
  Config c;
  ASCEND_CHECK(apply_context(kc, name, c), "");
  c.source = fmt::format("kubeconfig {} (context {})", path, name);
  return c;
}

Result<Config> url_config(const std::string& url, const std::string& token_file, const std::string& ca_file) {
  if (!url.starts_with("http://") && !url.starts_with("https://"))
    return Error::invalid(fmt::format("--kube-api '{}': the URL must start with http:// or https://", url));
  Config c;
  c.server = url;
  if (!token_file.empty()) {
    c.token_file = token_file;
    ASCEND_ASSIGN(c.token, read_token(token_file), "--kube-api");
  }
  if (!ca_file.empty()) {
    ASCEND_CHECK(read_file(ca_file, kMaxSecretFile), "--kube-api: the CA file");
    c.ca_file = ca_file;
  }
  c.source = "--kube-api " + url;
  return c;
}

Result<std::optional<Config>> resolve_config(const ConfigFlags& f) {
  auto wrap = [](Result<Config> r) -> Result<std::optional<Config>> {
    if (!r) return r.error();
    return std::optional<Config>(std::move(*r));
  };
  if (!f.kubeconfig.empty()) return wrap(load_kubeconfig(f.kubeconfig));
  if (!f.api_url.empty()) return wrap(url_config(f.api_url, f.token_file, f.ca_file));
  if (!f.in_cluster_default) return std::optional<Config>();
  auto c = in_cluster_config();
  if (!c && c.error().code() == ENOENT) return std::optional<Config>();
  return wrap(std::move(c));
}

}  // namespace ascend::kube
