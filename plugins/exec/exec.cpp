// The exec plugin: any program as a benchmark. Each rank of a step runs the step's command (argv, never a shell
// unless shell = true) with the run's parameters filled into its {placeholders}, reads its output with the
// step's parsers (parsers.h) and records what they match; `time` (the default) records each invocation's wall
// time. Several steps make one run (an experiment file's [[steps]]): `after` orders their starts, `ready` says
// when a step is usable, `service` steps run until the measuring ones end, and `publish` hands later steps
// environment variables (SSDB, DMLC_PS_ROOT_URI ...). Coordination goes through the host's rendezvous only.
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "fanout_sdk.hpp"
#include "fanout_placeholders.hpp"
#include "fanout_resources.hpp"
#include "fanout_counters.hpp"
#include "parsers.h"
#include "step_config.h"

namespace {

using fanout_sdk::Host;

constexpr int kForever = INT_MAX;          // rendezvous waits bounded by the run's wall time, not by us
constexpr int64_t kStopGraceMs = 10000;     // SIGTERM, then SIGKILL after this
constexpr size_t kStderrTail = 2048;        // what a failure quotes of the command's stderr

// "db" -> "DB", "ps-server" -> "PS_SERVER": a step's name in an environment variable's.
std::string env_word(const std::string& step) {
  std::string out;
  for (char c : step) out += std::isalnum(static_cast<unsigned char>(c)) ? char(std::toupper(static_cast<unsigned char>(c))) : '_';
  return out;
}

// The variable that gives a later step the nodes of `step` (FANOUT_DB_NODES for "db").
std::string nodes_variable(const std::string& step) { return "FANOUT_" + env_word(step) + "_NODES"; }

std::string key(const std::string& what, const std::string& step, int rank = -1) {
  return "exec." + what + "." + step + (rank >= 0 ? "." + std::to_string(rank) : "");
}

// The program's lines, as they come from one pipe.
struct LineReader {
  int fd = -1;
  std::string partial;
  bool open() const { return fd >= 0; }
  // Reads what is there; calls on_line for each whole line; at EOF the rest as a last line.
  template <class F>
  void drain(F&& on_line) {
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      if (!partial.empty()) on_line(partial), partial.clear();
      ::close(fd), fd = -1;
      return;
    }
    partial.append(buf, size_t(n));
    size_t at = 0;
    for (size_t nl; (nl = partial.find('\n', at)) != std::string::npos; at = nl + 1) on_line(std::string_view(partial).substr(at, nl - at));
    partial.erase(0, at);
    if (partial.size() > (size_t(16) << 20)) on_line(partial), partial.clear();  // a 16 MiB line: taken as it is
  }
};

class StepRun {
 public:
  StepRun(Host& host, const fanout_host_ops* ops, fanout_context* ctx, exec::StepConfig cfg)
      : host_(host), ops_(ops), ctx_(ctx), cfg_(std::move(cfg)), step_(host.role()) {}
  ~StepRun() { close_counters(); }
  StepRun(const StepRun&) = delete;
  StepRun& operator=(const StepRun&) = delete;

  // False when the step failed (logged, and published to the steps that wait for it).
  bool run() {
    step_dir_ = host_.run_dir() + "/" + step_;
    ::mkdir(step_dir_.c_str(), 0755);
    // An MPI program's rank joins the launcher's PMIx once: a second invocation's MPI_Init would fail.
    if (const char* mpi = std::getenv(FANOUT_MPI_PROGRAM_ENV); mpi && std::string(mpi) == "1" && cfg_.warmup + cfg_.repeat > 1)
      return fail("an MPI program (mpi_program) can be started once per rank, so warmup and repeat_command (" +
                  std::to_string(cfg_.warmup) + " + " + std::to_string(cfg_.repeat) +
                  " invocations) cannot apply: repeat the run instead (--repeat), or let the program loop");
    if (!announce() || !wait_for_earlier_steps()) return false;
    build_environment();
    return cfg_.service ? serve() : measure();
  }

 private:
  // Every exec rank publishes its node, and rank 0 its step's size, before the job's first fence: afterwards
  // any step can find any other.
  bool announce() {
    if (!host_.put(key("node", step_, host_.rank()), host_.node())) return fail("rendezvous put failed");
    if (host_.rank() == 0 && !host_.put(key("size", step_), std::to_string(host_.size()))) return fail("rendezvous put failed");
    if (!host_.fence(kForever)) return fail("the job's first fence failed");
    return nodes_of(step_, host_.size(), my_nodes_);
  }

  bool nodes_of(const std::string& step, int size, std::vector<std::string>& nodes) {
    for (int r = 0; r < size; ++r) {
      std::string n;
      if (!host_.get(key("node", step, r), n, 60000)) return fail("step '" + step + "' rank " + std::to_string(r) + " never published its node");
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
    }
    return true;
  }

