#include "orchestrator/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include "common/text.h"

namespace fanout {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  if (s < 1) {  // a short run is not "0.0s"
    std::snprintf(buf, sizeof buf, "%.0fms", s * 1e3);
    return buf;
  }
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
    return buf;
  }
  const int64_t t = int64_t(std::llround(s));
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
  return buf;
}

std::string status_line(const SweepCounts& c) {
  std::string s = "[" + std::to_string(c.done) + "/" + std::to_string(c.runs) + " done";
  if (c.failed) s += ", " + std::to_string(c.failed) + " failed";
  if (c.retried) s += ", " + std::to_string(c.retried) + " retried";
  s += " | " + std::to_string(c.running) + " running | " + std::to_string(c.pending) + " pending";
  if (c.services_up) s += " | " + std::to_string(c.services_up) + (c.services_up == 1 ? " service up" : " services up");
  s += " | " + format_duration(c.elapsed_s) + " elapsed | ETA " + (std::isfinite(c.eta_s) ? format_duration(c.eta_s) : "after the first run") + "]";
  if (!c.waiting.empty()) s += " waiting: " + printable(c.waiting);  // the scheduler's words, as the terminal may show them
  return s;
}

std::ostream& ProgressDisplay::event() {
  if (shown_) out_ << "\r\033[K";
  shown_ = false;
  return out_;
}

bool ProgressDisplay::due(size_t runs, double elapsed_s, int64_t now_ns, bool force) const {
  if (!ever_shown_ && runs <= kFewRuns && !(interval_s_ > 0 && elapsed_s >= interval_s_)) return false;
  const double since_s = double(now_ns - last_ns_) / 1e9;
  return force || !(terminal_ ? since_s < 0.25 : (interval_s_ <= 0 || since_s < interval_s_));
}

void ProgressDisplay::status(const SweepCounts& c, int64_t now_ns, bool force) {
  if (!due(c.runs, c.elapsed_s, now_ns, force)) return;
  last_ns_ = now_ns;
  ever_shown_ = true;
  std::string line = status_line(c);
  if (!terminal_) {
    out_ << "fanout: " << line << "\n" << std::flush;
    return;
  }
  // One row, never wrapped: a wrapped line could not be redrawn in place.
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col) line.resize(ws.ws_col - 1);
  out_ << "\r\033[K" << line << std::flush;
  shown_ = true;
}

void ProgressDisplay::end_status() {
  if (shown_) out_ << "\n" << std::flush;
  shown_ = false;
}

}  // namespace fanout
