// fanout: the driver. Subcommands come from two places: the driver's own (plugins, run, results) and one per
// experiment template of every installed plugin (built from the plugin's self-description, so --help lists
// every parameter with its default).
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <algorithm>
#include <tuple>
#include <functional>
#include <memory>
#include <optional>
#include <map>
#include <set>

#include <CLI/CLI.hpp>

#include "common/clock.h"
#include "common/error.h"
#include "common/parallel.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "schedulers/scheduler.h"
#include "orchestrator/progress.h"
#include "orchestrator/bisect.h"
#include "orchestrator/experiment.h"
#include "orchestrator/experiment_runner.h"
#include "orchestrator/sequential_compare.h"
#include "orchestrator/settings.h"
#include "orchestrator/list_value.h"
#include "host/plugin_loader.h"
#include "orchestrator/revision.h"
#include "results/history.h"
#include "results/history_report.h"
#include "results/lab_store.h"
#include "results/compare.h"
#include "results/metric_stats.h"
#include "results/models.h"
#include "results/reference.h"
#include "results/csv_export.h"
#include "results/figures.h"
#include "results/processing.h"
#include "results/smartsim_export.h"
#include "results/run_folder.h"
#include "results/store.h"
#include "common/git_revision.h"
#include "version.h"
#include "results/layout.h"

namespace fs = std::filesystem;
using namespace fanout;

namespace {

std::atomic<bool> g_interrupt{false};
void on_interrupt(int) {
  if (g_interrupt.exchange(true)) std::_Exit(130);  // a second Ctrl-C leaves at once
}

fs::path self_dir() { return fs::read_symlink("/proc/self/exe").parent_path(); }

// --help in lines under 100 characters: each description wrapped at word boundaries beside its flag column.
class WrappingFormatter : public CLI::Formatter {
 public:
  static constexpr size_t kWidth = 99;
  static std::string wrap(const std::string& text, size_t width) {
    std::string out, line;
    std::istringstream words(text);
    for (std::string w; words >> w;) {
      if (!line.empty() && line.size() + 1 + w.size() > width) out += line + "\n", line.clear();
      line += (line.empty() ? "" : " ") + w;
    }
    return out + line;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap(CLI::Formatter::make_option_desc(opt), kWidth - get_column_width());
  }
  std::string make_description(const CLI::App* app) const override { return wrap(CLI::Formatter::make_description(app), kWidth) + "\n"; }
};

// The topics --help groups the driver's flags under, in this order (a flag not listed: the last group).
const std::vector<std::pair<std::string, std::vector<std::string>>>& setting_topics() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> topics = {
      {"Runs: where they go, how many, in which order",
       {"exp_name", "results_dir", "launcher", "repeat", "max_repeat", "precision", "repeat_order", "max_parallel", "max_submitted", "zip", "exclude",
        "max_runs", "max_local_ranks", "resume", "reference", "lab", "scaling", "resources", "counters", "revision", "source"}},
      {"Failures, time and progress",
       {"walltime", "max_retries", "stall_timeout", "unknown_timeout", "max_pending", "fatal_pending", "status_interval", "verbose"}},
      {"Clusters (slurm, pbs, sge)",
       {"step_launcher", "array", "partition", "account", "constraint", "exclusive", "batch_args", "node_feature", "site", "mpi", "binding",
        "mpi_program"}},
      {"Shared services (a database reused across runs)", {"no_reuse", "service_hosts", "service_args", "service_walltime"}},
  };
  return topics;
}
std::string topic_of(const std::string& setting) {
  for (auto& [topic, names] : setting_topics())
    if (std::find(names.begin(), names.end(), setting) != names.end()) return topic;
  return "Other driver options";
}

// The driver's own flags, shared by every experiment subcommand and `run`: one CLI option per row of the
// settings table (orchestrator/settings.h), which also checks and applies them.
struct SettingsFlags {
  std::map<std::string, std::string> text;
  std::map<std::string, bool> flag;
  std::map<std::string, std::vector<std::string>> items;
  std::map<std::string, CLI::Option*> opts;
  bool dry_run = false;

  void add_to(CLI::App* app) {
    // Grouped by topic, the topics in their order (CLI11 lists groups as their first option comes).
    std::vector<const DriverSetting*> ordered;
    for (auto& [topic, names] : setting_topics())
      for (auto& s : driver_settings())
        if (topic_of(s.name) == topic) ordered.push_back(&s);
    for (auto& s : driver_settings())
      if (topic_of(s.name) == "Other driver options") ordered.push_back(&s);
    for (const DriverSetting* sp : ordered) {
      const DriverSetting& s = *sp;
      app->option_defaults()->group(topic_of(s.name));
      const std::string flag_name = "--" + s.name + (s.alias.empty() ? "" : ",--" + s.alias);
      if (s.kind == DriverSetting::Kind::Bool) {
        opts[s.name] = app->add_flag(flag_name, flag[s.name], s.help);
      } else if (s.kind == DriverSetting::Kind::List) {
        opts[s.name] = app->add_option(flag_name, items[s.name], s.help);
      } else {
        opts[s.name] = app->add_option(flag_name, text[s.name], s.help);
        if (s.kind == DriverSetting::Kind::Int) opts[s.name]->type_name("INT");
        if (!s.default_text.empty()) opts[s.name]->default_str(s.default_text);
      }
    }
    app->option_defaults()->group(setting_topics().front().first);
    app->add_flag("--dry-run,--dry_run", dry_run, "print the runs, what each step runs, and their job scripts; submit and write nothing");
  }

  // Flags given on the command line override the request's (an experiment file's, or the defaults) settings.
  void apply(ExperimentRequest& req) const {
    for (auto& s : driver_settings()) {
      if (opts.at(s.name)->count() == 0) continue;
      const std::string origin = "--" + s.name + (s.alias.empty() ? "" : " (--" + s.alias + ")");
      if (s.kind == DriverSetting::Kind::Bool) s.apply(req, flag.at(s.name) ? "true" : "false", origin);
      else if (s.kind == DriverSetting::Kind::List)
        for (auto& item : items.at(s.name)) s.apply(req, item, origin);
      else s.apply(req, text.at(s.name), origin);
    }
  }
};

// Edit distance, for "did you mean" suggestions.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The innermost subcommand the command line reached (the one whose flags a mistyped flag was meant for).
CLI::App* innermost(CLI::App* app) {
  for (CLI::App* sub : app->get_subcommands())
    if (sub->parsed()) return innermost(sub);
  return app;
}

// CLI11's parse errors as one line naming the flag, with a suggestion when a known flag is close.
std::string usage_error(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* at = innermost(&app);
  std::string where = at == &app ? "" : at->get_name() + ": ";
  std::string msg = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // "The following argument was not expected: --sleep_uss=3"
    std::string word = msg.substr(msg.find(':') + 1);
    word = trim(word.substr(0, word.find_first_of("= ", word.find_first_not_of(' '))));
    std::string best;
    size_t best_d = 3;  // at most two edits away
    for (const CLI::Option* o : at->get_options()) {
      if (o->get_group().empty()) continue;  // hidden: another experiment's parameter, not a suggestion here
      for (const std::string& name : o->get_lnames()) {
        size_t d = distance(word, "--" + name);
        if (d < best_d) best_d = d, best = "--" + name;
      }
    }
    return where + "unknown flag '" + word + "'" + (best.empty() ? "" : " (did you mean " + best + "?)") + "; see " +
           (at == &app ? std::string("fanout --help") : "fanout " + at->get_name() + " --help");
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) && at == &app)
    return "a subcommand is required; see fanout --help";
  for (char& c : msg)
    if (c == '\n') c = ' ';
  return where + msg;
}