  // `after`: each named step exists (it published its size before the fence), and every rank of it is ready. A
  // name that is no exec step of the job is the run's shared service (another plugin's, such as the smartsim
  // db): the host started this rank only once it was ready, and its env.<NAME> files are the environment it gives.
  bool wait_for_earlier_steps() {
    if (!service_environment()) return false;
    for (auto& a : cfg_.after) {
      std::string size_text;
      if (a == step_) return fail("after = '" + a + "' names this step itself");
      // Every exec step published its size before the first fence: after it, a name is there or nowhere.
      if (!host_.get(key("size", a), size_text, 0)) {
        if (host_.service() == Host::Service::User) continue;
        return fail("after = '" + a + "': no step of that name in this run");
      }
      const int size = std::atoi(size_text.c_str());
      std::vector<std::string> nodes;
      if (!nodes_of(a, size, nodes)) return false;
      for (int r = 0; r < size; ++r) {
        std::string v;
        while (!host_.get(key("ready", a, r), v, 1000)) {
          if (host_.should_stop()) return fail("stopped while waiting for step '" + a + "' to be ready");
        }
        if (v != "ready") return fail("step '" + a + "' rank " + std::to_string(r) + " failed before it was ready: " + v);
      }
      std::string published;
      if (!host_.get(key("env", a), published, 60000)) return fail("step '" + a + "' never published its environment");
      earlier_env_.emplace_back(nodes_variable(a), join(nodes));
      for (size_t at = 0; at < published.size();) {
        size_t nl = published.find('\n', at);
        if (nl == std::string::npos) nl = published.size();
        std::string line = published.substr(at, nl - at);
        if (auto eq = line.find('='); eq != std::string::npos) earlier_env_.emplace_back(line.substr(0, eq), line.substr(eq + 1));
        at = nl + 1;
      }
    }
    return true;
  }

  bool service_environment() {
    if (host_.service() != Host::Service::User) return true;
    const std::string dir = host_.service_dir();
    glob_t g{};
    if (::glob((dir + "/" FANOUT_SERVICE_ENV_PREFIX "*").c_str(), 0, nullptr, &g) == 0)
      for (size_t k = 0; k < g.gl_pathc; ++k) {
        const std::string path = g.gl_pathv[k], name = path.substr(dir.size() + 1 + std::strlen(FANOUT_SERVICE_ENV_PREFIX));
        std::string value;
        if (!host_.shared(std::string(FANOUT_SERVICE_ENV_PREFIX) + name, value, 0)) return globfree(&g), fail("cannot read " + path);
        earlier_env_.emplace_back(name, value);
      }
    globfree(&g);
    return true;
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  }

  void build_environment() {
    const auto node_index = std::find(my_nodes_.begin(), my_nodes_.end(), host_.node()) - my_nodes_.begin();
    env_ = {{"FANOUT_RANK", std::to_string(host_.rank())},
            {"FANOUT_NRANKS", std::to_string(host_.size())},
            {"FANOUT_LOCAL_RANK", std::to_string(host_.local_rank())},
            {"FANOUT_LOCAL_SIZE", std::to_string(host_.local_size())},
            {"FANOUT_NODE_INDEX", std::to_string(node_index)},
            {"FANOUT_HOST", host_.node()},
            {"FANOUT_NODELIST", join(my_nodes_)},
            {"FANOUT_STEP", step_},
            {"FANOUT_STEP_DIR", step_dir_},
            {"FANOUT_RUN_DIR", host_.run_dir()}};
    if (const char* submit = std::getenv("FANOUT_SUBMIT_DIR")) env_.emplace_back("FANOUT_SUBMIT_DIR", submit);
    env_.insert(env_.end(), earlier_env_.begin(), earlier_env_.end());
    for (auto& [name, templ] : cfg_.env) env_.emplace_back(name, fill(templ));
  }

  // {name}: a FANOUT_* variable of the step's environment, or a parameter of the run.
  std::optional<std::string> value_of(const std::string& name) const {
    if (fanout_sdk::step_variable(name))
      for (auto it = env_.rbegin(); it != env_.rend(); ++it)
        if (it->first == name) return it->second;
    const char* p = ops_->param(ctx_, name.c_str());
    if (!p) return std::nullopt;
    return std::string(p);
  }
  std::string fill(const std::string& text) const {
    return exec::fill_text(text, [this](const std::string& n) { return value_of(n); });
  }
  static std::string submit_dir() {
    const char* submit = std::getenv("FANOUT_SUBMIT_DIR");
    return submit ? submit : "";
  }

  // The words as the plan showed them (exec::command_line); under shell = true, the values' environment too.
  std::vector<std::string> argv() {
    exec::CommandLine line = exec::command_line(cfg_, [this](const std::string& n) { return value_of(n); }, submit_dir());
    shell_env_ = line.env;
    return line.words;
  }

  std::string working_dir() const {
    return exec::working_folder(cfg_, [this](const std::string& n) { return value_of(n); }, submit_dir(), step_dir_);
  }

  // One invocation of the command: its pid and pipes.
  struct Invocation {
    fanout_sdk::Child child;
    LineReader out, err;
    int64_t t0 = 0;
    std::string cwd;  // where it ran
    rusage usage{};   // wait4's: the program and the children it waited for (fanout_resources.hpp)
    long floor_kib = -1;  // this rank's own peak when it started the program: where the program's ru_maxrss begins
  };

