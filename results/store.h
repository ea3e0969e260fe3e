// The results database: results/<exp>/fanout.sqlite (WAL). Its schema is a public interface (documented in
// docs/results-schema.md); users query it with sqlite3. Ingestion of a run is one transaction: a run's
// samples land exactly once, and re-ingesting a run replaces its rows instead of duplicating them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace fanout {

struct RunMetadata;

// 1 (a row per sample) and 2 (provenance and declarations stored per run) are migrated on open; 2 is read as it is.
constexpr int kResultsSchemaVersion = 3;

struct IngestReport {
  int64_t run_id = 0;
  uint64_t samples = 0;
  std::vector<std::string> warnings;  // truncated or unreadable sample files, ...
  std::string kept;  // not stored again: the status the database holds for a folder that records no end
};

struct StoredRun {
  int64_t id = 0;
  std::string session, status, path, param_hash, job_id, node_list, reason;
  std::vector<std::pair<std::string, std::string>> parameters;
  std::string repeat;  // which of its permutation's --repeat runs (1-based, from its provenance; "1" without --repeat)
  std::string scaling;  // the sweep's --scaling or its plugin's declared count parameters ("strong:nodes,weak:size")
  std::set<std::string> settings;  // parameters its plugin declared settings of how it runs (provenance plugin_settings)
};

struct MetricSummaryRow {
  int64_t run_id = 0;
  std::string role, metric, unit;
  int ranks = 0;               // distinct ranks among them
  std::vector<double> values;  // non-warmup sample values of this run and metric
  uint64_t not_a_number = 0;   // non-warmup samples recorded as NaN (stored as null): not in values
  // What the run's ranks declared of the metric: "lower", "higher", "none", or "" (undeclared); a setup cost.
  std::string better;
  bool setup_cost = false;
};

// What `fanout ls` shows of one experiment's database, read without writing to it (another driver may be running
// the experiment). Throws UserError naming the file when it is missing or not a fanout results database.
struct ExperimentSummary {
  std::map<std::string, int64_t> runs_by_status;  // COMPLETED, FAILED, ... -> runs, superseded attempts left out
  int64_t runs = 0;        // every attempt
  int64_t superseded = 0;  // attempts that did not complete and were run again since (a retry, a resume)
  double last_end_s = 0;  // Unix seconds of the newest run's end, 0 when none ended
  std::set<std::string> completed;  // param_hash of every permutation with a COMPLETED run (what a resume skips)
  std::vector<std::string> revisions, dirty;  // distinct provenance revision and source_dirty (the code the runs measured)
};
ExperimentSummary summarize_experiment_db(const std::filesystem::path& file);

// SQLite's settings for the whole process (its statement journal kept in memory, no memory statistics). They hold
// only when made before SQLite's first use: whatever opens a connection in a fanout process calls this first.
void configure_sqlite_once();

// When ResultsDb::ingest_runs commits the runs it has stored: after `seconds`, or sooner once they hold `samples`.
// The driver commits the runs that end as a sweep goes after the same `seconds`.
struct IngestBatch {
  double seconds = 1;
  uint64_t samples = 1u << 17;  // about 4 MiB of samples' text: a large run is committed alone, its pages then let go
};

class ResultsDb {
 public:
  explicit ResultsDb(const std::filesystem::path& file);  // creates the schema when new
  // An existing database, read only: nothing created, upgraded or written, and no write access needed (a
  // colleague's results, a read-only mount): what compare, check, export-smartsim and history read through.
  struct ReadOnly {};
  ResultsDb(const std::filesystem::path& file, ReadOnly);
  ~ResultsDb();
  // Throws UserError naming the file when SQLite opened it read-only (a write-protected file or folder): a
  // driver checks this before it runs anything, not when the first run's samples are stored.
  void require_writable() const;
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  // Reads a run folder (run.toml + samples/) and stores it, replacing any earlier copy of the same folder.
  IngestReport ingest_run(const std::filesystem::path& run_dir);
  // The same, for a folder whose run.toml the caller has just written as `meta` (the driver: not read back).
  IngestReport ingest_run(const std::filesystem::path& run_dir, RunMetadata meta);
  // Run folders in order, each as ingest_run stores it, the next one read while this one is stored; `stored` is
  // called for each once it is committed. A folder ingest_run would refuse (an unreadable run.toml): with `skipped`,
  // reported to it and passed over, the rest stored; without, it stops there with the runs before it stored.
  // Runs are committed together, a batch ending after `batch` (a commit a run synced the journal and the file each
  // time: 1.9 ms a run re-ingesting small folders); a run that cannot be stored takes its batch's runs back with it.
  void ingest_runs(const std::vector<std::filesystem::path>& run_dirs,
                   const std::function<void(const std::filesystem::path&, const IngestReport&)>& stored,
                   const std::function<void(const std::filesystem::path&, const std::string& why)>& skipped = nullptr,
                   IngestBatch batch = {});

