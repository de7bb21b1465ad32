// The /metrics endpoint (metrics.h, MetricsServer) as a scraper sees it over HTTP: the text format with the
// content type prometheus-cpp's exposer answered (text/plain; charset=utf-8), gzip when the scraper asks for
// it, the exposer's own series first, nothing but GET /metrics, and the address checks: a malformed
// --metrics-addr is refused, and a port another listener holds is an error (never shared).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "ascend/plugin/metrics.h"
#include "held_port.h"

namespace ascend::plugin {
namespace {

std::unique_ptr<MetricsServer> serve(const Metrics& metrics) {
  auto server = MetricsServer::start("127.0.0.1:0", metrics);
  EXPECT_TRUE(server.ok()) << (server ? "" : server.error().message());
  if (!server) return nullptr;
  EXPECT_GT((*server)->port(), 0);
  return std::move(*server);
}

TEST(MetricsServer, AnswersTheTextFormatWithTheExposersSeriesFirst) {
  Metrics metrics;
  metrics.observe_allocate("huawei.com/Ascend910", std::chrono::milliseconds(1), true);
  auto server = serve(metrics);
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r->body.rfind("# HELP exposer_transferred_bytes_total Transferred bytes to metrics services\n"
                          "# TYPE exposer_transferred_bytes_total counter\n"
                          "exposer_transferred_bytes_total 0\n",
                          0),
            0U)
      << r->body;
  EXPECT_NE(r->body.find("\nexposer_scrapes_total 0\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\n# TYPE exposer_request_latencies summary\n"), std::string::npos);
  EXPECT_NE(
      r->body.find("\nascend_device_plugin_allocate_requests_total{resource=\"huawei.com/Ascend910\"} 1\n"),
      std::string::npos);
  EXPECT_LT(r->body.find("exposer_scrapes_total"),
            r->body.find("ascend_device_plugin_allocate_requests_total"));

  // The next scrape counts this one, and the bytes it sent.
  const std::size_t first = r->body.size();
  r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("\nexposer_scrapes_total 1\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\nexposer_transferred_bytes_total " + std::to_string(first) + "\n"),
            std::string::npos)
      << r->body;
}

TEST(MetricsServer, CompressesWithGzipWhenTheScraperAcceptsIt) {
  Metrics metrics;
  auto server = serve(metrics);
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  c.set_decompress(false);
  auto r = c.Get("/metrics", httplib::Headers{{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Encoding"), "gzip");
  ASSERT_GE(r->body.size(), 2U);
  EXPECT_EQ(static_cast<unsigned char>(r->body[0]), 0x1f);  // RFC 1952's magic
  EXPECT_EQ(static_cast<unsigned char>(r->body[1]), 0x8b);
  r = c.Get("/metrics");  // Prometheus without compression
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Content-Encoding"));
  EXPECT_EQ(r->body.rfind("# HELP exposer_transferred_bytes_total", 0), 0U) << r->body;
}

TEST(MetricsServer, ServesOnlyGetMetrics) {
  Metrics metrics;
  auto server = serve(metrics);
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  auto r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = c.Get("/metrics/../etc/passwd");
  ASSERT_TRUE(r);
  EXPECT_NE(r->status, 200);
  r = c.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_NE(r->status, 200);
  r = c.Get("/metrics");  // still serving
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// What a raw client gets back within 3 s after sending `request` and keeping its connection open (the first
// bytes of the answer; "" when none came).
std::string answer_to(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) got.assign(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return got;
}

// Anything but GET /metrics is refused before its body is read (the HTTP library reads a chunked body, or
// one without a length, whole, whatever its payload limit): a chunked POST that has not ended, a POST whose
// body has no length, a HEAD, each gets its refusal at once, and the connection closes.
TEST(MetricsServer, RefusesOtherRequestsBeforeReadingTheirBodies) {
  Metrics metrics;
  auto server = serve(metrics);
  ASSERT_NE(server, nullptr);
  const std::string chunked =
      "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n" +
      std::string(4096, 'a') + "\r\n";
  const std::string unsized =
      "POST /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Type: text/plain\r\n\r\n" +
      std::string(4096, 'a');
  EXPECT_EQ(answer_to(server->port(), chunked).substr(0, 12), "HTTP/1.1 405");
  EXPECT_EQ(answer_to(server->port(), unsized).substr(0, 12), "HTTP/1.1 404");
  EXPECT_EQ(answer_to(server->port(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n").substr(0, 12),
            "HTTP/1.1 405");
  const std::string announced =
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\nExpect: 100-continue\r\n\r\n";
  EXPECT_EQ(answer_to(server->port(), announced).substr(0, 12), "HTTP/1.1 405");
  httplib::Client c("127.0.0.1", server->port());
  auto r = c.Get("/metrics");  // still serving
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(MetricsServer, RefusesAMalformedAddress) {
  Metrics metrics;
  const std::string form = "give HOST:PORT, or :PORT for every IPv4 address (port 0 picks a free one)";
  const std::string port = "the port must be a number from 0 to 65535";
  const std::pair<std::string, std::string> cases[] = {
      {"9101", form},         {"127.0.0.1:", form}, {"127.0.0.1:http", port}, {"127.0.0.1:65536", port},
      {"127.0.0.1:-1", port}, {":9101x", port},
  };
  for (const auto& [addr, why] : cases) {
    auto server = MetricsServer::start(addr, metrics);
    ASSERT_FALSE(server.ok()) << addr;
    EXPECT_EQ(server.error().message(), "--metrics-addr " + addr + ": " + why);
  }
}

// A port another socket listens on is refused: the listener does not share ports (no SO_REUSEPORT), so a
// second plugin, or another process, cannot take half of the scrapes.
TEST(MetricsServer, APortAnotherListenerHoldsIsAnError) {
  const ascend::testing::HeldPort other;
  ASSERT_TRUE(other.ok());
  const std::string addr = other.address();

  Metrics metrics;
  auto server = MetricsServer::start(addr, metrics);
  EXPECT_FALSE(server.ok());
  if (!server) {
    EXPECT_EQ(server.error().code(), EADDRINUSE);
    EXPECT_EQ(server.error().message(), "serve /metrics on " + addr + ": cannot listen on that address");
  }
}

// Stopping (the daemon's exit) waits for a scraper's idle keep-alive connection at most the 1 s keep-alive,
// not cpp-httplib's default of 5 s.
TEST(MetricsServer, StopsPromptlyWithAnIdleKeepAliveConnection) {
  Metrics metrics;
  auto server = serve(metrics);
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  c.set_keep_alive(true);
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace ascend::plugin
