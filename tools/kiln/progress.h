// tools/kiln/progress.h - a progress line on a terminal for work that takes more than a
// second (a large graph's first compile, a check on every device).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::cli {

/// While alive: after a second, if stderr is a terminal, shows `what` on one line of stderr,
/// with the seconds spent, updated each second; the line is erased when the work ends. Says
/// nothing otherwise, so pipes and logs see no change.
class Progress {
 public:
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace kiln::cli
