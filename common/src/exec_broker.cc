#include "ascend/common/exec_broker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

namespace ascend {
namespace {

using nlohmann::json;

// One message each way: a 4-byte length in host order (both ends are this program) and a CBOR document.
// A request is small (a verb and its options); an answer carries the program's output.
constexpr std::size_t kMaxRequest = std::size_t{1} << 20;
constexpr std::size_t kMaxAnswer = (std::size_t{64} << 20) + 4096;
// Time for the broker itself on top of the program's own timeout (fork, exec, the answer's copy).
constexpr std::chrono::seconds kSlack{5};

using Clock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` or the deadline passes (ETIMEDOUT).
Status wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Error(ETIMEDOUT, "no answer in time");
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60000)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(errno, "poll");
    if (n > 0) return {};
  }
}

Status write_all(int fd, const void* data, std::size_t size, Clock::time_point deadline) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ASCEND_CHECK(wait_ready(fd, POLLOUT, deadline), "");
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Error::from_errno(errno, "write");
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

// Reads exactly `size` bytes; EPIPE on end of file.
Status read_all(int fd, void* data, std::size_t size, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ASCEND_CHECK(wait_ready(fd, POLLIN, deadline), "");
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Error::from_errno(errno, "read");
    if (n == 0) return Error(EPIPE, "the channel closed");
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

Status send_message(int fd, const json& j, Clock::time_point deadline) {
  std::vector<std::uint8_t> bytes = json::to_cbor(j);
  auto size = static_cast<std::uint32_t>(bytes.size());
  ASCEND_CHECK(write_all(fd, &size, sizeof size, deadline), "");
  return write_all(fd, bytes.data(), bytes.size(), deadline);
}

Result<json> receive_message(int fd, std::size_t max, Clock::time_point deadline) {
  std::uint32_t size = 0;
  ASCEND_CHECK(read_all(fd, &size, sizeof size, deadline), "");
  if (size > max) return Error(EPROTO, "a message of " + std::to_string(size) + " bytes is over the limit");
  std::vector<std::uint8_t> bytes(size);
  ASCEND_CHECK(read_all(fd, bytes.data(), bytes.size(), deadline), "");
  json j = json::from_cbor(bytes, true, false);
  if (j.is_discarded() || !j.is_object()) return Error(EPROTO, "a malformed message");
  return j;
}

json error_answer(const Error& e) {
  return json{{"error", {{"code", e.code()}, {"message", e.message()}}}};
}

// The broker's side of one request: checked against what the broker was started with, then run.
json answer(const BrokerProgram& p, const json& request) {
  const auto args = request.find("args");
  const auto max_out = request.find("max_out");
  const auto timeout = request.find("timeout_ms");
  if (args == request.end() || !args->is_array() || max_out == request.end() ||
      !max_out->is_number_unsigned() || timeout == request.end() || !timeout->is_number_unsigned()) {
    return error_answer(Error(EPROTO, "a malformed request"));
  }
  std::vector<std::string> tail;
  for (const auto& a : *args) {
    if (!a.is_string()) return error_answer(Error(EPROTO, "a malformed request"));
    tail.push_back(a.get<std::string>());
  }
  if (auto st = p.admit ? p.admit(tail) : Status(Error(EPERM, "no arguments are admitted")); !st) {
    return error_answer(st.error().context("refused by the exec broker"));
  }
  std::vector<std::string> argv = p.prefix;
  argv.insert(argv.end(), tail.begin(), tail.end());
  const std::size_t limit = std::min(max_out->get<std::size_t>(), p.max_out);
  const auto asked = std::min<std::uint64_t>(timeout->get<std::uint64_t>(), 3600000);
  const auto wait = std::min(std::chrono::milliseconds(static_cast<std::int64_t>(asked)), p.max_timeout);
  auto r = run_capture(argv, p.env, limit, wait);
  if (!r) return error_answer(r.error());
  return json{{"exit_code", r->exit_code},
              {"out", json::binary(std::vector<std::uint8_t>(r->out.begin(), r->out.end()))}};
}

[[noreturn]] void serve(const BrokerProgram& p, int channel, pid_t owner) {
  // Die with the owner; if it is already gone, there is nobody to serve.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != owner) ::_exit(0);
  // The program is run by a root process that needs no new privileges: no set-id gain through exec.
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  // Nothing of the owner's but the standard streams and the channel.
  if (channel != 3) {
    if (::dup2(channel, 3) < 0) ::_exit(1);
    channel = 3;
  }
  ::close_range(4, ~0U, 0);
  // dup2 cleared close-on-exec: the programs it runs must not inherit the channel.
  if (::fcntl(channel, F_SETFD, FD_CLOEXEC) != 0) ::_exit(1);
  for (;;) {
    const auto far = Clock::now() + std::chrono::hours(24 * 365);
    auto request = receive_message(channel, kMaxRequest, far);
    if (!request) ::_exit(request.error().code() == EPIPE ? 0 : 1);
    if (!send_message(channel, answer(p, *request), far)) ::_exit(1);
  }
}

}  // namespace

Result<std::unique_ptr<ExecBroker>> ExecBroker::start(BrokerProgram program) {
  if (program.prefix.empty() || program.prefix[0].empty() || program.prefix[0][0] != '/')
    return Error::invalid("exec broker: the program must be an absolute path");
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Error::from_errno(errno, "exec broker: socketpair");
  UniqueFd ours(fds[0]);
  UniqueFd theirs(fds[1]);
  const pid_t owner = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno(errno, "exec broker: fork");
  if (pid == 0) {
    ours.reset();
    serve(program, theirs.release(), owner);
  }
  theirs.reset();
  return std::unique_ptr<ExecBroker>(new ExecBroker(std::move(program), pid, std::move(ours)));
}

ExecBroker::ExecBroker(BrokerProgram program, pid_t pid, UniqueFd channel)
    : program_(std::move(program)), pid_(pid), channel_(std::move(channel)) {}

ExecBroker::~ExecBroker() {
  channel_.reset();  // end of file: the broker exits after its current request
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

Result<ProcessOutput> ExecBroker::run(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, std::size_t max_out,
                                      std::chrono::milliseconds timeout) {
  const auto& prefix = program_.prefix;
  if (argv.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), argv.begin()))
    return Error(EPERM, "exec broker: it runs only " + prefix[0] + " with its own leading arguments");
  if (env != program_.env)
    return Error(EPERM, "exec broker: it runs " + prefix[0] + " only with its own environment");
  if (!channel_.valid()) return Error(EPIPE, "exec broker: not running");
  const auto deadline = Clock::now() + timeout + kSlack;
  json request{{"args", std::vector<std::string>(argv.begin() + static_cast<std::ptrdiff_t>(prefix.size()),
                                                 argv.end())},
               {"max_out", max_out},
               {"timeout_ms", static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()))}};
  auto fail = [&](const Error& e) {
    channel_.reset();  // a broken exchange leaves the stream out of step: no second request on it
    return e.context("exec broker for " + prefix[0]);
  };
  if (auto st = send_message(channel_.get(), request, deadline); !st) return fail(st.error());
  auto reply = receive_message(channel_.get(), kMaxAnswer, deadline);
  if (!reply) return fail(reply.error());
  const json& j = *reply;
  if (auto e = j.find("error"); e != j.end() && e->is_object()) {
    const int code = e->contains("code") && (*e)["code"].is_number_integer() ? (*e)["code"].get<int>() : EIO;
    const std::string msg =
        e->contains("message") && (*e)["message"].is_string() ? (*e)["message"].get<std::string>() : "failed";
    return Error(code, msg);
  }
  auto code = j.find("exit_code");
  auto out = j.find("out");
  if (code == j.end() || !code->is_number_integer() || out == j.end() || !out->is_binary())
    return fail(Error(EPROTO, "a malformed answer"));
  ProcessOutput r;
  r.exit_code = code->get<int>();
  const auto& bytes = out->get_binary();
  r.out.assign(bytes.begin(), bytes.end());
  return r;
}

std::function<Result<ProcessOutput>(const std::vector<std::string>&, const std::vector<std::string>&,
                                    std::size_t, std::chrono::milliseconds)>
ExecBroker::runner() {
  return
      [this](const std::vector<std::string>& argv, const std::vector<std::string>& env, std::size_t max_out,
             std::chrono::milliseconds timeout) { return run(argv, env, max_out, timeout); };
}

}  // namespace ascend
