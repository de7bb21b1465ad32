// The exec broker (common/exec_broker.h): a caller that has lost execve to a seccomp filter still runs the
// one program the broker was started with, and nothing else: not another program, not other leading
// arguments, not another environment, not arguments the broker's admit function refuses. The program does
// not inherit the broker's channel, and the broker ends with its owner.
#include "ascend/common/exec_broker.h"

#include <gtest/gtest.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "test_dir.h"

namespace ascend {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kEnv = {"PATH=/usr/bin:/bin", "BROKER_TEST=1"};

// /bin/sh runs a fixed script; the admitted arguments are its positional parameters. It prints them, its
// environment's BROKER_TEST, and exits 3, so the answer shows each part arrived as sent.
BrokerProgram program(const std::string& marker) {
  BrokerProgram p;
  p.prefix = {"/bin/sh", "-c",
              "touch " + marker + "; printf '%s|' \"$@\"; printf 'env=%s' \"$BROKER_TEST\"; exit 3", "sh"};
  p.env = kEnv;
  p.admit = [](std::span<const std::string> args) -> Status {
    for (const auto& a : args) {
      if (a.starts_with("-")) return Error(EPERM, "no options: " + a);
    }
    return {};
  };
  return p;
}

std::vector<std::string> with_prefix(const BrokerProgram& p, const std::vector<std::string>& args) {
  std::vector<std::string> v = p.prefix;
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(ExecBroker, RunsTheProgramWithTheAdmittedArguments) {
  testing::TempDir tmp;
  const BrokerProgram p = program(tmp / "ran");
  auto b = ExecBroker::start(p);
  ASSERT_TRUE(b.ok()) << b.error().message();
  auto r = (*b)->run(with_prefix(p, {"a b", "c"}), kEnv, 1 << 20, 10s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "a b|c|env=1");
  // A second request on the same broker.
  auto again = (*b)->run(with_prefix(p, {}), kEnv, 1 << 20, 10s);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->out, "|env=1");
}

TEST(ExecBroker, RefusesWhatItWasNotStartedWith) {
  testing::TempDir tmp;
  const BrokerProgram p = program(tmp / "ran");
  auto b = ExecBroker::start(p);
  ASSERT_TRUE(b.ok()) << b.error().message();
  struct Case {
    const char* what;
    std::vector<std::string> argv;
    std::vector<std::string> env;
  };
  const Case cases[] = {
      {"another program", {"/bin/touch", tmp / "ran"}, kEnv},
      {"other leading arguments", {"/bin/sh", "-c", "touch " + (tmp / "ran"), "sh"}, kEnv},
      {"a shorter argv", {"/bin/sh"}, kEnv},
      {"another environment", with_prefix(p, {"x"}), {"PATH=/usr/bin:/bin", "LD_PRELOAD=/tmp/evil.so"}},
      {"arguments admit refuses", with_prefix(p, {"ok", "--library=/tmp/evil.so"}), kEnv},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = (*b)->run(c.argv, c.env, 1 << 20, 10s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), EPERM) << r.error().message();
  }
  EXPECT_FALSE(exists(tmp / "ran")) << "a refused request ran the program";
  // The broker still serves after refusals.
  auto r = (*b)->run(with_prefix(p, {"ok"}), kEnv, 1 << 20, 10s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->out, "ok|env=1");
}

TEST(ExecBroker, AProgramThatOverrunsItsTimeoutIsKilledAndTheBrokerGoesOn) {
  BrokerProgram p;
  // exec: the killed process is the sleep itself, so nothing keeps the test's output open for 30 s.
  p.prefix = {"/bin/sh", "-c", "if [ \"$1\" = slow ]; then exec sleep 30; fi; echo done", "sh"};
  p.env = kEnv;
  p.admit = [](std::span<const std::string>) { return Status(); };
  auto b = ExecBroker::start(p);
  ASSERT_TRUE(b.ok()) << b.error().message();
  // Left alone, the slow program would exit 0 after 30 s: a failure naming the timeout shows it was killed.
  auto slow = (*b)->run(with_prefix(p, {"slow"}), kEnv, 1 << 20, 300ms);
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.error().message().find("did not finish"), std::string::npos) << slow.error().message();
  auto fast = (*b)->run(with_prefix(p, {"fast"}), kEnv, 1 << 20, 10s);
  ASSERT_TRUE(fast.ok()) << fast.error().message();
  EXPECT_EQ(fast->out, "done\n");
}