// "unknown subcommand 'throughput_standart' (did you mean throughput_standard?)": the closest names (at most a
// third of the word's letters away, or sharing its start), else where the list is.
std::string unknown_subcommand(CLI::App& app, const std::string& word) {
  std::vector<std::pair<size_t, std::string>> close;
  for (auto* a : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string& name = a->get_name();
    const size_t d = distance(word, name);
    if (d <= std::max<size_t>(2, word.size() / 3) || (word.size() >= 4 && starts_with(name, word))) close.emplace_back(d, name);
  }
  std::sort(close.begin(), close.end());
  if (close.size() > 3) close.resize(3);
  std::vector<std::string> names;
  for (auto& c : close) names.push_back(c.second);
  return "unknown subcommand '" + printable(word) + "'" + (names.empty() ? "" : " (did you mean " + join(names, " or ") + "?)") +
         "; `fanout --help` lists them all, `fanout plugins` lists each plugin's";
}

// "int, >= 1" or "string, one of tcp, uds": what --help and `fanout plugins` say a parameter takes.
std::string type_and_constraints(const ParamSpec& ps) {
  const std::string constraints = describe_constraints(ps);
  return param_type_name(ps.type) + (constraints.empty() ? "" : ", " + constraints);
}

void print_plugins(const PluginScan& scan, std::ostream& out) {
  for (auto& p : scan.plugins) {
    out << p->name() << " " << p->version() << " -- " << p->summary() << "\n  file: " << p->path().string() << "\n";
    out << "  roles:";
    for (auto& r : p->role_names()) out << " " << r;
    out << "\n  experiments (subcommands):";
    for (auto& e : p->experiments()) out << " " << e.name;
    out << "\n  parameters:\n";
    for (auto& ps : p->params())
      out << "    --" << ps.name << " (" << type_and_constraints(ps) << ", default " << ps.default_value << ")  " << ps.help << "\n";
  }
  for (auto& r : scan.refused) out << "refused: " << r << "\n";
  if (scan.plugins.empty()) out << "no plugins found (search path: FANOUT_PLUGIN_PATH, then next to the fanout executable)\n";
}

// Replaces every "--name=v" / "--name v" in a saved command line with one "--name=value" at its end.
void set_flag(std::vector<std::string>& argv, const std::string& name, const std::string& value) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i > 0 && argv[i] == name && i + 1 < argv.size()) {
      ++i;
      continue;
    }
    if (i > 0 && starts_with(argv[i], name + "=")) continue;
    out.push_back(argv[i]);
  }
  out.push_back(name + "=" + value);
  argv = std::move(out);
}

// Inside a batch allocation (sbatch, qsub) a sweep whose --launcher nobody set runs in that allocation, as
// SmartSim-Scaling's does: the local default would start every rank of every node on the batch host. Said
// before anything starts, with how to keep the local launcher.
// True when it chose: the saved command (for `fanout resume`) then says --launcher, so a resume from a login node
// does not quietly run the rest on that host.
bool use_the_enclosing_allocation(ExperimentSettings& st) {
  if (st.origins.count("launcher")) return false;  // the command line, the experiment file or the site profile chose
  const EnclosingAllocation inside = enclosing_allocation();
  if (inside.scheduler.empty()) return false;
  st.scheduler = inside.scheduler;
  std::cerr << "fanout: inside " << inside.scheduler << " job " << printable(inside.job_id) << ": runs start as steps of that allocation "
            << "(--launcher=" << inside.scheduler << "); --launcher=local runs them on this host only\n";
  return true;
}

// What `resume --dry-run` shows: the planned runs whose permutation has no COMPLETED run in the experiment's database
// yet (all of them when there is none), said with the count.
// Read only (the database is neither created, upgraded nor locked), and refused as the run would be for another
// revision. A dead driver's jobs still in the queue, which the run would follow again, are counted as to run.
std::vector<RunPlan> runs_a_resume_would_run(const ExperimentPlan& plan, std::ostream& out) {
  const fs::path exp_dir = plan.request.settings.results_dir / plan.request.settings.exp_name, db_file = exp_dir / layout::kDatabase;
  std::set<std::string> completed;
  if (fs::exists(db_file)) {
    const ExperimentSummary stored = summarize_experiment_db(db_file);
    if (std::string why = revision_conflict(plan.revision, stored.revisions, stored.dirty); !why.empty())
      throw UserError(revision_refusal(plan.request.settings, exp_dir, why));
    completed = stored.completed;
  }
  std::vector<RunPlan> left;
  for (auto& r : plan.runs)
    if (!completed.count(r.param_hash)) left.push_back(r);
  out << "fanout: resume --dry-run: " << plan.runs.size() - left.size() << " of " << plan.runs.size()
      << " run(s) already COMPLETED; would run " << left.size() << "\n";
  return left;
}

// [build]: the code under test built once, before any run, in its source folder; its output kept in the experiment's
// build.log. A build that fails stops the sweep before anything runs (exit 2), saying where its output is.
void build_code_under_test(const BuildSpec& b, const ExperimentSettings& st) {
  if (!fs::is_directory(b.source)) throw UserError(b.origin + ": build.source '" + printable(b.source) + "' is no folder");
  const fs::path exp_dir = fs::absolute(st.results_dir) / st.exp_name, log = exp_dir / layout::kBuildLog;
  refuse_a_folder_fanout_did_not_make(exp_dir);
  fs::create_directories(exp_dir);
  std::cerr << "fanout: build   " << printable(join(b.argv, " ")) << " (in " << printable(b.source) << ")\n";
  const int64_t t0 = monotonic_ns();
  const ProcessResult r = run_process(b.argv, b.source, 24 * 3600.0);
  write_file_atomic(log, r.out + r.err);
  if (r.exit_code != 0) {
    std::string tail = trim(r.out + r.err);
    if (tail.size() > 600) tail = "..." + tail.substr(tail.size() - 600);
    throw UserError(b.origin + ": [build] failed in " + printable(b.source) + " (" +
                    (r.exit_code == -1 ? std::string("could not start") : "exit status " + std::to_string(r.exit_code)) + "); nothing ran; its output: " +
                    log.string() + (tail.empty() ? "" : "\n" + printable(tail)));
  }
  std::cerr << "fanout: built   in " << format_duration(double(monotonic_ns() - t0) / 1e9) << " (output: " << log.string() << ")\n";
}

