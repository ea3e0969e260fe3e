#include "results/figures.h"

#include <chrono>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/text.h"
#include "results/run_folder.h"

namespace fanout {

namespace {

// A name of the text form: no spaces (the fields are split on them), no control characters.
bool plain_word(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c <= 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

std::vector<Figure> parse_figures(std::istream& in, const std::string& origin) {
  std::vector<Figure> out;
  std::map<std::string, std::string> unit_of;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = origin + ":" + std::to_string(n) + ": ";
    std::istringstream fields(line);
    std::vector<std::string> w;
    for (std::string f; fields >> f;) w.push_back(f);
    if (w.empty() || w[0][0] == '#') continue;
    if (w.size() != 4 && w.size() != 5)
      throw UserError(where + "expected 'metric iteration value unit [t_unix_s]', got " + std::to_string(w.size()) + " field(s)");
    Figure f;
    f.metric = w[0];
    f.unit = w[3];
    if (!plain_word(f.metric) || !plain_word(f.unit)) throw UserError(where + "a metric or unit with control characters");
    const auto iteration = parse_int(w[1]);
    if (!iteration) throw UserError(where + "iteration '" + w[1] + "' is not an integer");
    f.iteration = *iteration;
    const auto value = parse_double(w[2]);
    if (!value) throw UserError(where + "value '" + w[2] + "' is not a number");
    f.value = *value;
    if (w.size() == 5) {
      const auto t = parse_double(w[4]);
      if (!t || !(*t > 0) || !std::isfinite(*t)) throw UserError(where + "t_unix_s '" + w[4] + "' is not a positive time");
      f.t_unix_s = *t;
    }
    auto [it, fresh] = unit_of.emplace(f.metric, f.unit);
    if (!fresh && it->second != f.unit)
      throw UserError(where + "metric " + f.metric + " in " + f.unit + ", earlier in " + it->second);
    out.push_back(std::move(f));
  }
  if (in.bad()) throw UserError(origin + ": read error");
  return out;
}

IngestReport record_figures(ResultsDb& db, const std::filesystem::path& exp_dir, const FigureRun& run,
                            const std::vector<Figure>& figures) {
  if (figures.empty()) throw UserError("results record: no figures for " + run.name + " (the bench printed nothing this reads)");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  RunMetadata m;
  m.session = run.name;
  m.experiment = run.experiment;
  m.subcommand = "record";
  m.plugin = "figures";
  m.parameters = run.parameters;
  m.provenance = run.provenance;
  RunStatusRecord st;
  st.state = "COMPLETED";
  m.status = st;
  return db.store_run(m, exp_dir / "figures" / run.name, [&](const ResultsDb::SampleSink& sink, IngestReport&) {
    std::map<std::string, int64_t> ids;
    for (const Figure& f : figures) {
      auto it = ids.find(f.metric);
      if (it == ids.end()) it = ids.emplace(f.metric, sink.metric("bench", f.metric, f.unit)).first;
      sink.sample(0, it->second, f.iteration, f.t_unix_s > 0 ? f.t_unix_s : now, f.value, false);
    }
  });
}

}  // namespace fanout
