// tools/kiln/progress.cpp - see progress.h.
#include "progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace kiln::cli {

Progress::Progress(std::string what) : what_(std::move(what)) {
  if (!isatty(STDERR_FILENO)) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    bool shown = false;
    for (int seconds = 1;; ++seconds) {
      if (done_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) break;
      std::fprintf(stderr, "\r\033[Kkiln: %s (%d s)", what_.c_str(), seconds);
      std::fflush(stderr);
      shown = true;
    }
    if (shown) std::fprintf(stderr, "\r\033[K");
  });
}

Progress::~Progress() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace kiln::cli