int execute(const ExperimentRequest& req, const Plugin& plugin, bool dry_run, const std::string& cmdline,
            const std::vector<std::string>& argv) {
  // Known launchers only, dry run included (a dry run must not print a local script for a typo).
  RunnerOptions opts;
  opts.site = load_site(req.settings.site);
  ExperimentRequest with_site = req;  // what the file and the command line left open, the site profile fills in
  apply_site_defaults(opts.site, plugin, with_site);
  const bool allocation_chose = use_the_enclosing_allocation(with_site.settings);
  const auto names = scheduler_names();
  if (std::find(names.begin(), names.end(), with_site.settings.scheduler) == names.end())
    throw UserError("--launcher: unknown launcher '" + with_site.settings.scheduler + "' (known: " + join(names, ", ") + ")");
  if (scheduler_is_detected(with_site.settings.scheduler)) with_site.auto_scheduler = resolve_scheduler_name(with_site.settings.scheduler);
  ExperimentPlan plan = plan_experiment(with_site, plugin);
  for (auto& w : plan.warnings) std::cerr << "fanout: warning: " << w << "\n";
  // --reference is read now, not after the sweep: a file that cannot be read or holds no value is refused before
  // anything runs. The results point into refs.
  std::vector<Reference> refs;
  if (!with_site.settings.reference.empty()) refs = read_references_to_check(with_site.settings.reference);
  // --lab likewise: a store that is not one, or of a newer schema, is refused before anything runs.
  const std::string lab = resolve_lab(with_site.settings.lab);
  if (!lab.empty() && !dry_run) LabStore opened(lab, true);
  opts.rank_exe = self_dir() / "fanout-rank";
  opts.command_line = cmdline;
  opts.argv = argv;
  if (allocation_chose) opts.argv.push_back("--launcher=" + with_site.settings.scheduler);
  opts.interrupt = &g_interrupt;
  if (dry_run) {
    if (with_site.settings.resume) plan.runs = runs_a_resume_would_run(plan, std::cout);
    print_dry_run(plan, plugin, opts, std::cout);
    return 0;
  }
  if (!with_site.build.argv.empty()) build_code_under_test(with_site.build, with_site.settings);
  // A closed SSH session (SIGHUP) stops the sweep as Ctrl-C does: runs cancelled and recorded, jobs not left up.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_interrupt);
  auto outcome = run_experiment(plan, plugin, opts);
  if (outcome.interrupted) return 130;
  if (!lab.empty()) {
    try {
      LabStore store(lab, true);
      const auto added = store.add({history_input(outcome.exp_dir)});
      std::cerr << "fanout: lab     " << store.where() << " (benchmark " << added.front() << ")\n";
    } catch (const UserError& e) {
      std::cerr << "fanout: error: the sweep's results are in " << outcome.exp_dir.string() << ", but adding them to the lab failed: " << e.what()
                << " (add them later: fanout history add " << shell_quote(outcome.exp_dir.string()) << " --lab=...)\n";
      return 2;
    }
  }
  if (!refs.empty()) {  // --reference: the sweep's figures checked at its end
    const auto results = check_references(outcome.exp_dir, refs);
    print_reference_results(results, std::cerr);
    if (!std::all_of(results.begin(), results.end(), [](auto& r) { return r.pass; })) return 1;
  }
  return outcome.failed ? 1 : 0;
}

// Re-ingests every run folder below dir (an experiment folder or a run-<stamp> folder), in path order. A folder
// whose run.toml cannot be read is reported and skipped; the rest are stored. Returns (stored, skipped).
std::pair<int, int> ingest_tree(const fs::path& dir, ResultsDb& db) {
  std::vector<fs::path> runs;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == kRunMetadataFile) runs.push_back(e.path().parent_path());
  std::sort(runs.begin(), runs.end());
  int stored = 0, skipped = 0;
  db.ingest_runs(
      runs,
      [&](const fs::path& run, const IngestReport& report) {
        ++stored;
        if (report.kept.empty()) std::cout << printable(run.string()) << ": " << report.samples << " samples\n";
        else std::cout << printable(run.string()) << ": kept as stored (" << printable(report.kept) << ")\n";
        for (auto& w : report.warnings) std::cout << "  warning: " << printable(w) << "\n";
      },
      [&](const fs::path& run, const std::string& why) {
        ++skipped;
        std::cerr << "fanout: skipped " << printable(run.string()) << ": " << printable(why) << "\n";
      });
  return {stored, skipped};
}

// `fanout ls`: one line per experiment folder (one holding fanout.sqlite) under dir, newest last. Exit 1 when a
// database could not be read (named on stderr), 2 when dir is not a folder.
int list_experiments(const fs::path& dir, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UserError(dir.string() + ": not a folder (fanout ls [results_dir])");
  struct Row {
    std::string name;
    ExperimentSummary s;
    std::string report;
  };
  std::vector<Row> rows;
  bool unreadable = false;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    const fs::path db = e.path() / layout::kDatabase;
    if (!fs::exists(db, ec)) continue;
    try {
      Row r{e.path().filename().string(), summarize_experiment_db(db), ""};
      if (fs::exists(e.path() / "processed" / "report.html", ec)) r.report = (e.path() / "processed" / "report.html").string();
      rows.push_back(std::move(r));
    } catch (const UserError& x) {
      err << "fanout: error: " << printable_lines(x.what()) << "\n";
      unreadable = true;
    }
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.s.last_end_s, a.name) < std::tie(b.s.last_end_s, b.name);
  });
  // Names and paths as the terminal may show them (an ESC in a folder name is printed as \x1b), each row whole
  // however long they are.
  auto row = [&](const std::string& name, const std::string& counts, const std::string& report) {
    std::string line = printable(name);
    if (line.size() < 28) line.resize(28, ' ');
    out << line << counts << "  " << printable(report) << "\n";
  };
  char counts[128];
  // RUNS counts every attempt; an attempt run again (a retry, a resume) is SUPERSEDED, not FAILED or OTHER.
  std::snprintf(counts, sizeof counts, " %6s %9s %6s %6s %10s  %-20s", "RUNS", "COMPLETED", "FAILED", "OTHER", "SUPERSEDED", "LAST END (UTC)");
  row("EXPERIMENT", counts, "REPORT");
  for (auto& r : rows) {
    auto count = [&](const char* status) { auto it = r.s.runs_by_status.find(status); return it == r.s.runs_by_status.end() ? int64_t(0) : it->second; };
    const int64_t completed = count("COMPLETED"), failed = count("FAILED");
    const std::string last = r.s.last_end_s > 0 ? iso8601_utc(int64_t(r.s.last_end_s * 1e9)).substr(0, 19) : "-";
    std::snprintf(counts, sizeof counts, " %6lld %9lld %6lld %6lld %10lld  %-20s", (long long)r.s.runs, (long long)completed, (long long)failed,
                  (long long)(r.s.runs - completed - failed - r.s.superseded), (long long)r.s.superseded, last.c_str());
    row(r.name, counts, r.report.empty() ? "-" : r.report);
  }
  if (rows.empty() && !unreadable) out << "(no experiments under " << printable(dir.string()) << ")\n";
  return unreadable ? 1 : 0;
}

int drive(int argc, char** argv);

// A subcommand: the CLI11 node its flags hang on, and what it does once the command line chose it. Each maker
// below owns its flags' storage (shared with its handler), so drive() only builds the table and dispatches.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// The command line as typed, for run.toml/resume and the experiment's log.
struct Invocation {
  std::string cmdline;
  std::vector<std::string> args;
};

Command plugins_command(CLI::App& app, const PluginScan& scan) {
  auto* cmd = app.add_subcommand("plugins", "list installed plugins, their roles, experiments and parameters");
  auto check_path = std::make_shared<std::string>();
  cmd->add_option("--check", *check_path, "check one plugin file and report why it is refused, if it is");
  return {cmd, [check_path, &scan] {
            if (check_path->empty()) return print_plugins(scan, std::cout), 0;
            auto p = Plugin::open(*check_path);
            std::cout << "ok: " << p->path().string() << " is plugin " << p->name() << " " << p->version() << " (ABI "
                      << p->abi_version() << ")\n";
            return 0;
          }};
}

Command run_command(CLI::App& app, const Invocation& inv) {
  auto* cmd = app.add_subcommand("run", "run an experiment file (TOML: plugin, steps, parameters, zip, exclude)");
  struct State {
    std::string file;
    SettingsFlags flags;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("file", st->file, "experiment file")->required();
  st->flags.add_to(cmd);
  return {cmd, [st, &inv] {
            ExperimentRequest req = parse_experiment_file(st->file);
            if (req.plugin.find('/') != std::string::npos && fs::path(req.plugin).is_relative())
              req.plugin = (fs::absolute(st->file).parent_path() / req.plugin).lexically_normal().string();
            st->flags.apply(req);
            auto plugin = find_plugin(req.plugin);
            return execute(req, *plugin, st->flags.dry_run, inv.cmdline, inv.args);
          }};
}

Command ls_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ls", "list the experiments under a results folder: runs by status, last end, report");
  auto dir = std::make_shared<std::string>("results");
  cmd->add_option("results_dir", *dir, "folder that holds one folder per experiment")->capture_default_str();
  return {cmd, [dir] { return list_experiments(*dir, std::cout, std::cerr); }};
}

