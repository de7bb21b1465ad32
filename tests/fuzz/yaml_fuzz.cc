// The YAML readers, each as the CLI calls it on a file: the first byte picks the reader ('p' a custom npu-sim
// profile, 'c' a cluster, 'j' a job, 't' a trace, 'h' a chip file; any other byte picks by its value), the
// rest is the file. Oracle: no crash, no exception, and a refusal names its file.
#include <algorithm>
#include <iterator>

#include "ascend/npu/profiles.h"
#include "ascend/scheduler/input.h"
#include "fuzz_util.h"

using namespace ascend;

namespace {

template <typename T>
void expect_named(const Result<T>& r, const std::string& path) {
  if (r.ok()) return;
  fuzz::check(r.error().message().find(path) != std::string::npos,
              "a refusal that does not name the file: " + r.error().message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fuzz::ScratchDir dir;
  if (size == 0) return 0;
  static const char kReaders[] = {'p', 'c', 'j', 't', 'h'};
  char which = static_cast<char>(data[0]);
  if (std::find(std::begin(kReaders), std::end(kReaders), which) == std::end(kReaders))
    which = kReaders[data[0] % sizeof kReaders];
  const std::string path = dir / "input.yaml";
  fuzz::write_file(path, fuzz::as_text(data + 1, size - 1));
  switch (which) {
    case 'p':
      expect_named(npu::load_profile(path), path);
      break;
    case 'c':
      expect_named(scheduler::load_cluster(path), path);
      break;
    case 'j':
      expect_named(scheduler::load_job(path), path);
      break;
    case 't':
      expect_named(scheduler::load_trace(path), path);
      break;
    default:
      expect_named(scheduler::load_chip(path), path);
      break;
  }
  return 0;
}
