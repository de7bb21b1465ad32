// A process that runs one helper program on behalf of a caller that has given up the right to run programs
// itself (the OCI hook: its seccomp filter refuses execve, hardening.h).
//
// Why: on a host with libdcmi.so the static hook reaches DCMI only through a dynamically linked helper
// (node_query.h), and it needs DCMI after it has hardened itself (the poststop stage destroys the
// container's dynamic vNPU). The broker is forked before the caller hardens. What the sandboxed caller can
// still do through it is exactly this: run the one program the broker was started with, with the fixed
// leading arguments and environment given at start, followed by arguments that `admit` accepts. It never
// takes a program path, a library path or an environment entry from the caller, so code injected into the
// hardened process cannot start anything else through it (SECURITY.md, "Threat model").
//
// The broker ends when its owner destroys this object or dies (the channel closes; PR_SET_PDEATHSIG as a
// second guard). One owner, one request at a time: not thread-safe.
//
// The channel: one message each way per request, a 4-byte length in host order and a CBOR document;
// request {"args": [...], "max_out": N, "timeout_ms": N}, answer {"exit_code": N, "out": bytes} or
// {"error": {"code": errno, "message": "..."}}. Anything else in a request is ignored.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ascend/common/error.h"
#include "ascend/common/process.h"
#include "ascend/common/unique_fd.h"

namespace ascend {

struct BrokerProgram {
  std::vector<std::string> prefix;  // argv[0] (an absolute path) and the fixed leading arguments
  std::vector<std::string> env;     // the program's whole environment
  // Decides on the arguments after the prefix; a refusal is answered to the caller, nothing runs.
  std::function<Status(std::span<const std::string> args)> admit;
  std::size_t max_out = std::size_t{64} << 20;  // the most a caller may ask to read
  std::chrono::milliseconds max_timeout = std::chrono::seconds(60);
};

class ExecBroker {
 public:
  // Forks the broker. Call while the process may still exec, before any thread is started.
  static Result<std::unique_ptr<ExecBroker>> start(BrokerProgram program);
  ~ExecBroker();
  ExecBroker(const ExecBroker&) = delete;
  ExecBroker& operator=(const ExecBroker&) = delete;

  // Runs the program with `argv` (which must begin with the prefix) as run_capture() would, through the
  // broker. `env` must be the broker's environment: the caller cannot choose another.
  Result<ProcessOutput> run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                            std::size_t max_out, std::chrono::milliseconds timeout);

  // run() as a function of the shape run_capture() has (valid while this object lives).
  std::function<Result<ProcessOutput>(const std::vector<std::string>&, const std::vector<std::string>&,
                                      std::size_t, std::chrono::milliseconds)>
  runner();

  pid_t pid() const { return pid_; }
  // The raw channel, for tests that speak to the broker as a hijacked owner would (run()'s own checks are a
  // convenience; the broker's are the boundary).
  int channel_fd() const { return channel_.get(); }

 private:
  ExecBroker(BrokerProgram program, pid_t pid, UniqueFd channel);
  BrokerProgram program_;
  pid_t pid_;
  UniqueFd channel_;
};

}  // namespace ascend