// `fanout site show`: the site profile in force, where it comes from, and the lines job scripts run.
Command site_command(CLI::App& app) {
  auto* site = app.add_subcommand("site", "the site profile (modules, env, setup lines per site and role)");
  site->require_subcommand(1);
  auto* cmd = site->add_subcommand("show", "print the site profile in force, where it comes from, and the lines job scripts run");
  auto file = std::make_shared<std::string>();
  cmd->add_option("--site", *file, "a site profile file, or none (default: $FANOUT_SITE, else ~/.config/fanout/site.toml)");
  return {cmd, [file] {
            const SiteProfile p = load_site(*file);
            if (p.file.empty()) {
              std::cout << "no site profile (--site, $FANOUT_SITE and ~/.config/fanout/site.toml give none)\n";
              return 0;
            }
            std::cout << "site profile " << p.file.string() << " (from " << p.origin << ")\n";
            std::cout << "# before every job's steps:\n" << (p.site.empty() ? "(nothing)\n" : p.site.shell());
            for (auto& [role, lines] : p.roles) std::cout << "# before the step of role " << role << ":\n" << lines.shell();
            auto show = [](const char* what, const std::vector<SiteValue>& values) {
              if (values.empty()) return;
              std::cout << "# " << what << " (unless an experiment file or the command line gives them):\n";
              for (auto& v : values) std::cout << v.key << " = " << join(v.values, ", ") << "\n";
            };
            show("settings", p.settings);
            show("parameter defaults", p.parameters);
            return 0;
          }};
}

Command csv_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("csv", "export samples.csv and statistics.csv from an experiment's database");
  struct State {
    std::string exp, out;
    bool gzip = false;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("exp_dir", st->exp, "experiment folder (holds fanout.sqlite)")->required();
  cmd->add_option("--out", st->out, "output folder (default <exp_dir>/csv)");
  cmd->add_flag("--gzip", st->gzip, "write samples.csv.gz");
  return {cmd, [st] {
            const fs::path db_file = fs::path(st->exp) / layout::kDatabase;
            if (!fs::exists(db_file)) throw UserError(st->exp + ": no fanout.sqlite here (is it an experiment folder?)");
            ResultsDb db(db_file, ResultsDb::ReadOnly{});  // read only: --out may be the only folder it can write
            auto files = export_csv(db, st->out.empty() ? fs::path(st->exp) / layout::kCsvDir : fs::path(st->out), st->gzip);
            std::cout << files.samples.string() << " (" << files.sample_rows << " rows)\n"
                      << files.statistics.string() << " (" << files.statistic_rows << " rows)\n"
                      << files.runs.string() << " (" << files.run_rows << " rows)\n";
            return 0;
          }};
}

Command ingest_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("ingest", "(re)ingest run folders into <exp_dir>/fanout.sqlite");
  auto exp = std::make_shared<std::string>();
  cmd->add_option("exp_dir", *exp, "experiment folder")->required();
  return {cmd, [exp] {
            if (!fs::is_directory(*exp)) throw UserError(*exp + ": not a folder");
            ResultsDb db(fs::path(*exp) / layout::kDatabase);
            const auto [stored, skipped] = ingest_tree(*exp, db);
            std::cout << stored << " run(s) ingested into " << (fs::path(*exp) / layout::kDatabase).string();
            if (skipped) std::cout << "; " << skipped << " skipped (listed on stderr)";
            std::cout << "\n";
            return skipped ? 1 : 0;
          }};
}

Command export_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("export-smartsim", "write an experiment's runs in SmartSim-Scaling's layout (run.cfg + rank_<r>_timing.csv) for its scripts");
  struct State {
    std::string exp, out;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("exp_dir", st->exp, "experiment folder (holds fanout.sqlite)")->required();
  cmd->add_option("--out", st->out, "a new folder for the tree (default <exp_dir>/smartsim-scaling)");
  return {cmd, [st] {
            const fs::path db_file = fs::path(st->exp) / layout::kDatabase;
            if (!fs::exists(db_file)) throw UserError(st->exp + ": no fanout.sqlite here (is it an experiment folder?)");
            ResultsDb db(db_file, ResultsDb::ReadOnly{});  // read only: --out may be the only folder it can write
            const fs::path out = st->out.empty() ? fs::path(st->exp) / "smartsim-scaling" : fs::path(st->out);
            auto r = export_smartsim_layout(db, fs::absolute(out));
            std::cout << r.run_dir.string() << ": " << r.runs << " session(s), " << r.lines << " timing line(s)";
            if (r.left_out) std::cout << "; " << r.left_out << " sample(s) left out (warmup, not a time, or another role)";
            std::cout << "\n";
            return 0;
          }};
}

// "k=v" -> (k, v); UserError naming the flag otherwise.
std::pair<std::string, std::string> key_value(const std::string& text, const std::string& flag) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw UserError(flag + " " + text + ": expected key=value");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Command record_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("record", "store figures a program printed (lines 'metric iteration value unit [t_unix_s]') as a run of <exp_dir>/fanout.sqlite");
  struct State {
    std::string exp, run, file = "-";
    std::vector<std::string> params, provenance;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("exp_dir", st->exp, "experiment folder (fanout.sqlite is created when missing)")->required();
  cmd->add_option("--run", st->run, "the run's name (recording it again replaces it)")->required();
  cmd->add_option("--file", st->file, "the figures ('-': standard input)")->capture_default_str();
  cmd->add_option("--param", st->params, "a parameter of the run, key=value (repeatable)");
  cmd->add_option("--provenance", st->provenance, "where it was measured, key=value (repeatable: host, commit, ...)");
  return {cmd, [st] {
            FigureRun run;
            run.name = st->run;
            run.experiment = fs::absolute(st->exp).lexically_normal().filename().string();
            if (run.experiment.empty()) run.experiment = fs::absolute(st->exp).lexically_normal().parent_path().filename().string();
            if (st->run.empty() || filename_safe(st->run, 200) != st->run || st->run == "." || st->run == "..")
              throw UserError("--run " + printable(st->run) + ": a name of letters, digits, '.', '_' and '-'");
            std::set<std::string> keys;
            for (auto& p : st->params) {
              run.parameters.push_back(key_value(p, "--param"));
              if (!keys.insert(run.parameters.back().first).second) throw UserError("--param " + run.parameters.back().first + " is given twice");
            }
            for (auto& p : st->provenance) run.provenance.insert(key_value(p, "--provenance"));
            std::vector<Figure> figures;
            if (st->file == "-") {
              figures = parse_figures(std::cin, "<stdin>");
            } else {
              std::ifstream in(st->file);
              if (!in) throw UserError(st->file + ": cannot read");
              figures = parse_figures(in, st->file);
            }
            if (figures.empty()) throw UserError("results record: no figures for " + st->run + " in " + st->file + " (the bench printed nothing this reads)");
            fs::create_directories(st->exp);
            ResultsDb db(fs::path(st->exp) / layout::kDatabase);
            const auto stored = record_figures(db, st->exp, run, figures);
            std::cout << stored.samples << " figure(s) of " << st->run << " stored in " << (fs::path(st->exp) / layout::kDatabase).string() << "\n";
            return 0;
          }};
}

