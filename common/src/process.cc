#include "ascend/common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ascend/common/unique_fd.h"

namespace ascend {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

}  // namespace

Result<ProcessOutput> run_capture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                  std::size_t max_out, std::chrono::milliseconds timeout) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    return Error::invalid("run: the program must be an absolute path");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error::from_errno(errno, "pipe for " + argv[0]);
  UniqueFd rd(fds[0]);
  UniqueFd wr(fds[1]);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  auto args = c_strings(argv);
  auto envp = c_strings(env);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error::from_errno(rc, "run " + argv[0]);
  wr = UniqueFd();  // only the child writes now: EOF when it exits

  ProcessOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  std::string failure;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure = "did not finish within " + std::to_string(timeout.count()) + " ms";
      break;
    }
    pollfd p{rd.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;  // the deadline is checked above
    const ssize_t got = ::read(rd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF
    result.out.append(buf, static_cast<std::size_t>(got));
    if (result.out.size() > max_out) {
      failure = "printed more than " + std::to_string(max_out) + " bytes";
      break;
    }
  }
  if (!failure.empty()) {
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    return Error(EIO, argv[0] + " " + failure);
  }
  result.exit_code = wait_exit(pid);
  return result;
}

}  // namespace ascend
