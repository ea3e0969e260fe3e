// What a sweep shows while it runs. Events (a submission, a start, an end, a retry) are lines of their own; the
// status (runs done / running / pending / failed, services up, elapsed, ETA, why jobs wait) is one line that a
// terminal redraws in place and a log receives every --status_interval seconds. The session counts; this only
// formats and paces.
#pragma once
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>

namespace fanout {

struct SweepCounts {
  size_t runs = 0;  // attempts, retries included (services apart)
  size_t done = 0, running = 0, pending = 0, failed = 0, retried = 0;
  size_t services_up = 0;
  double elapsed_s = 0;
  double eta_s = NAN;   // NAN until a run has ended
  std::string waiting;  // why the oldest pending job waits, when its scheduler says
};

// "[12/40 done, 1 failed | 4 running | 24 pending | 1 service up | 2:03 elapsed | ETA 6:50] waiting: Resources"
std::string status_line(const SweepCounts& c);

// "12.3s" under a minute, else "H:MM:SS"; "?" when unknown.
std::string format_duration(double seconds);

class ProgressDisplay {
 public:
  // terminal: redraw the status line in place (at most 4 times a second); otherwise print it as a plain line
  // every log_interval_s (0: never).
  ProgressDisplay(std::ostream& out, bool terminal, double log_interval_s)
      : out_(out), terminal_(terminal), interval_s_(log_interval_s) {}
  ~ProgressDisplay() { end_status(); }
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  // The stream for an event line (ending in '\n'); a status line on the terminal is cleared first.
  std::ostream& event();
  // Shows the status when it is due (when force: whenever a status has been shown before). A sweep of at most
  // kFewRuns runs has its runs' own lines and no status, unless it lasts longer than a status interval: then it too
  // shows where it is.
  void status(const SweepCounts& c, int64_t now_ns, bool force = false);
  // Whether status() would show a sweep of `runs` runs now: counting them is a pass over every run, which a sweep
  // of 100,000 cannot pay at each poll.
  bool due(size_t runs, double elapsed_s, int64_t now_ns, bool force = false) const;
  static constexpr size_t kFewRuns = 10;
  bool terminal() const { return terminal_; }
  // Leaves a shown status line on the terminal, ended, so that what follows starts on a line of its own.
  void end_status();

 private:
  std::ostream& out_;
  bool terminal_;
  double interval_s_;
  bool shown_ = false;       // a status line is on the terminal's last row now
  bool ever_shown_ = false;  // a status was shown during this sweep
  int64_t last_ns_ = 0;
};

}  // namespace fanout