// The command that made an experiment (its command.toml), to run again with --resume where the experiment is now (it
// may have been moved since: its folder, not the saved flags, says where results go). `fanout resume` and compare
// --until-decided both start it.
SavedCommand resume_command_line(const std::string& exp) {
  SavedCommand saved = read_saved_command(exp);
  const fs::path here = fs::absolute(exp).lexically_normal();
  const fs::path exp_dir = here.filename().empty() ? here.parent_path() : here;
  set_flag(saved.argv, "--results_dir", exp_dir.parent_path().string());
  set_flag(saved.argv, "--exp_name", exp_dir.filename().string());
  saved.argv.push_back("--resume");
  return saved;
}

Command compare_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("compare", "compare two experiments' matching runs on run-level evidence; exit 1 on a regression "
                                                 "or a change with no declared direction, 3 when too few runs (fewer than 4 a side at "
                                                 "alpha 0.05) leave a figure undecided");
  struct State {
    std::string a, b, format = "text", correction = "bh";
    std::vector<std::string> abs_thresholds;
    std::string reference;
    CompareOptions opts;
    bool until_decided = false;
    int max_repeat = 30;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("a", st->a, "baseline experiment folder")->required();
  cmd->add_option("b", st->b, "candidate experiment folder")->required();
  cmd->add_option("--threshold", st->opts.threshold_pct, "percent change of the median that counts (0 to 1000)")
      ->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--abs_threshold", st->abs_thresholds,
                  "[METRIC=]VALUE[UNIT]: a change smaller than this is no change (the only size a change from a median of 0 has); "
                  "repeatable, a metric's own before the general one");
  cmd->add_option("--reference", st->reference, "a reference file whose [[reference]] tables give figures their own abs_threshold "
                                                "(a metric, its role and parameters; docs/results.md)");
  cmd->add_option("--correction", st->correction, "adjusting p for the many figures one compare tests: bh (Benjamini-Hochberg, "
                                                  "false discovery rate), holm (family-wise error) or none")
      ->capture_default_str()->check(CLI::IsMember({"bh", "holm", "none"}));
  cmd->add_option("--ignore", st->opts.ignore, "parameter left out of the run matching (repeatable)");
  cmd->add_option("--metric", st->opts.metrics, "compare only this metric (repeatable)");
  cmd->add_option("--alpha", st->opts.alpha, "significance of the Mann-Whitney U test on the runs' medians, after --correction")->capture_default_str()->check(CLI::Range(1e-6, 0.5));
  cmd->add_option("--format", st->format, "text (for people: changed figures only), csv or json (every figure)")
      ->capture_default_str()->check(CLI::IsMember({"text", "csv", "json"}));
  cmd->add_flag("--until-decided,--until_decided", st->until_decided,
               "run both experiments again (their saved commands, more --repeat runs, in turn) until every figure is decided "
               "or --max_repeat runs a side; alpha is spent evenly over a fixed schedule of looks");
  cmd->add_option("--max_repeat", st->max_repeat, "with --until-decided: runs a side at the most")->capture_default_str()->check(CLI::Range(5, 1000));
  return {cmd, [st] {
            for (auto& t : st->abs_thresholds) st->opts.abs_thresholds.push_back(parse_abs_threshold(t));
            if (!st->reference.empty())
              for (auto& t : abs_thresholds_from_references(st->reference)) st->opts.abs_thresholds.push_back(t);
            st->opts.correction = st->correction == "none" ? Correction::None : st->correction == "holm" ? Correction::Holm : Correction::BenjaminiHochberg;
            check_compare_options(st->opts);
            auto more = [](const fs::path& exp, int runs) {
              SavedCommand saved = resume_command_line(exp.string());
              set_flag(saved.argv, "--repeat", std::to_string(runs));
              saved.argv[0] = (self_dir() / "fanout").string();
              std::cerr << "fanout: --until-decided: " << exp.string() << " to " << runs << " runs of each permutation\n";
              auto r = run_process(saved.argv, saved.cwd, 365.0 * 86400);
              if (r.exit_code != 0) std::cerr << r.err;
              return r.exit_code;
            };
            auto report = st->until_decided ? compare_until_decided(st->a, st->b, st->opts, st->max_repeat, more, std::cerr)
                                            : compare_experiments(st->a, st->b, st->opts);
            // Nothing compared is not "no regression": the experiments share no run (or the metric is absent).
            if (report.rows.empty())
              throw UserError("results compare: no run of " + st->a + " matches one of " + st->b + " (" +
                              std::to_string(report.unmatched_a) + " and " + std::to_string(report.unmatched_b) + " unmatched; " +
                              (report.differing.empty() ? std::string("both hold the same values, in other combinations: --ignore a parameter, or check --metric") :
                                                          "differing: " + join(report.differing, " | ") + "; --ignore one of them to match across it") + ")");
            if (st->format == "text") print_comparison(report, st->opts, std::cout);
            else write_comparison(report, st->format, std::cout);
            return comparison_status(report);
          }};
}

Command model_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("model", "fit scaling models of each figure against what was swept (Extra-P's performance model "
                                               "normal form, chosen by cross-validation): time(size) = c0 + c1 * size^i * log2(size)^j");
  struct State {
    std::string dir, format = "text", predict;
    ModelOptions opts;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("dir", st->dir, "experiment folder")->required();
  cmd->add_option("--metric", st->opts.metrics, "model only this metric (repeatable)");
  cmd->add_option("--param", st->opts.params, "model only against this parameter (repeatable)");
  cmd->add_option("--predict", st->predict, "evaluate each model at PARAM=VALUE[,PARAM=VALUE] (outside the data: said to be an extrapolation)");
  cmd->add_option("--format", st->format, "text, csv or json")->capture_default_str()->check(CLI::IsMember({"text", "csv", "json"}));
  return {cmd, [st] {
            std::optional<Prediction> predict;
            if (!st->predict.empty()) predict = parse_prediction(st->predict);
            const ExperimentStats stats = load_experiment_stats(st->dir);
            const auto models = experiment_models(stats, st->opts);
            if (models.empty())
              throw UserError("results model: " + st->dir + " varies no numeric parameter" +
                              (st->opts.params.empty() && st->opts.metrics.empty() ? std::string() : " among those asked (--param, --metric)") +
                              " (varied: " + (stats.varied.empty() ? std::string("none") : join(stats.varied, ", ")) + ")");
            if (st->format == "text") print_models(models, predict, std::cout);
            else write_models(models, st->format, std::cout);
            return 0;
          }};
}

