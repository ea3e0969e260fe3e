// Import of SmartSim-Scaling result trees (results/smartsim_import.h), any bytes: the input up to its first NUL
// is the session's run.cfg, the rest its rank_0_timing.csv, in a tree laid out as SmartSim-Scaling writes it
// (run-<date>/<session>/). Asserts: the import never throws; the one session is either stored (whole, with as
// many samples as the report says) or skipped with a reason that names it; a re-import replaces, never adds.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "results/smartsim_import.h"
#include "results/store.h"
#include "tests/fuzz/fuzz_check.h"

namespace fs = std::filesystem;

namespace {

long long count_rows(const fs::path& db, const char* table) {
  sqlite3* h = nullptr;
  FUZZ_CHECK(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  FUZZ_CHECK(sqlite3_prepare_v2(h, (std::string("SELECT COUNT(*) FROM ") + table).c_str(), -1, &st, nullptr) == SQLITE_OK);
  FUZZ_CHECK(sqlite3_step(st) == SQLITE_ROW);
  const long long n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  static const fs::path root = fs::temp_directory_path() / ("fanout-smartsim-import-fuzz-" + std::to_string(getpid()));
  static const fs::path session = root / "tree" / "run-2024-01-01-00-00-00" / "infer-sess-colo-N1-T1";
  static const fs::path db_file = root / "fanout.sqlite";
  fs::create_directories(session);
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::ofstream(session / "run.cfg", std::ios::binary | std::ios::trunc) << input.substr(0, nul);
  std::ofstream(session / "rank_0_timing.csv", std::ios::binary | std::ios::trunc) << (nul == std::string::npos ? "" : input.substr(nul + 1));
  fs::remove(db_file);
  fanout::ResultsDb db(db_file);
  fanout::SmartSimImportReport first, again;
  first = fanout::import_smartsim_tree(root / "tree", db);
  FUZZ_CHECK(first.runs + first.producers + int(first.skipped.size()) == 1);
  if (!first.skipped.empty()) {
    FUZZ_CHECK(first.skipped[0].find(session.string()) == 0);
    FUZZ_CHECK(first.samples == 0 && count_rows(db_file, "runs") == 0);
  }
  again = fanout::import_smartsim_tree(root / "tree", db);
  FUZZ_CHECK(again.runs == first.runs && again.samples == first.samples);
  FUZZ_CHECK(count_rows(db_file, "runs") == first.runs);
  return 0;
}
