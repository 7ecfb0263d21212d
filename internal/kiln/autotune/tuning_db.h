// kiln/autotune/tuning_db.h - every timing the autotuner took, per device, in SQLite.
//
// One database file, `autotune.sqlite` in the cache directory (DiskCache::default_root()),
// in WAL mode so that many processes read while one writes. A row per (device, kernel
// structure, shape bucket, variant) holds that variant's status and median time, so a new
// candidate set measures only what is new, and a choice is recomputed from the rows each
// time (a stored variant that is no longer legal is skipped by the caller). A garbled file
// or one of another schema version is moved aside with a warning and rebuilt; a directory
// that cannot hold the file gives an in-memory database and a warning. docs/autotune.md
// has the schema.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace kiln::autotune {

/// What the database files a kernel under: the device (a hash of its fingerprint), the
/// kernel's structure (a hash of kir::kernel_structure) and its shape bucket.
struct TuningKey {
  std::string device;
  std::string kernel;
  std::string bucket;
  /// "device/kernel/bucket": how `kiln cache show` names a key.
  std::string str() const;
  static std::optional<TuningKey> parse(std::string_view text);
  friend bool operator==(const TuningKey&, const TuningKey&) = default;
};

enum class Status : uint8_t {
  Ok,       // ran, matched the default's output, timed
  Wrong,    // ran, but its output differs from the default's: never chosen
  Failed,   // did not compile, did not run, ran past the time cap, or its process died
  Running,  // being measured by process `pid` now (or it died doing so)
  Lost,     // ran and matched, looked fastest, but did not beat the default when the two
            // were timed again in alternation: never chosen
};
std::string_view status_name(Status s);

/// One variant's row.
struct Measurement {
  std::string variant;  // kir::Variant::str()
  Status status = Status::Ok;
  double median_ns = 0;   // Ok and Lost
  double compile_ms = 0;
  std::string detail;     // why Wrong or Failed
  int64_t pid = 0;        // the process that wrote it
  std::string host;
};

/// A tuned key as `kiln cache list` shows it.
struct KeySummary {
  TuningKey key;
  std::string device_name;
  std::string description;  // the kernel as its first instance was named: "k0 over [64, reduce 1000]"
  int measured = 0, failed = 0, wrong = 0;
  int rows = 0;             // every row of the key, as `kiln cache show` lists them (lost ones too)
  std::string best;         // fastest Ok variant ("" when none)
  double default_ns = 0, best_ns = 0;
};

class TuningDb {
 public:
  /// Opens `dir`/autotune.sqlite, creating it (and `dir`); an empty `dir`, or one that cannot
  /// hold a database, gives an in-memory database, and problem() says why (the tuner warns
  /// when it tunes into it: an empty database read in `cached` mode costs nothing).
  static std::unique_ptr<TuningDb> open(const std::filesystem::path& dir);
  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  /// Whether rows reach a file (false: in memory, or a file deployed read-only).
  bool persistent() const { return !path_.empty() && !read_only_; }
  const std::filesystem::path& path() const { return path_; }
  /// Why the database is in memory although a directory was given ("" otherwise).
  const std::string& problem() const { return problem_; }

  /// Names a device id once: `fingerprint` is what it hashes, `name` what people read.
  void describe_device(std::string_view device, std::string_view fingerprint, std::string_view name);
  /// Names a key once (the first description stays).
  void describe_kernel(const TuningKey& key, std::string_view description);

  /// Every row of `key`. Rows left Running by a process that no longer exists (a crash in
  /// the compiler or the kernel) are turned into Failed rows first, so they are never
  /// measured again.
  std::vector<Measurement> measurements(const TuningKey& key);
  /// Writes (replaces) `m`'s row of `key`, stamped with this process.
  void record(const TuningKey& key, Measurement m);

  /// Whether this process may tune `key` now: true unless another live process holds its
  /// claim. A claim by a process that died is taken over. release() gives it up.
  bool claim(const TuningKey& key);
  void release(const TuningKey& key);
  /// Whether another live process holds `key`'s claim: its rows are changing (candidates
  /// timed but not yet confirmed against the default) and are not a choice yet.
  bool tuned_elsewhere_now(const TuningKey& key);

  // ---- `kiln cache` ----
  /// Every key of `device` ("" : every device), most recently updated first.
  std::vector<KeySummary> keys(std::string_view device = {});
  /// Rows removed for `device` ("" : all).
  int64_t clear(std::string_view device = {});
  /// Copies `device`'s devices, kernels and measurements rows into a new database at `file`
  /// (replaced if present), with `artifacts` (name, bytes) in a table beside them.
  void export_to(const std::filesystem::path& file, std::string_view device,
                 const std::vector<std::pair<std::string, std::string>>& artifacts);
  /// Merges the rows of a file export_to wrote (newer rows win) and returns its artifacts.
  /// Throws kiln::Error naming the file when it is not such a file.
  std::vector<std::pair<std::string, std::string>> import_from(const std::filesystem::path& file);

  static constexpr int kSchemaVersion = 1;

 private:
  TuningDb(sqlite3* db, std::filesystem::path path);
  void exec(const char* sql);
  void recover_dead_rows(const TuningKey& key);
  bool claimed_by_another(const TuningKey& key);  // mutex_ held
  sqlite3* db_;
  std::filesystem::path path_;
  std::string problem_;
  bool read_only_ = false;  // a file deployed read-only: read, never written
  std::mutex mutex_;  // one statement at a time on the connection
};

/// This machine's host name (read once).
const std::string& host_name();

}  // namespace kiln::autotune