// A benchmark over time: experiment folders as points of a series (results/history.h): `changes` lists where each
// figure changed, `report` draws the dashboard (results/history_report.h). Both read the same flags.
std::vector<Command> history_commands(CLI::App& app) {
  auto* history = app.add_subcommand("history", "a benchmark over time: experiments of the same benchmark at successive revisions");
  history->require_subcommand(1);
  struct State {
    std::vector<std::string> dirs;
    std::string format = "text", out, lab, benchmark;
    HistoryOptions opts;
  };
  auto add_common = [](CLI::App* cmd, const std::shared_ptr<State>& st) {
    cmd->add_option("dirs", st->dirs, "experiment folders, one per revision (3 or more); or none with --lab");
    cmd->add_option("--lab", st->lab, "read the points from this lab store (an SQLite file or postgresql://...; 'default': $FANOUT_LAB, "
                                      "else ~/.local/share/fanout/lab.sqlite) instead of folders");
    cmd->add_option("--benchmark", st->benchmark, "with --lab: only this benchmark (an experiment's name)");
    cmd->add_option("--metric", st->opts.metrics, "only this metric (repeatable)");
    cmd->add_option("--ignore", st->opts.ignore, "parameter left out of a figure's identity (repeatable)");
    cmd->add_option("--threshold", st->opts.threshold_pct, "percent change of the median that counts (0 to 1000)")->capture_default_str()->check(CLI::Range(0.0, 1000.0));
    cmd->add_option("--max_p", st->opts.change_points.max_p_value, "a change point is kept when its permutation p-value is at most this")
        ->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--permutations", st->opts.change_points.permutations, "permutations of the significance test")->capture_default_str()->check(CLI::Range(1, 100000));
    cmd->add_option("--seed", st->opts.change_points.seed, "the permutations' seed (the same seed, the same answer)")->capture_default_str();
  };
  // The series to analyse: the folders given, or each benchmark of the lab (only --benchmark's when given).
  auto analyse = [](const State& st) {
    std::vector<std::pair<std::string, HistoryChanges>> out;
    if (!st.lab.empty() && !st.dirs.empty()) throw UserError("history: give experiment folders or --lab, not both");
    if (st.lab.empty() && !st.benchmark.empty()) throw UserError("history: --benchmark names a benchmark of a lab store: give --lab too");
    if (st.lab.empty()) {
      if (st.dirs.size() < 3) throw UserError("history: " + std::to_string(st.dirs.size()) + " experiment(s); a change needs 3 or more");
      out.emplace_back("", history_changes(std::vector<fs::path>(st.dirs.begin(), st.dirs.end()), st.opts));
      return out;
    }
    LabStore store(resolve_lab(st.lab), false);
    const std::vector<std::string> all = store.benchmarks();
    if (!st.benchmark.empty() && !std::count(all.begin(), all.end(), st.benchmark))
      throw UserError("--benchmark: the lab " + store.where() + " has no benchmark '" + st.benchmark + "' (it has: " +
                      (all.empty() ? std::string("none") : join(all, ", ")) + ")");
    std::vector<std::pair<std::string, std::vector<HistoryInput>>> loaded;  // read in turn, analysed over the cores
    for (const std::string& b : all) {
      if (!st.benchmark.empty() && b != st.benchmark) continue;
      std::vector<HistoryInput> points = store.load(b);
      if (points.size() < 3 && !st.benchmark.empty())
        throw UserError("history: benchmark '" + b + "' has " + std::to_string(points.size()) + " experiment(s) in the lab; a change needs 3 or more");
      if (points.size() >= 3) loaded.emplace_back(b, std::move(points));
    }
    out.resize(loaded.size());
    HistoryOptions each = st.opts;
    each.parallel = loaded.size() == 1;  // one level of threads: the benchmarks over the cores, or one benchmark's figures
    parallel_for(loaded.size(), [&](size_t i) { out[i] = {loaded[i].first, history_changes(std::move(loaded[i].second), each)}; });
    return out;
  };
  auto add = std::make_shared<State>();
  auto* a = history->add_subcommand("add", "record experiments in a lab store (a point each of its benchmark's series, as history reads them), "
                                           "in one transaction; an experiment already there is replaced by what its folder holds now");
  a->add_option("dirs", add->dirs, "experiment folders")->required();
  a->add_option("--lab", add->lab, "the lab store: an SQLite file (made when new) or postgresql://...; default $FANOUT_LAB, else "
                                   "~/.local/share/fanout/lab.sqlite");
  a->add_option("--benchmark", add->benchmark, "the benchmark they are points of (default: each experiment's own name)");
  auto bisect = std::make_shared<BisectOptions>();
  auto* b = history->add_subcommand("bisect", "the first revision between --good and --bad at which the experiment is slower: built ([build]) "
                                              "and run at revisions halfway between, each compared with the good one by the gate (results compare)");
  b->add_option("file", bisect->file, "the experiment file (its [build] builds the code under test)")->required();
  b->add_option("--good", bisect->good, "a revision that is not slower (the baseline)")->required();
  b->add_option("--bad", bisect->bad, "a later revision that is slower")->required();
  b->add_option("--source", bisect->source, "the git working tree of the code under test (revisions are checked out there in turn; it is put back)")->required();
  b->add_option("--out", bisect->out, "where each revision's experiment goes (default: bisect-<good>-<bad>)");
  b->add_option("--repeat", bisect->repeat, "runs of each revision")->capture_default_str()->check(CLI::Range(2, 1000));
  b->add_option("--threshold", bisect->threshold_pct, "percent change the gate counts (results compare --threshold)")->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  b->add_option("--metric", bisect->metrics, "judge only this metric (repeatable)");
  auto changes = std::make_shared<State>();
  auto* c = history->add_subcommand("changes", "change points of each figure across experiments ordered by their code's commit time "
                                               "(--source), else by when they ran: E-Divisive means with a permutation test; exit 1 when "
                                               "the newest experiment comes after a figure's last change and that change is a regression");
  add_common(c, changes);
  c->add_option("--format", changes->format, "text or csv")->capture_default_str()->check(CLI::IsMember({"text", "csv"}));
  auto report = std::make_shared<State>();
  auto* r = history->add_subcommand("report", "a static dashboard of the same: the newest changes first, each figure's series over the "
                                              "revisions with its change points marked, what the runs cost after (OUT/index.html)");
  add_common(r, report);
  r->add_option("--out", report->out, "a folder for the dashboard (a new one, or one this command wrote before)")->required();
  return {{a, [add] {
             std::vector<HistoryInput> inputs;
             for (auto& dir : add->dirs) inputs.push_back(history_input(dir));  // every folder read before the store is touched
             LabStore store(resolve_lab(add->lab.empty() ? "default" : add->lab), true);
             const auto benchmarks = store.add(inputs, add->benchmark);
             for (size_t i = 0; i < inputs.size(); ++i)
               std::cout << "history add: " << printable(add->dirs[i]) << " -> benchmark " << printable(benchmarks[i]) << ", revision "
                         << printable(inputs[i].point.revision) << ", " << inputs[i].figures.size() << " figure(s)\n";
             std::cout << "history add: " << inputs.size() << " experiment(s) in " << store.where() << "\n";
             return 0;
           }},
          {b, [bisect] { return history_bisect(*bisect, self_dir() / "fanout", std::cout); }},
          {c, [changes, analyse] {
             const auto all = analyse(*changes);
             if (changes->format == "csv" && all.size() != 1)
               throw UserError("--format=csv: one series at a time: give --benchmark with --lab");
             bool latest_regression = false;
             for (auto& [benchmark, h] : all) {
               if (!benchmark.empty()) std::cout << (changes->format == "csv" ? "" : "benchmark " + benchmark + ": ");
               if (changes->format == "csv") write_history_changes_csv(h, std::cout);
               else print_history_changes(h, std::cout);
               latest_regression = latest_regression || h.latest_regression;
             }
             if (all.empty()) std::cout << "no benchmark of the lab has 3 experiments or more yet\n";
             return latest_regression ? 1 : 0;
           }},
          {r, [report, analyse] {
             const auto all = analyse(*report);
             const HistoryReport written = report->lab.empty() || !report->benchmark.empty()
                                               ? write_history_report(all.front().second, report->out)
                                               : write_lab_report(all, lab_shown(resolve_lab(report->lab)), report->out);
             for (auto& w : written.warnings) std::cerr << "warning: " << w << "\n";
             std::cout << "history report: " << written.index.string() << "\n";
             return 0;
           }}};
}