  // Rank 0 says what the step ran, for the run's provenance (FANOUT_RUN_PROVENANCE_DIR): the command as run, the
  // program's path, size and checksum, so that compare can tell that A and B ran different binaries.
  void record_program(const std::vector<std::string>& args, const std::string& shown) {
    const size_t at = exec::program_word(args);
    std::string program = at < args.size() ? args[at] : args[0];
    const char* path = std::getenv("PATH");
    if (std::string found = exec::find_program(program, "", path ? path : ""); !found.empty()) program = found;
    std::string text = step_ + ".command=" + shown + "\n" + step_ + ".program=" + program + "\n";
    std::ifstream in(program, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.good() || in.eof()) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fanout_sdk::checksum64(bytes.data(), bytes.size())));
      text += step_ + ".program_bytes=" + std::to_string(bytes.size()) + "\n" + step_ + ".program_checksum64=" + hex + "\n";
    }
    const std::string dir = host_.run_dir() + "/" FANOUT_RUN_PROVENANCE_DIR;
    ::mkdir(dir.c_str(), 0755);
    fanout_sdk::write_file_atomic(dir + "/" + step_, text, 0644);
  }

  Invocation start() {
    fanout_sdk::SpawnOptions o;
    o.capture_stdout = o.capture_stderr = true;
    o.cwd = working_dir();
    if (struct stat st {}; ::stat(o.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw std::runtime_error("the folder the command is to start in, " + o.cwd + ", is no folder (cwd = '" + cfg_.cwd + "')");
    o.own_process_group = true;
    const auto args = argv();
    for (auto& [k, v] : env_) o.extra_env.push_back(k + "=" + v);
    for (auto& [k, v] : shell_env_) o.extra_env.push_back(k + "=" + v);
    if (host_.rank() == 0 && !logged_command_) {
      std::string shown;  // every word quoted: the provenance's form, which compare reads across versions
      for (auto& a : args) shown += (shown.empty() ? "" : " ") + exec::shell_quote(a);
      record_program(args, shown);
      host_.log(FANOUT_LOG_INFO, "step " + step_ + " runs " + shown + " in " + o.cwd);
      logged_command_ = true;
    }
    Invocation inv;
    inv.cwd = o.cwd;
    inv.floor_kib = fanout_sdk::own_peak_rss_kib();
    inv.t0 = host_.now_ns();
    inv.child = fanout_sdk::spawn_program(args, o);
    inv.out.fd = inv.child.out, inv.err.fd = inv.child.err;
    for (int fd : {inv.out.fd, inv.err.fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    return inv;
  }

  // The logs every invocation appends to: <step>/stdout.<rank>, <step>/stderr.<rank>.
  std::ofstream& log_file(bool err) {
    auto& f = err ? err_log_ : out_log_;
    if (!f.is_open()) f.open(step_dir_ + (err ? "/stderr." : "/stdout.") + std::to_string(host_.rank()), std::ios::app);
    return f;
  }

  bool ready_now() {
    const std::string& r = cfg_.ready;
    if (r.empty()) return true;
    if (r.rfind("port:", 0) == 0) {
      const int port = std::atoi(fill(r.substr(5)).c_str());
      for (const std::string& h : {std::string("127.0.0.1"), host_.node()}) {
        try {
          int fd = fanout_sdk::tcp_connect(h, port, 0);
          ::close(fd);
          return true;
        } catch (const std::exception&) {
        }
      }
      return false;
    }
    if (r.rfind("file:", 0) == 0) {
      std::string f = fill(r.substr(5));
      if (f[0] != '/') f = working_dir() + "/" + f;
      return ::access(f.c_str(), F_OK) == 0;
    }
    return ready_line_seen_;  // line:REGEX, set as lines arrive
  }

  // Publishes this rank's readiness (and rank 0 the step's environment for later steps).
  bool publish_ready() {
    if (ready_published_) return true;
    std::string published;
    for (auto& [name, templ] : cfg_.publish) published += name + "=" + fill(templ) + "\n";
    ready_published_ = true;
    if (host_.rank() == 0 && !host_.put(key("env", step_), published)) return fail("rendezvous put failed");
    return host_.put(key("ready", step_, host_.rank()), "ready") || fail("rendezvous put failed");
  }
  void publish_failure(const std::string& why) {
    if (!ready_published_) host_.put(key("ready", step_, host_.rank()), why.substr(0, 500));
    ready_published_ = true;
  }

  // Reads the program's output until it exits (or, for a service, until `done` says so), feeding the parsers
  // of each stream and the readiness check. Returns wait4's status (exit code or signal: describe_exit).
  int follow(Invocation& inv, std::vector<std::unique_ptr<exec::Parser>>& parsers, bool warmup, const std::function<bool()>& done = {}) {
    std::unique_ptr<exec::LineMatcher> ready_line;
    if (cfg_.ready.rfind("line:", 0) == 0) ready_line = std::make_unique<exec::LineMatcher>(cfg_.ready.substr(5));
    const int64_t ready_deadline = inv.t0 + cfg_.ready_timeout_s * 1000000000LL;
    bool stopping = false;
    int64_t stop_sent = 0;
    auto on_line = [&](bool is_err, std::string_view line) {
      log_file(is_err) << line << '\n';
      if (is_err) {
        stderr_tail_.append(line.data(), line.size()).push_back('\n');
        if (stderr_tail_.size() > kStderrTail) stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
      }
      if (ready_line && ready_line->matches(line)) ready_line_seen_ = true;
      const int64_t t = host_.now_ns();
      for (size_t i = 0; i < parsers.size(); ++i) {
        if (!parsers[i] || cfg_.parsers[i].from != (is_err ? "stderr" : "stdout")) continue;
        std::vector<exec::ParsedSample> got;
        parsers[i]->line(line, got);
        record(i, got, t, warmup);
      }
    };
    // Whatever ends this function early (a parser refusing a line) ends the program with it: no orphan runs on.
    struct Reaper {
      pid_t pid;
      bool armed = true;
      ~Reaper() {
        if (armed) ::kill(-pid, SIGKILL), fanout_sdk::wait_exit(pid);
      }
    } reaper{inv.child.pid};
    // Until the program has exited (not until its pipes close: it may hand them to a child it leaves behind, or
    // close them and run on), then what is left in the pipes, for at most a second. Its exit wakes the poll (a
    // pidfd): a measured invocation ends when the program does, not at the next 50 ms check.
    int status = -1;
    int64_t exited_at = 0;
    struct PidFd {
      int fd;
      ~PidFd() {
        if (fd >= 0) ::close(fd);
      }
    } exit_fd{fanout_sdk::pidfd_of(inv.child.pid)};
    int fallback_ms = 1;
    while (inv.out.open() || inv.err.open() || status < 0) {
      pollfd fds[3] = {{inv.out.fd, POLLIN, 0}, {inv.err.fd, POLLIN, 0}, {status < 0 ? exit_fd.fd : -1, POLLIN, 0}};
      // Without a pidfd (a kernel before 5.3, a seccomp profile) the exit is looked for once the pipes have closed,
      // at 1 ms, then less often (up to 50 ms) for a program that closed them and runs on.
      const bool pipes_closed = !inv.out.open() && !inv.err.open();
      ::poll(fds, 3, exit_fd.fd < 0 && pipes_closed ? fallback_ms : 50);
      if (exit_fd.fd < 0 && pipes_closed) fallback_ms = std::min(fallback_ms * 2, 50);
      if (fds[0].revents) inv.out.drain([&](std::string_view l) { on_line(false, l); });
      if (fds[1].revents) inv.err.drain([&](std::string_view l) { on_line(true, l); });
      if (status < 0) {
        int st = 0;
        if (::wait4(inv.child.pid, &st, WNOHANG, &inv.usage) == inv.child.pid) {
          status = st;
          exited_at = host_.now_ns();
          reaper.armed = false;
        }
      }
      if (status >= 0) {
        if (host_.now_ns() - exited_at < 1000000000) continue;
        ::kill(-inv.child.pid, SIGKILL);  // what the program left behind in its group, holding its pipes
        for (auto* r : {&inv.out, &inv.err})
          if (r->open()) ::close(r->fd), r->fd = -1;
        break;
      }
      if (!ready_published_) {
        if (ready_now()) {
          if (!publish_ready()) stopping = true;
        } else if (host_.now_ns() > ready_deadline) {
          failure_ = "not ready after " + std::to_string(cfg_.ready_timeout_s) + " s (ready = " + cfg_.ready + ")";
          stopping = true;
        }
      }
      if (!stopping && (host_.should_stop() || (done && done()))) stopping = true;
      if (stopping && !stop_sent) ::kill(-inv.child.pid, SIGTERM), stop_sent = host_.now_ns();
      if (stop_sent && host_.now_ns() - stop_sent > kStopGraceMs * 1000000) ::kill(-inv.child.pid, SIGKILL);
    }
    ::kill(-inv.child.pid, SIGKILL);  // whatever the program left behind in its group
    for (auto* f : {&out_log_, &err_log_})
      if (f->is_open()) f->flush();
    stopped_ = stop_sent != 0;
    return status;
  }

  // What the invocation cost (issue 54): the program and every child it waited for, labelled warmup as its time is.
  // Its peak RSS only above this rank's own peak when it started it: below, the kernel's figure is the rank's, not
  // the program's (fanout_resources.hpp), so it is left out and the log says so once.
  bool record_resources(const Invocation& inv, int64_t iteration, bool warmup) {
    const bool peak_known = inv.floor_kib >= 0 && inv.usage.ru_maxrss > inv.floor_kib;
    if (!peak_known && !peak_floor_logged_) {
      host_.log(FANOUT_LOG_INFO, "resource.peak_rss not recorded for an invocation whose peak stayed under this rank's own (" +
                                     std::to_string(inv.floor_kib / 1024) + " MiB): a program started by fork and exec begins at its "
                                     "parent's peak, so below it the figure is not the program's");
      peak_floor_logged_ = true;
    }
    for (auto& f : fanout_sdk::resource_figures(inv.usage)) {
      if (!peak_known && std::strcmp(f.metric, "resource.peak_rss") == 0) continue;
      if (!record_declared(f.metric, f.better, iteration, inv.t0, f.value, f.unit, warmup)) return false;
    }
    return true;
  }

  // One figure of what an invocation cost, its direction declared before its first sample.
  bool record_declared(const std::string& metric, fanout_better better, int64_t iteration, int64_t t0, double value, const char* unit, bool warmup) {
    if (declared_.insert(metric).second && !host_.declare_metric(metric.c_str(), better)) return false;
    return host_.record(metric.c_str(), iteration, t0, value, unit, warmup);
  }

  // --counters around each invocation: opened on this rank before the program starts, inherited by it and enabled
  // at its exec (what perf stat does), so they count the program and its children, not the rank.
  bool open_counters() {
    close_counters();
    const auto names = fanout_sdk::counters_asked();
    if (!names.empty()) fanout_sdk::stop_counters_opened_so_far();  // the rank's: these replace them
    for (auto& name : names) {
      const auto* c = fanout_sdk::counter_named(name);
      if (!c) return fail("--counters: no counter '" + name + "'");
      const int fd = fanout_sdk::open_counter(*c, true);
      if (fd < 0) return fail("--counters " + fanout_sdk::counter_unavailable(*c));
      counters_.emplace_back(c, fd);
    }
    return true;
  }
  void close_counters() {
    for (auto& [c, fd] : counters_) ::close(fd);
    counters_.clear();
  }
  bool record_counters(const Invocation& inv, int64_t iteration, bool warmup) {
    for (auto& [c, fd] : counters_) {
      const auto value = fanout_sdk::read_counter(fd, *c);
      if (!value) continue;  // the program never ran long enough to be counted
      if (!record_declared(fanout_sdk::counter_metric(*c), FANOUT_BETTER_NONE, iteration, inv.t0, *value, c->unit, warmup)) return false;
    }
    close_counters();
    return true;
  }


  // The parser's declared direction, once per metric, before the metric's first sample.
  bool declare(size_t parser, const std::string& metric) {
    if (!declared_.insert(metric).second) return true;
    const std::string b = cfg_.parsers[parser].declared_better();
    if (b.empty()) return true;
    return host_.declare_metric(metric.c_str(), b == "lower" ? FANOUT_BETTER_LOWER : b == "higher" ? FANOUT_BETTER_HIGHER : FANOUT_BETTER_NONE);
  }

  void record(size_t parser, const std::vector<exec::ParsedSample>& got, int64_t t, bool warmup) {
    for (auto& s : got) {
      // The host takes C strings: a NUL in what the program printed would cut the name there, and two metrics
      // ("a\0x", "a\0y") would merge into one ("a"). The host refuses the rest (invalid UTF-8, control characters).
      if (s.metric.find('\0') != std::string::npos || s.unit.find('\0') != std::string::npos)
        throw std::runtime_error(cfg_.parsers[parser].text() + " read a metric name or unit holding a NUL byte, which no metric may hold");
      if (!declare(parser, s.metric)) throw std::runtime_error("the direction of metric '" + s.metric + "' could not be declared");
      int64_t& next = next_iteration_[s.metric];
      const int64_t it = s.iteration ? *s.iteration : next;
      next = it + 1;
      if (!host_.record(s.metric.c_str(), it, t, s.value, s.unit.c_str(), warmup)) throw std::runtime_error("a sample could not be stored");
      if (!warmup) ++matched_[parser];  // what the measured invocations gave: a warmup line alone is no result
    }
  }

  // Files a parser reads (from = "file:GLOB"), after an invocation: every match of the glob, in name order.
  // A file's identity and state: a file is this invocation's output when it is new or changed since it was last
  // seen (before the first invocation, or read after an earlier one). Timestamps alone would not do: two quick
  // invocations fall in one tick of a coarse file system.
  using FileState = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // inode, size, mtime s, mtime ns
  static std::optional<FileState> file_state(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return FileState{int64_t(st.st_ino), int64_t(st.st_size), int64_t(st.st_mtim.tv_sec), int64_t(st.st_mtim.tv_nsec)};
  }
  std::vector<std::string> file_matches(const exec::ParseSpec& spec) {
    std::string pattern = fill(spec.from.substr(5));
    if (pattern[0] != '/') pattern = working_dir() + "/" + pattern;
    std::vector<std::string> out;
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
      for (size_t k = 0; k < g.gl_pathc; ++k)
        if (!own_log(g.gl_pathv[k])) out.push_back(g.gl_pathv[k]);
    globfree(&g);
    return out;
  }
  // The logs this step writes in its folder (stdout.<rank>, stderr.<rank>): what the program printed, already read
  // from the pipes, never again as a file (`from = "file:*"` would count every line twice).
  bool own_log(const std::string& path) const {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || path.compare(0, slash, step_dir_) != 0) return false;
    const std::string name = path.substr(slash + 1);
    for (const char* prefix : {"stdout.", "stderr."})
      if (name.rfind(prefix, 0) == 0 && name.size() > 7 && name.find_first_not_of("0123456789", 7) == std::string::npos) return true;
    return false;
  }
  // What the file parsers' globs match before the first invocation: not this step's output.
  void note_existing_files() {
    for (auto& spec : cfg_.parsers)
      if (spec.from.rfind("file:", 0) == 0)
        for (auto& f : file_matches(spec))
          if (auto st = file_state(f)) seen_files_[f] = *st;
  }

  // The files an invocation wrote (new or changed since last seen), each read whole.
  void parse_files(std::vector<std::unique_ptr<exec::Parser>>& parsers, bool warmup) {
    for (size_t i = 0; i < cfg_.parsers.size(); ++i) {
      const auto& spec = cfg_.parsers[i];
      if (spec.from.rfind("file:", 0) != 0 || !parsers[i]) continue;
      for (auto& path : file_matches(spec)) {
        const auto st = file_state(path);
        if (!st) continue;
        if (auto it = seen_files_.find(path); it != seen_files_.end() && it->second == *st) continue;
        seen_files_[path] = *st;
        // A regular file only (a FIFO would hang the run, a link to /dev/zero never end), read in lines of at most
        // 16 MiB as the pipes are.
        struct stat info {};
        if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
          throw std::runtime_error("'" + spec.text() + "' matched " + path + ", which is not a regular file (a FIFO, a device or a socket): not read");
        auto p = exec::make_parser(spec);  // each file from its first line (its own header)
        LineReader in;
        in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (in.fd < 0) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
        const int64_t t = host_.now_ns();
        std::vector<exec::ParsedSample> got;
        while (in.open()) in.drain([&](std::string_view line) { p->line(line, got); });
        p->finish(got);
        record(i, got, t, warmup);
      }
    }
  }

  bool measure() {
    for (int64_t k = 0; k < cfg_.warmup + cfg_.repeat; ++k) {
      const bool warmup = k < cfg_.warmup;
      std::vector<std::unique_ptr<exec::Parser>> parsers;
      for (auto& spec : cfg_.parsers) parsers.push_back(exec::make_parser(spec));
      if (k == 0) note_existing_files();
      if (!open_counters()) return false;
      Invocation inv = start();
      const int status = follow(inv, parsers, warmup);
      const int64_t t1 = host_.now_ns();
      // A command quicker than the first readiness check: without a `ready`, started is ready.
      if (!ready_published_ && cfg_.ready.empty() && !publish_ready()) return false;
      if (!failure_.empty()) return fail(failure_);
      if (stopped_) return fail("stopped (wall time, cancel or stall) during invocation " + std::to_string(k + 1));
      if (status != 0) {
        command_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        return fail("the command " + exec::describe_exit(status) + " (invocation " + std::to_string(k + 1) + ", run in " + inv.cwd +
                    "); its stderr ends: " + stderr_tail() + " (all of it in " + step_dir_ + "/stderr." + std::to_string(host_.rank()) + ")");
      }
      std::vector<exec::ParsedSample> end;
      for (size_t i = 0; i < parsers.size(); ++i) {
        if (!parsers[i]) {  // time: the invocation's wall time, as hyperfine measures a command
          const std::string metric = cfg_.parsers[i].metric.empty() ? "wall_time" : cfg_.parsers[i].metric;
          if (!declare(i, metric)) return fail("the direction of metric '" + metric + "' could not be declared");
          int64_t& it = next_iteration_[metric];
          if (!host_.record(metric.c_str(), warmup ? k - cfg_.warmup : it++, inv.t0, double(t1 - inv.t0) / 1e9, "s", warmup))
            return fail("a sample could not be stored");
          if (!warmup) ++matched_[i];
          continue;
        }
        if (cfg_.parsers[i].from.rfind("file:", 0) == 0) continue;
        end.clear();
        parsers[i]->finish(end);
        record(i, end, t1, warmup);
      }
      parse_files(parsers, warmup);
      if (fanout_sdk::resources_recorded() && !record_resources(inv, k - cfg_.warmup, warmup))
        return fail("a resource figure could not be stored");
      if (!record_counters(inv, k - cfg_.warmup, warmup)) return fail("a counter could not be stored");
    }
    // Steps after this one wait for its readiness: one that never came is their failure too, not their hang.
    if (!ready_published_) publish_failure("it ended before it was ready (ready = " + cfg_.ready + ")");
    for (size_t i = 0; i < cfg_.parsers.size(); ++i)
      if (!matched_[i])
        return fail("no sample matched '" + cfg_.parsers[i].text() + "' in " + cfg_.parsers[i].from + " (the output is in " + step_dir_ +
                    "/stdout." + std::to_string(host_.rank()) + " and stderr." + std::to_string(host_.rank()) + ")");
    return host_.fence(kForever) || fail("the job's last fence failed");
  }

  // A service: started once, ready, then kept until every rank of the job has reached the last fence (the
  // measuring steps are done), then stopped. Ending before that fails the run.
  bool serve() {
    std::vector<std::unique_ptr<exec::Parser>> none;
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto fenced = std::make_shared<std::atomic<bool>>(false);
    Invocation inv = start();
    std::thread waiter;
    auto start_waiting = [&] {
      if (waiter.joinable()) return;
      Host host = host_;
      waiter = std::thread([host, done, fenced]() mutable {
        *fenced = host.fence(kForever);
        *done = true;
      });
    };
    const int status = follow(inv, none, false, [&] {
      if (ready_published_) start_waiting();
      return done->load();
    });
    if (!failure_.empty() || !done->load()) {
      if (failure_.empty() && stopped_)
        failure_ = "stopped before the measuring steps were done (the run was cancelled, ran out of time, or another rank failed)";
      if (failure_.empty())
        failure_ = "the service " + exec::describe_exit(status) + " before the measuring steps were done; its stderr ends: " + stderr_tail();
      fail(failure_);
      if (waiter.joinable()) {
        // The waiter is still inside the job's fence, on the host's rendezvous: returning would free what it uses
        // under it. The run has failed (logged, and published to the steps waiting for this one): end the rank here.
        std::fflush(stderr);
        std::_Exit(1);
      }
      return false;
    }
    waiter.join();
    return *fenced || fail("the job's last fence failed");
  }

  // The last lines of the command's stderr on one line (a log line is one line): "a | b | c".
  std::string stderr_tail() const {
    std::string t = stderr_tail_;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    if (t.empty()) return "(nothing on stderr)";
    std::vector<std::string> lines;
    for (size_t at = 0; at <= t.size();) {
      size_t nl = t.find('\n', at);
      if (nl == std::string::npos) nl = t.size();
      lines.push_back(t.substr(at, nl - at));
      at = nl + 1;
    }
    std::string out;
    for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i) out += (out.empty() ? "" : " | ") + lines[i];
    return out;
  }

  bool fail(const std::string& why) {
    publish_failure(why);
    host_.log(FANOUT_LOG_ERROR, "step " + step_ + " rank " + std::to_string(host_.rank()) + ": " + why);
    return false;
  }

  Host& host_;
  const fanout_host_ops* ops_;
  fanout_context* ctx_;
  exec::StepConfig cfg_;
  std::string step_, step_dir_, failure_, stderr_tail_;
  std::vector<std::string> my_nodes_;
  std::vector<std::pair<std::string, std::string>> earlier_env_, env_;
  std::vector<std::pair<std::string, std::string>> shell_env_;  // shell = true: FANOUT_P_<name>=value of each placeholder
  std::map<std::string, int64_t> next_iteration_;
  std::set<std::string> declared_;  // metrics whose direction was declared (or had none to declare)
  std::map<std::string, FileState> seen_files_;  // file parsers' files as last seen
  std::map<size_t, int64_t> matched_;
  std::ofstream out_log_, err_log_;
 public:
  int command_status() const { return command_status_; }

 private:
  int command_status_ = 0;  // the command's failing exit status (1 when a signal ended it), which the rank passes on
  bool ready_published_ = false, ready_line_seen_ = false, stopped_ = false, logged_command_ = false;
  bool peak_floor_logged_ = false;
  std::vector<std::pair<const fanout_sdk::CounterSpec*, int>> counters_;  // this invocation's (open_counters)
};

int run_step(fanout_context* ctx, const fanout_host_ops* ops) {
  Host host(ctx, ops);
  try {
    const std::string settings = host.step_settings();
    exec::StepConfig cfg = exec::config_for_step([&](const char* n) { return host.param(n); }, settings);
    exec::validate(cfg);
    exec::validate_for_ranks(cfg, host.size());
    StepRun run(host, ops, ctx, std::move(cfg));
    if (run.run()) return 0;
    // The rank exits with the command's own exit status where it has one, else (a signal) 1.
    return run.command_status() > 0 ? run.command_status() : 1;
  } catch (const std::exception& e) {
    host.log(FANOUT_LOG_ERROR, std::string("step ") + host.role() + ": " + e.what());
    return 1;
  }
}

// Every one but nodes and ranks_per_node is a setting of how the program runs, not what is measured: the CSV
// files leave a setting out unless it varies (FANOUT_PARAM_SETTING).
const fanout_param_spec kParams[] = {
    FANOUT_SETTING("command", FANOUT_PARAM_STRING, "", "the program and its arguments, {name} taking a parameter's value; words split as sh does, nothing expanded", 0u),
    FANOUT_PARAM_RANGE("nodes", FANOUT_PARAM_INT, "1", "nodes the command runs on", "1", NULL),
    FANOUT_PARAM_RANGE("ranks_per_node", FANOUT_PARAM_INT, "1", "copies of the command per node", "1", NULL),
    FANOUT_SETTING("parse", FANOUT_PARAM_STRING, "time",
                   "how to read samples: time (wall time per invocation), regex:PATTERN (groups value, unit, metric, iteration), "
                   "csv[:COLUMNS], jsonl[:FIELDS], google-benchmark, smartsim-timing",
                   FANOUT_PARAM_REPEATABLE),
    FANOUT_SETTING("metric", FANOUT_PARAM_STRING, "", "the metric of samples whose parser does not name it", 0u),
    FANOUT_SETTING("unit", FANOUT_PARAM_STRING, "", "the unit of samples whose parser does not give it (s, ms, bytes/s, ...)", 0u),
    FANOUT_SETTING("better", FANOUT_PARAM_STRING, "", "which way the parsed metrics are better: lower, higher or none (results compare reads it; "
                   "without it only a time unit or <x>/s decides, the time parser is lower)", 0u),
    FANOUT_SETTING("label", FANOUT_PARAM_STRING, "", "csv: the column whose value names each record's metric (redis-benchmark --csv: test)", 0u),
    FANOUT_SETTING("from", FANOUT_PARAM_STRING, "stdout", "where the parsers read: stdout, stderr, or file:GLOB (relative to the step's folder)", 0u),
    FANOUT_SETTING("env", FANOUT_PARAM_STRING, "", "NAME=value for the command's environment", FANOUT_PARAM_REPEATABLE),
    FANOUT_SETTING("cwd", FANOUT_PARAM_STRING, "", "the folder the command starts in (default: the step's folder in the run; submit: where fanout was started)", 0u),
    FANOUT_PARAM_RANGE_FLAGS("warmup", FANOUT_PARAM_INT, "0", "invocations before the measured ones, recorded as warmup", "0", "1000000", FANOUT_PARAM_SETTING),
    FANOUT_PARAM_RANGE_FLAGS("repeat_command", FANOUT_PARAM_INT, "1", "measured invocations of the command per rank", "1", "1000000", FANOUT_PARAM_SETTING),
    FANOUT_SETTING("shell", FANOUT_PARAM_BOOL, "false", "run the command with /bin/sh -c (each {name} is \"${FANOUT_P_name}\", its value in the environment)", 0u),
};
const fanout_role kRoles[] = {FANOUT_ROLE("run", "run the step's command on each rank and record what its parsers read", run_step)};
const fanout_step_spec kSteps[] = {FANOUT_STEP("run", "{nodes}", "{ranks_per_node}", "disjoint")};
const fanout_experiment_spec kExperiments[] = {
    FANOUT_EXPERIMENT("exec", "any program as a benchmark: its wall time, or what --parse reads from its output", FANOUT_ARRAY(kSteps),
                      FANOUT_NO_ARRAY, nullptr, nullptr, nullptr)};
const char* const kStepKeys[] = {"command", "shell", "env", "cwd", "after", "ready", "ready_timeout", "service",
                                 "warmup", "repeat_command", "parse", "publish"};

// Words as a shell would read them back: plain words bare, the rest quoted.
std::string shown_command(const std::vector<std::string>& words) {
  std::string shown;
  for (auto& w : words)
    shown += (shown.empty() ? "" : " ") + (!w.empty() && w.find_first_of(" \t\n'\"\\$`;&|<>()*?[]#~") == std::string::npos ? w : exec::shell_quote(w));
  return shown;
}

// fanout_plugin.plan_step: the step checked as its ranks will take it (every setting, every placeholder, the
// program), and the command each rank runs, for --dry-run.
int plan_step(const fanout_step_plan* step, char* out, size_t out_len) {
  std::map<std::string, std::string> p;
  for (uint32_t i = 0; i < step->n; ++i) p[step->names[i]] = step->values[i];
  const bool from_file = step->settings && *step->settings;
  const std::string submit = step->submit_dir ? step->submit_dir : "";
  try {
    exec::StepConfig c = exec::config_for_step([&](const char* name) { return p.count(name) ? p[name] : std::string(); },
                                               from_file ? step->settings : "");
    exec::validate(c);
    exec::validate_for_ranks(c, step->ranks);
    std::vector<std::pair<std::string, std::string>> run_steps;
    if (FANOUT_HAS(step, fanout_step_plan, n_run_steps))
      for (uint32_t k = 0; k < step->n_run_steps; ++k) run_steps.emplace_back(step->run_steps[k], step->run_step_settings[k]);
    exec::check_after(step->step, run_steps);
    // The plan's placeholders: the parameters, and the step's own variables shown as they are ({FANOUT_RANK}), except
    // FANOUT_<STEP>_NODES, which only a step it comes after gives.
    std::set<std::string> after_nodes;
    for (auto& a : c.after) after_nodes.insert(nodes_variable(a));
    const exec::ValueOf value_of = [&](const std::string& n) -> std::optional<std::string> {
      if (fanout_sdk::step_variable(n)) {
        if (n.size() > 13 && n.compare(n.size() - 6, 6, "_NODES") == 0 && n != "FANOUT_NODES" && !after_nodes.count(n)) return std::nullopt;
        return "{" + n + "}";
      }
      auto it = p.find(n);
      if (it == p.end()) return std::nullopt;
      return it->second;
    };
    // Every placeholder a parameter or a step variable; a file's steps name their key, the flags theirs.
    for (auto& [setting, text] : exec::filled_texts(c))
      for (auto& name : fanout_sdk::placeholder_names(text))
        if (!value_of(name))
          throw std::runtime_error((from_file ? "step key " + setting : "--" + setting.substr(0, setting.find(' '))) + " refers to {" + name +
                                   "}, which is no parameter and no step variable (" +
                                   (fanout_sdk::step_variable(name) ? "FANOUT_<STEP>_NODES names a step this one comes after"
                                                                    : (from_file ? "[parameters] " + name + " = ..." : "--param " + name + "=...") +
                                                                          " gives it; {{" + name + "}} is the braces themselves") + ")");
    const exec::CommandLine line = exec::command_line(c, value_of, submit);
    std::string text;
    // The program: the first word, and the one after mpirun, env, taskset ... (a shell's script is its own).
    for (size_t k : {size_t(0), line.program}) {
      if (c.shell || k >= line.words.size() || line.words[k].find('{') != std::string::npos) continue;
      const std::string path = exec::search_path(c, line, k, value_of);
      if (exec::find_program(line.words[k], "", path).empty()) {
        const std::string& given = line.given[k];
        const std::string where = given.find('/') == std::string::npos
                                      ? "is not on PATH (" + path + ")"
                                      : "is no runnable file: " + line.words[k] +
                                            (given[0] == '/' ? "" : " (a relative program is the submit folder's, where fanout was started)");
        const std::string what = (from_file ? "step '" + std::string(step->step) + "': " : "--command: ") + "the program '" + given + "' " + where;
        if (step->flags & FANOUT_STEP_PLAN_LOCAL) throw std::runtime_error(what);
        text += "warning: " + what + "; it may exist on the nodes only\n";
      }
      if (line.program == 0) break;
    }
    // What each rank runs, filled as it will be (the step's own variables as {NAME}), where, and with what.
    std::vector<std::string> shown = line.words;
    if (!line.env.empty()) {
      shown.insert(shown.begin(), "env");
      for (size_t k = 0; k < line.env.size(); ++k) shown.insert(shown.begin() + 1 + long(k), line.env[k].first + "=" + line.env[k].second);
    }
    text += shown_command(shown) + "\nin " + exec::working_folder(c, value_of, submit, "<run>/" + std::string(step->step));
    for (auto& [name, v] : c.env) text += "\nenv " + name + "=" + exec::fill_text(v, value_of);
    std::snprintf(out, out_len, "%s", text.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(out, out_len, "%s", e.what());
    return 1;
  }
}

const fanout_plugin kPlugin = FANOUT_PLUGIN_PLANNED("exec", "any program as a benchmark: a command per rank, its output parsed", "1.0.0",
                                                    FANOUT_ARRAY(kParams), FANOUT_ARRAY(kRoles), FANOUT_ARRAY(kExperiments), nullptr,
                                                    nullptr, nullptr, FANOUT_PLUGIN_USER_PARAMETERS, FANOUT_ARRAY(kStepKeys), FANOUT_NO_ARRAY,
                                                    plan_step);

}  // namespace

extern "C" FANOUT_PLUGIN_EXPORT const fanout_plugin* fanout_plugin_entry(void) { return &kPlugin; }