  // Where samples go while a run is stored: metric() resolves a metric's id once, sample() stores one sample,
  // block() a block of them already packed (sample_block.h) for one (metric, rank), after that pair's earlier ones.
  struct SampleSink {
    std::function<int64_t(const std::string& role, const std::string& metric, const std::string& unit)> metric;
    std::function<void(int rank, int64_t metric_id, int64_t iteration, double t_start, double value, bool warmup)> sample;
    std::function<void(int rank, int64_t metric_id, size_t count, std::string_view rows)> block;
    // What the run's ranks declared of a metric: better ("lower", "higher", "none") and whether it is a setup cost.
    std::function<void(const std::string& role, const std::string& metric, const std::string& better, bool setup_cost)> declare;
  };
  // Where a rank ran and on what (rank_nodes; rank_resources when cpus or gpus is known).
  struct RankPlace {
    std::string role;
    int rank = 0;
    std::string node, cpus, gpus;
  };
  // What a run's ranks declared of its metrics: (role, metric) -> (better, setup cost), each as the last rank said.
  using Declarations = std::map<std::pair<std::string, std::string>, std::pair<std::string, bool>>;
  // Stores one run described by `meta` (its folder is the key), with the samples `emit` produces and where its
  // ranks ran, in one transaction that replaces any earlier copy. emit may add warnings. Declarations known before
  // the samples (`declared`) go into the run's row as it is inserted; those emit makes update it after (an UPDATE
  // of the row: SQLite copies a 32 KiB page into its statement journal for it, 7 % of a local run's instructions).
  IngestReport store_run(const struct RunMetadata& meta, const std::filesystem::path& run_dir,
                         const std::function<void(const SampleSink&, IngestReport&)>& emit,
                         const std::vector<RankPlace>& ranks = {}, const Declarations* declared = nullptr);

  // SQLite's page cache for this connection, at most `mib` MiB (64 by default: a large run's ingest stays in memory
  // until its commit). A driver storing many small runs caps it lower, as the cache would grow with the database.
  void cap_page_cache(int mib);
  // Every commit synced to the disk before it returns (SQLite's synchronous=FULL: with its write-ahead log, one sync
  // of the log a commit); by default a commit in WAL mode survives the process, not the host.
  void sync_commits();
  // Runs stored between begin_batch() and commit_batch() are committed together: a driver storing each run as it
  // ends, milliseconds apart, writes the pages they share once per batch rather than once per run (32 KiB pages,
  // about ten a run). Readers see a batch when it is committed; a batch still open when the database closes is
  // committed then. A run that fails to store takes the batch back with it (as SQLite does on a full disk), and its
  // error says how many runs went.
  void begin_batch();
  void commit_batch();
  bool in_batch() const;

  std::vector<StoredRun> runs() const;
  // The same one run at a time, in id order: what reads every run of a large experiment without holding them.
  void for_each_run(const std::function<void(StoredRun&&)>& fn) const;
  // The same pulled, one at a time: a pass that reads the runs beside another table in run order (samples,
  // metric groups) holds the run it is at, not every run (a 100,000-run sweep's were 26 MB of its CSV pass).
  class RunReader {
   public:
    explicit RunReader(const ResultsDb& db);
    ~RunReader();
    RunReader(const RunReader&) = delete;
    RunReader& operator=(const RunReader&) = delete;
    bool next(StoredRun& run);  // false once past the last