Command check_command(CLI::App& results) {
  auto* cmd = results.add_subcommand("check", "check an experiment's figures against reference values (ReFrame-style: value, lower and upper "
                                               "tolerance); exit 1 on any failure");
  struct State {
    std::string dir, reference, write;
    double tolerance = 10;
  };
  auto st = std::make_shared<State>();
  cmd->add_option("dir", st->dir, "experiment folder")->required();
  cmd->add_option("--reference", st->reference, "the references to check ([[reference]] tables: docs/results.md)");
  cmd->add_option("--write-reference", st->write, "write references from this experiment to this file instead (each figure's median across runs)");
  cmd->add_option("--tolerance", st->tolerance, "with --write-reference: the tolerance each way, in percent")->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  return {cmd, [st] {
            if (st->write.empty() == st->reference.empty()) throw UserError("results check: give --reference=FILE, or --write-reference=FILE");
            if (!st->write.empty()) {
              write_references(st->dir, st->write, st->tolerance / 100);
              std::cout << "fanout: references written to " << printable(st->write) << "\n";
              return 0;
            }
            const auto refs = read_references_to_check(st->reference);
            const auto results = check_references(st->dir, refs);
            print_reference_results(results, std::cout);
            return std::all_of(results.begin(), results.end(), [](auto& r) { return r.pass; }) ? 0 : 1;
          }};
}

Command resume_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("resume", "run the permutations of an experiment that are missing or failed, after any interruption "
                                           "(Ctrl-C, a killed driver, a failed node): the experiment's command again with --resume");
  auto exp = std::make_shared<std::string>();
  auto max_local_ranks = std::make_shared<std::string>();
  auto dry_run = std::make_shared<bool>(false);
  cmd->add_option("exp_dir", *exp, "experiment folder (results/<exp_name>)")->required();
  cmd->add_option("--max_local_ranks", *max_local_ranks, "as the experiment's flag: a host with fewer CPUs than where it started may need it");
  cmd->add_flag("--dry-run,--dry_run", *dry_run, "print the saved command, and the runs it would run and their job scripts; run nothing");
  return {cmd, [exp, max_local_ranks, dry_run] {
            SavedCommand saved = resume_command_line(*exp);
            if (!max_local_ranks->empty()) set_flag(saved.argv, "--max_local_ranks", *max_local_ranks);
            if (*dry_run) {
              saved.argv.push_back("--dry-run");
              std::string shown;
              for (size_t i = 1; i < saved.argv.size(); ++i) shown += " " + shell_quote(saved.argv[i]);
              std::cout << "fanout: resume --dry-run: in " << shell_quote(saved.cwd.string()) << ": fanout" << shown << "\n";
            }
            std::error_code ec;
            fs::current_path(saved.cwd, ec);
            if (ec) throw UserError(*exp + ": the experiment was started in " + saved.cwd.string() + ", which is gone: " + ec.message());
            std::vector<char*> cargv;
            for (auto& a : saved.argv) cargv.push_back(a.data());
            cargv.push_back(nullptr);
            return drive(int(saved.argv.size()), cargv.data());
          }};
}

Command process_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("process_scaling_results",
                                 "statistics, CSV, plots and an HTML report for an experiment (or a SmartSim-Scaling results folder)");
  struct State {
    std::string dir = "results";
    ProcessOptions opts;
  };
  auto st = std::make_shared<State>();
  auto* flag = cmd->add_option("--scaling_dir", st->dir, "experiment folder: fanout's, or SmartSim-Scaling's (imported first)")->capture_default_str();
  // `fanout process_scaling_results results/tsA` as well as --scaling_dir=results/tsA (one or the other).
  cmd->add_option("folder", st->dir, "the same as --scaling_dir")->excludes(flag);
  cmd->add_flag("--overwrite", st->opts.overwrite, "replace an existing <scaling_dir>/processed (--overwrite=false refuses)")->capture_default_str();
  cmd->add_flag("--gzip", st->opts.gzip_samples, "write samples.csv.gz");
  cmd->add_option("--scaling", st->opts.scaling, "strong:PARAM or weak:PARAM: speedup and parallel efficiency against PARAM's smallest value "
                                                 "(csv/scaling.csv, plots); default: the varied placement parameters, strong (repeatable)");
  return {cmd, [st] {
            auto report = process_scaling_results(st->dir, st->opts);
            if (report.imported_runs) std::cout << "imported " << report.imported_runs << " SmartSim-Scaling run(s)\n";
            for (auto& w : report.warnings) std::cerr << "warning: " << printable_lines(w) << "\n";
            for (auto& f : report.files)
              if (f.extension() != ".dat" && f.extension() != ".gp") std::cout << f.string() << "\n";
            // What could be read is processed; a session that could not be is an error, not a warning.
            for (auto& u : report.unreadable) std::cerr << "fanout: error: session not imported: " << printable_lines(u) << "\n";
            return report.unreadable.empty() ? 0 : 1;
          }};
}

// One subcommand per experiment template: every plugin parameter as a flag (with the template's default), plus
// the driver's settings.
Command template_command(CLI::App& app, const Plugin& plugin, const ExperimentTemplate& tmpl, const Invocation& inv) {
  auto* cmd = app.add_subcommand(tmpl.name, tmpl.summary + " [plugin " + plugin.name() + "]");
  struct State {
    SettingsFlags flags;
    std::map<std::string, std::pair<std::string, CLI::Option*>> params;
    std::map<std::string, std::vector<std::string>> repeated;  // FANOUT_PARAM_REPEATABLE flags, each value given
    std::vector<std::string> user_params;                      // --param name=values
  };
  auto st = std::make_shared<State>();
  std::vector<std::string> sweepable;  // for the example: parameters whose default is a list
  for (auto& ps : plugin.params()) {
    const std::string def = tmpl.default_text(ps);
    auto& slot = st->params[ps.name];
    if (!tmpl.uses_param(ps.name)) {
      // Not this experiment's: hidden, and refused by name below rather than as an unknown flag.
      slot.second = cmd->add_option("--" + ps.name, slot.first)->group("");
      continue;
    }
    if (ps.repeatable) {
      slot.second = cmd->add_option("--" + ps.name, st->repeated[ps.name], ps.help + " (repeatable; " + type_and_constraints(ps) + ")")
                        ->default_str(def)
                        ->type_name("TEXT")
                        ->group("Benchmark parameters (each a value or a list [a,b] to sweep)");
      continue;
    }
    slot.second = cmd->add_option("--" + ps.name, slot.first, ps.help + " (" + type_and_constraints(ps) + ")")
                      ->default_str(def)
                      ->type_name(ps.type == FANOUT_PARAM_INT ? "INT" : ps.type == FANOUT_PARAM_FLOAT ? "FLOAT" : ps.type == FANOUT_PARAM_BOOL ? "BOOL" : ps.type == FANOUT_PARAM_PATH ? "PATH" : "TEXT")
                      ->group("Benchmark parameters (each a value or a list [a,b] to sweep)");
    if (!def.empty() && def.front() == '[' && sweepable.size() < 2) sweepable.push_back("--" + ps.name + "=" + def);
  }
  if (plugin.user_parameters())
    cmd->add_option("--param", st->user_params, "a parameter of your own, name=value or name=[a,b] to sweep; {name} in the command takes its value (repeatable)")
        ->group("Benchmark parameters (each a value or a list [a,b] to sweep)");
  st->flags.add_to(cmd);
  // Built when --help asks: the template's defaults are planned, and where the local launcher would refuse them
  // (SmartSim-Scaling's 128 nodes x 32 clients), the example names a scheduler.
  cmd->footer([&plugin, &tmpl, sweepable] {
    std::string scheduler;
    std::optional<ExperimentPlan> plan;
    try {
      ExperimentRequest req;
      req.plugin = plugin.path().string();
      req.subcommand = tmpl.name;
      plan = plan_experiment(req, plugin);
    } catch (const std::exception&) {
      // defaults that do not plan here (a file parameter's default file missing): the example stays plain
    }
    try {
      if (plan) refuse_too_many_local_ranks(*plan, ExperimentSettings{}.scheduler);  // the default scheduler's limit
    } catch (const UserError&) {
      scheduler = " --launcher=slurm";
    }
    // A plugin that runs the user's program (exec) shows two that run; its --command is what the user brings.
    if (plugin.user_parameters() && plugin.param("command"))
      return "Examples:\n  fanout " + tmpl.name + " --command='sleep 0.01' --repeat_command=5 --warmup=1\n"
             "      # a program's wall time: 5 invocations after 1 warmup, on this machine\n"
             "  fanout " + tmpl.name + " --command='dd if=/dev/zero of=/dev/null bs={bs} count=2000' --param bs=[4k,64k] \\\n"
             "      --repeat=3 --parse='regex:copied, (?<value>[0-9.eE+-]+) s,' --from=stderr \\\n"
             "      --metric=dd_time --unit=s\n"
             "      # a sweep of your own parameter, a figure read from what the program prints; then\n"
             "      # fanout process_scaling_results results/" + tmpl.name + "\n\n"
             "Options of exec first, then the driver's by topic; more: docs/exec.md and docs/running.md.";
    return "Example:\n  fanout " + tmpl.name + (sweepable.empty() ? "" : " " + join(sweepable, " ")) + scheduler +
           " --dry-run\n      # the runs and their job scripts, nothing submitted";
  });
  return {cmd, [st, &plugin, &tmpl, &inv] {
            ExperimentRequest req;
            req.plugin = plugin.path().string();
            req.subcommand = tmpl.name;
            for (auto& ps : plugin.params()) {
              auto& [value, opt] = st->params.at(ps.name);
              if (!opt->count()) continue;
              if (ps.repeatable) {  // one value, the flags' values a line each: never a sweep
                // A newline in one would read as two values (--env $'X=a\nY=1' setting Y): refused.
                for (auto& v : st->repeated.at(ps.name))
                  if (v.find('\n') != std::string::npos)
                    throw UserError("--" + ps.name + " '" + printable(v) + "': a value of a repeatable flag may not hold a newline (give each value its own --" + ps.name + ")");
                req.params.push_back({ps.name, ParamSource{"", "--" + ps.name, {join(st->repeated.at(ps.name), "\n")}, {}}});
              } else
                req.params.push_back({ps.name, ParamSource{value, "--" + ps.name, {}, {}}});
            }
            for (auto& p : st->user_params) {
              auto eq = p.find('=');
              if (eq == std::string::npos || eq == 0) throw UserError("--param '" + printable(p) + "': expected name=value or name=[a,b]");
              req.params.push_back({p.substr(0, eq), ParamSource{p.substr(eq + 1), "--param " + p.substr(0, eq), {}, {}}});
            }
            req.settings.exp_name = tmpl.name;  // unless --exp_name says otherwise
            st->flags.apply(req);
            return execute(req, plugin, st->flags.dry_run, inv.cmdline, inv.args);
          }};
}

