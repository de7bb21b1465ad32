// The emulator's change notification (Emulator::subscribe): inotify on the state folder, with a poll as a
// fallback, reporting each new generation of the state file.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "ascend/common/guarded.h"
#include "ascend/common/unique_fd.h"
#include "ascend/npu/emulator.h"
#include "ascend/npu/workload.h"

namespace ascend::npu {

namespace {

class Watcher final : public Subscription {
 public:
  Watcher(const Emulator& emu, DeviceQuery::ChangeCallback cb) : emu_(emu), cb_(std::move(cb)) {
    stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    ino_ = UniqueFd(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    auto s = emu_.read_state();
    last_ = s ? s->generation : 0;
    if (s) majors_ = s->majors;
    arm();
    thread_ = std::thread([this] { run(); });
  }
  ~Watcher() override {
    std::uint64_t one = 1;
    if (::write(stop_.get(), &one, sizeof one) < 0) {
      // Nothing to do: the thread also polls with a timeout.
    }
    stopping_ = true;
    thread_.join();
  }

 private:
  void arm() {
    if (!ino_.valid() || wd_ >= 0) return;
    std::string dir = emu_.state_path().substr(0, emu_.state_path().rfind('/'));
    wd_ = ::inotify_add_watch(ino_.get(), dir.c_str(),
                              IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_IGNORED);
  }

  void run() {
    while (!stopping_) {
      pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {ino_.get(), POLLIN, 0}};
      int n = ::poll(fds, ino_.valid() ? 2 : 1, 50);
      if (n < 0 && errno != EINTR) break;
      if ((fds[0].revents & POLLIN) != 0) break;
      if (ino_.valid() && (fds[1].revents & POLLIN) != 0) {
        char buf[4096];
        while (::read(ino_.get(), buf, sizeof buf) > 0) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf);
          if ((ev->mask & IN_IGNORED) != 0) wd_ = -1;
        }
      }
      // A pass that throws (the subscriber's callback, a bug) is logged; the next poll carries on.
      run_guarded(
          "emulator watch", [this] { check(); }, "carrying on", &failed_);
    }
  }

  // One poll's work: re-arms the watch, re-reads a changed state file and reports a new generation.
  void check() {
    arm();  // the folder may have been (re)created by a load
    // Re-read only when the file changed (a rename gives a new inode); a parse per poll would be waste.
    struct stat st {};
    FileId id{};
    if (::stat(emu_.state_path().c_str(), &st) == 0) {
      id = {st.st_ino, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_size};
    }
    if (id == seen_) return;
    seen_ = id;
    auto s = emu_.read_state();
    // A reload between two polls restarts the generation: the majors tell that host from the old one.
    if (s && (s->generation != last_ || !same_majors(s->majors, majors_))) {
      last_ = s->generation;
      majors_ = s->majors;
      apply_workloads(*s, unix_now_ms());  // the chips as snapshot() shows them (workload.h)
      cb_(to_snapshot(*s));
    } else if (!s && last_ != 0) {
      last_ = 0;  // unloaded: report again once a host is back
    }
  }

  static bool same_majors(const DeviceMajors& a, const DeviceMajors& b) {
    return a.davinci == b.davinci && a.manager == b.manager && a.svm == b.svm && a.hdc == b.hdc &&
           a.vdavinci == b.vdavinci;
  }

  struct FileId {
    ino_t ino;
    time_t sec;
    long nsec;
    off_t size;
    bool operator==(const FileId&) const = default;
  };

  const Emulator& emu_;
  DeviceQuery::ChangeCallback cb_;
  FileId seen_{};
  UniqueFd stop_;
  UniqueFd ino_;
  int wd_ = -1;
  std::uint64_t last_ = 0;
  DeviceMajors majors_;
  std::string failed_;  // the last exception's text (guarded.h)
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<Subscription>> Emulator::subscribe(ChangeCallback on_change) const {
  return std::unique_ptr<Subscription>(std::make_unique<Watcher>(*this, std::move(on_change)));
}

}  // namespace ascend::npu