TEST(ExecBroker, TheProgramDoesNotInheritTheChannel) {
  BrokerProgram p;
  // Every descriptor the program holds, as the kernel names it ("socket:[123]" for a socket).
  p.prefix = {"/bin/sh", "-c", "for f in /proc/$$/fd/*; do readlink \"$f\"; echo; done", "sh"};
  p.env = kEnv;
  p.admit = [](std::span<const std::string>) { return Status(); };
  auto b = ExecBroker::start(p);
  ASSERT_TRUE(b.ok()) << b.error().message();
  auto r = (*b)->run(p.prefix, kEnv, 1 << 20, 10s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->out.find("socket:"), std::string::npos) << r->out;
}

TEST(ExecBroker, EndsWithItsOwner) {
  testing::TempDir tmp;
  const BrokerProgram p = program(tmp / "ran");
  pid_t pid = 0;
  {
    auto b = ExecBroker::start(p);
    ASSERT_TRUE(b.ok()) << b.error().message();
    pid = (*b)->pid();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  // Reaped by the destructor: the pid no longer names a process of ours.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// What the hook does: start the broker, then install a filter that refuses execve. The process itself can
// no longer run anything; through the broker it runs the program.
TEST(ExecBroker, ServesAProcessWhoseSeccompFilterRefusesExec) {
  testing::TempDir tmp;
  const BrokerProgram p = program(tmp / "ran");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(out[0]);
    auto report = [&](const std::string& s) {
      (void)!::write(out[1], s.data(), s.size());
      ::_exit(0);
    };
    auto b = ExecBroker::start(p);
    if (!b) report("start: " + b.error().message());
    scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr || ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execve), 0) != 0 ||
        ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execveat), 0) != 0 ||
        ::seccomp_load(ctx) != 0)
      report("seccomp failed");
    ::seccomp_release(ctx);
    auto direct = run_capture(with_prefix(p, {"direct"}), kEnv, 1 << 20, 10s);
    std::string line = direct ? "direct ran;" : "direct: " + std::to_string(direct.error().code()) + ";";
    auto brokered = (*b)->run(with_prefix(p, {"brokered"}), kEnv, 1 << 20, 10s);
    line += brokered ? "brokered: " + brokered->out : "brokered failed: " + brokered.error().message();
    report(line);
  }
  ::close(out[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(got, "direct: " + std::to_string(EPERM) + ";brokered: brokered|env=1");
}

// A hijacked owner skips run()'s checks and writes its own request: the broker still runs only its program,
// with its own leading arguments and environment, and only admitted arguments.
nlohmann::json raw_request(int fd, const nlohmann::json& request) {
  auto bytes = nlohmann::json::to_cbor(request);
  auto size = static_cast<std::uint32_t>(bytes.size());
  EXPECT_EQ(::write(fd, &size, sizeof size), static_cast<ssize_t>(sizeof size));
  EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  std::uint32_t len = 0;
  EXPECT_EQ(::read(fd, &len, sizeof len), static_cast<ssize_t>(sizeof len));
  std::vector<std::uint8_t> in(len);
  std::size_t got = 0;
  while (got < len) {
    ssize_t n = ::read(fd, in.data() + got, len - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return nlohmann::json::from_cbor(in, true, false);
}

TEST(ExecBroker, ARawRequestCannotChooseTheProgramOrTheEnvironment) {
  testing::TempDir tmp;
  const BrokerProgram p = program(tmp / "ran");
  auto b = ExecBroker::start(p);
  ASSERT_TRUE(b.ok()) << b.error().message();
  const int fd = (*b)->channel_fd();
  auto refused =
      raw_request(fd, {{"args", {"--library=/tmp/evil.so"}}, {"max_out", 1024}, {"timeout_ms", 1000}});
  ASSERT_TRUE(refused.contains("error")) << refused.dump();
  EXPECT_EQ(refused["error"]["code"], EPERM);
  EXPECT_FALSE(exists(tmp / "ran"));
  auto forged = raw_request(fd, {{"args", {"x"}},
                                 {"argv", {"/bin/touch", tmp / "forged"}},
                                 {"program", "/bin/touch"},
                                 {"env", {"BROKER_TEST=forged", "LD_PRELOAD=/tmp/evil.so"}},
                                 {"max_out", 1024},
                                 {"timeout_ms", 1000}});
  ASSERT_TRUE(forged.contains("out")) << forged.dump();
  const auto& out = forged["out"].get_binary();
  EXPECT_EQ(std::string(out.begin(), out.end()), "x|env=1");
  EXPECT_FALSE(exists(tmp / "forged"));
  auto malformed = raw_request(fd, {{"args", "not a list"}});
  ASSERT_TRUE(malformed.contains("error")) << malformed.dump();
  EXPECT_EQ(malformed["error"]["code"], EPROTO);
}

TEST(ExecBroker, StartRefusesARelativeProgram) {
  BrokerProgram p;
  p.prefix = {"sh", "-c", "true"};
  auto b = ExecBroker::start(p);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code(), EINVAL);
}

}  // namespace
}  // namespace ascend