bool has_subcommand(CLI::App& app, const std::string& name) {
  return !app.get_subcommands([&](CLI::App* a) { return a->check_name(name); }).empty();
}

// SmartSim-Scaling's driver (python-fire) takes its commands with hyphens as well as underscores
// (aggregation-scaling-python-fs); so does fanout, for commands whose names have underscores.
void accept_hyphenated(CLI::App& app, CLI::App* cmd) {
  std::string hyphenated = cmd->get_name();
  std::replace(hyphenated.begin(), hyphenated.end(), '_', '-');
  if (hyphenated != cmd->get_name() && !has_subcommand(app, hyphenated)) cmd->alias(hyphenated);
}

// CLI11 reads "--message=" as a flag whose value is the next argument; an explicit empty value is kept here.
// Returned last first, as CLI11's parse(vector) takes them.
std::vector<std::string> words_for_cli11(int argc, char** argv) {
  std::vector<std::string> words;
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    const bool empty_value = starts_with(a, "--") && a.size() > 3 && a.back() == '=' && a.find('=') == a.size() - 1;
    if (empty_value) words.push_back(""), a.pop_back();
    words.push_back(a);
  }
  return words;
}

int drive(int argc, char** argv) {
  Invocation inv;
  // The command as every run's provenance records it: a --lab URI's password masked (the runs' records travel with
  // the results; command.toml, 0600, keeps the arguments whole for resume).
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (starts_with(a, "--lab=")) a = "--lab=" + lab_shown(a.substr(6));
    else if (i > 0 && std::string(argv[i - 1]) == "--lab") a = lab_shown(a);
    inv.cmdline += (i ? " " : "") + shell_quote(a);
  }
  inv.args.assign(argv, argv + argc);

  CLI::App app{"fanout " FANOUT_VERSION ": scaling benchmarks from parameter sweeps, on local processes or a scheduler"};
  app.formatter(std::make_shared<WrappingFormatter>());  // before the subcommands, which take their parent's
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("fanout " FANOUT_VERSION " (") + git_revision() + ", plugin ABI " +
                                        std::to_string(FANOUT_PLUGIN_ABI_VERSION) + ")");
  PluginScan scan = scan_plugins();

  std::vector<Command> commands = {plugins_command(app, scan), run_command(app, inv)};
  auto* results = app.add_subcommand("results", "work with stored results");
  results->require_subcommand(1);
  for (auto* make : {csv_command, ingest_command, compare_command, model_command, check_command, export_command, record_command})
    commands.push_back(make(*results));
  for (auto& h : history_commands(app)) commands.push_back(h);
  commands.push_back(ls_command(app));
  commands.push_back(site_command(app));
  commands.push_back(resume_command(app));
  commands.push_back(process_command(app));
  accept_hyphenated(app, commands.back().app);
  // The driver's own names come first: a template named like one of them (or an earlier template) is refused.
  for (auto& p : scan.plugins)
    for (auto& t : p->experiments()) {
      if (has_subcommand(app, t.name)) {
        scan.refused.push_back("experiment '" + t.name + "' of " + p->path().string() + " is shadowed by an earlier one");
        continue;
      }
      commands.push_back(template_command(app, *p, t, inv));
      accept_hyphenated(app, commands.back().app);
    }

  if (argc > 1 && argv[1][0] != '-' && !has_subcommand(app, argv[1])) {
    throw UserError(unknown_subcommand(app, argv[1]));
  }
  try {
    app.parse(words_for_cli11(argc, argv));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    throw UserError(usage_error(app, e));
  }
  for (auto& c : commands)
    if (c.app->parsed()) return c.run();
  return 2;
}

}  // namespace

// SIGPIPE (`fanout ... | head`): the sweep goes on and records every run; writes to the closed pipe just fail.
// A handler, not SIG_IGN: an ignored signal stays ignored in the ranks and programs the driver starts, a caught one
// is reset to its default by exec.
void on_sigpipe(int) {}

int main(int argc, char** argv) {
  fanout::never_group_or_world_writable();
  std::signal(SIGPIPE, on_sigpipe);
  // A line is one write: stderr unbuffered and std::cerr's unitbuf made one write(2) of each `<<`, ten a run's
  // line, which a sweep's log on a disk paid for every run. A partial line (the terminal's status) is flushed by
  // whoever writes it.
  std::setvbuf(stderr, nullptr, _IOLBF, BUFSIZ);
  std::cerr.unsetf(std::ios_base::unitbuf);
  // The rendezvous service holds a socket per rank: the soft limit of open files goes up to the hard one.
  if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
  try {
    return drive(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fanout: error: %s\n", printable_lines(e.what()).c_str());  // an echoed value's ESC is not run
    return 2;
  }
}