   private:
    struct Statements;
    std::unique_ptr<Statements> s_;
  };
  // The distinct values of one provenance key over the runs, the first run's first ("" values left out).
  std::vector<std::string> provenance_values(const std::string& key) const;
  // Calls fn for each (run, role, metric) with its non-warmup values and its declaration, one group at a time
  // (bounded memory: a run's declarations are read as its groups come, never the whole table).
  void for_each_metric(const std::function<void(MetricSummaryRow&)>& fn) const;  // fn may take the values
  struct MetricInfo {
    std::string role, name, unit;
  };
  std::map<int64_t, MetricInfo> metrics() const;  // id -> names
  // How many (run, role, metric) groups the runs declared: the rows their statistics will have.
  size_t metric_declaration_count() const;
  // Calls fn for every sample, ordered by run, metric, rank, then as recorded (metric by id: see metrics()), with
  // the fields as stored (sample_block.h).
  void for_each_sample(const std::function<void(int64_t run_id, int rank, int64_t metric_id, const struct SampleRowText&)>& fn) const;
  // Calls fn(run_id, value) for every non-warmup sample of one metric.
  void for_each_value(const std::string& role, const std::string& metric, const std::string& unit,
                      const std::function<void(int64_t run_id, double value)>& fn) const;
  sqlite3* handle() const { return db_; }

  // One consistent view across several reads (a WAL read transaction) while other drivers keep storing runs:
  // without it, samples stored between reading the runs and reading the samples belong to no known run.
  class ReadSnapshot {
   public:
    explicit ReadSnapshot(const ResultsDb& db);
    ~ReadSnapshot();
    ReadSnapshot(const ReadSnapshot&) = delete;
    ReadSnapshot& operator=(const ReadSnapshot&) = delete;

   private:
    const ResultsDb& db_;
    bool own_;  // false inside a batch, which is the snapshot already
  };

 private:
  class BulkJournal;  // ingest_runs: a rollback journal while it stores
  void exec(const std::string& sql) const;
  void rollback() const;  // ends an open transaction, if SQLite has not ended it already
  void forget_orphans_of(int64_t run_id);  // rows a run deleted without foreign keys left under the id given again
  // fn(run, metric, rank, rows) for each stored block matching `where` (SQL over alias b), in key order: run,
  // metric, rank, block (recording order within a rank). rows is valid until fn returns.
  void for_each_block(const std::string& where,
                      const std::function<void(int64_t, int64_t, int, std::string_view)>& fn) const;
  // fn(run, metric, rank, row) for each stored sample of those blocks, in the same order.
  void for_each_row(const std::string& where, const std::function<void(int64_t, int64_t, int, const struct SampleRowText&)>& fn) const;
  // Row ids of experiments and metrics, made when first asked for; rows neither deleted nor changed, so the ids
  // are kept (by their key's fields joined with NUL) until a rollback may have taken the rows back. Every stored
  // run asked for 11 of them, 22 statements.
  int64_t experiment_id(const std::string& name, const std::string& plugin, const std::string& subcommand);
  int64_t metric_id(const std::string& role, const std::string& name, const std::string& unit);
  int64_t experiment_row(const std::string& name, const std::string& plugin, const std::string& subcommand);
  int64_t metric_row(const std::string& role, const std::string& name, const std::string& unit);
  mutable std::map<std::string, int64_t> experiment_ids_, metric_ids_;
  // Rows many runs share, stored once as a set the run points at (runs.provenance_set, runs.declaration_set): a
  // sweep's provenance is the same in every run but its repeat and attempt, its metrics' declarations the same in
  // all. Per run they were 29 of its 51 rows, a quarter of the driver's CPU a run. A set is found by its content;
  // the ids of the last few are kept, as experiment_ids_ are.
  enum class SetKind { provenance, declarations };
  int64_t row_set(SetKind kind, const std::string& content, const std::function<void(int64_t set_id)>& insert_rows);
  int64_t provenance_set(const RunMetadata& meta);
  int64_t declaration_set(const Declarations& declared);
  void migrate_2_to_3();
  mutable std::unordered_map<std::string, int64_t> set_ids_[2];
  sqlite3* db_ = nullptr;
  size_t batch_runs_ = 0;  // runs stored in the open batch
  // The highest run id any run table holds rows of, as the open write transaction began (-1: not yet looked at):
  // a run given a higher id has no orphans to forget (forget_orphans_of).
  mutable int64_t orphan_free_after_ = -1;
  bool synced_commits_ = false;  // sync_commits()
  std::filesystem::path file_;
  // Statements every stored run executes, prepared once per connection (by their text's address: literals).
  sqlite3_stmt* prepared(const char* sql) const;
  mutable std::map<const char*, sqlite3_stmt*> prepared_;
};

}  // namespace fanout
