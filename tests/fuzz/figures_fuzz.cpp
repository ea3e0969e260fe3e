// Figures text (results/figures.h: a bench's "metric iteration value unit [t_unix_s]" lines), any bytes.
// Asserts: parsing either throws UserError naming "<figures>:" and a line, or gives figures whose metric and unit
// are single words without control characters and whose times are positive; what parses is stored whole (as
// many samples as figures), and storing it again replaces, never adds.
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/error.h"
#include "results/figures.h"
#include "results/store.h"
#include "tests/fuzz/fuzz_check.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  static const fs::path root = fs::temp_directory_path() / ("fanout-figures-fuzz-" + std::to_string(getpid()));
  fs::create_directories(root);
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<fanout::Figure> figures;
  try {
    figures = fanout::parse_figures(in, "<figures>");
  } catch (const fanout::UserError& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("<figures>:", 0) == 0);
    return 0;
  }
  for (const auto& f : figures) {
    FUZZ_CHECK(!f.metric.empty() && !f.unit.empty());
    for (unsigned char c : f.metric + f.unit) FUZZ_CHECK(c > 0x20 && c != 0x7f);
    FUZZ_CHECK(f.t_unix_s >= 0);
  }
  if (figures.empty()) return 0;
  fs::remove(root / "fanout.sqlite");
  fanout::ResultsDb db(root / "fanout.sqlite");
  const fanout::FigureRun run{"fuzz", "bench", {{"bench", "fuzz"}}, {}};
  FUZZ_CHECK(fanout::record_figures(db, root, run, figures).samples == figures.size());
  FUZZ_CHECK(fanout::record_figures(db, root, run, figures).samples == figures.size());
  return 0;
}
