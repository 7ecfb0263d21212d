// autotune/tuning_db.cpp - see kiln/autotune/tuning_db.h.
#include "kiln/autotune/tuning_db.h"
#include "kiln/runtime/disk_cache.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <system_error>

#include <fmt/format.h>
#include <sqlite3.h>

#include "kiln/support/error.h"
#include "kiln/support/log.h"

namespace kiln::autotune {
namespace {

namespace fs = std::filesystem;

// A claim or Running row from another host is presumed dead after this long.
constexpr int64_t kForeignRowLifetimeS = 3600;

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The tables, in schema `prefix` ("" or "x."): export files have the same ones.
std::string schema_sql(std::string_view prefix) {
  return fmt::format(R"(
CREATE TABLE IF NOT EXISTS {0}meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {0}devices(device TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {0}kernels(
  device TEXT NOT NULL, kernel TEXT NOT NULL, bucket TEXT NOT NULL,
  description TEXT NOT NULL, updated INTEGER NOT NULL,
  PRIMARY KEY(device, kernel, bucket));
CREATE TABLE IF NOT EXISTS {0}measurements(
  device TEXT NOT NULL, kernel TEXT NOT NULL, bucket TEXT NOT NULL, variant TEXT NOT NULL,
  status TEXT NOT NULL, median_ns REAL NOT NULL, compile_ms REAL NOT NULL, detail TEXT NOT NULL,
  pid INTEGER NOT NULL, host TEXT NOT NULL, updated INTEGER NOT NULL,
  PRIMARY KEY(device, kernel, bucket, variant));
CREATE TABLE IF NOT EXISTS {0}claims(
  device TEXT NOT NULL, kernel TEXT NOT NULL, bucket TEXT NOT NULL,
  pid INTEGER NOT NULL, host TEXT NOT NULL, started INTEGER NOT NULL,
  PRIMARY KEY(device, kernel, bucket));
)",
                     prefix);
}

// One prepared statement; finalized on scope exit. Throws kiln::Error on any SQLite error.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
      throw Error(fmt::format("autotune database: {} (in `{}`)", sqlite3_errmsg(db), sql));
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::string_view v) {
    // Never a null pointer: SQLite binds that as NULL, not as ''.
    sqlite3_bind_text(stmt_, i, v.empty() ? "" : v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind_blob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& bind_key(const TuningKey& k) { return bind(1, k.device).bind(2, k.kernel).bind(3, k.bucket); }

  /// True while a row is ready.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(fmt::format("autotune database: {}", sqlite3_errmsg(db_)));
  }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  std::string blob(int col) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double f64(int col) const { return sqlite3_column_double(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when the scope is left by an exception.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { run("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    run("COMMIT");
    done_ = true;
  }

 private:
  void run(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw Error(fmt::format("autotune database: {}: {}", sql, msg));
    }
  }
  sqlite3* db_;
  bool done_ = false;
};

Status parse_status(std::string_view s) {
  if (s == "ok") return Status::Ok;
  if (s == "wrong") return Status::Wrong;
  if (s == "running") return Status::Running;
  if (s == "lost") return Status::Lost;
  return Status::Failed;
}

// Runs `sql` on `db`; the SQLite error code (SQLITE_OK on success) and its message.
std::pair<int, std::string> try_exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : (rc == SQLITE_OK ? "" : sqlite3_errstr(rc));
  sqlite3_free(err);
  return {rc, msg};
}

// Whether process `pid` on `host` may still be alive (false only when it is on this host and
// gone).
bool process_alive(int64_t pid, std::string_view host) {
  if (host != host_name()) return true;
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// The schema version `db` says it holds ("" when it says none).
std::string schema_version(sqlite3* db) {
  sqlite3_stmt* st = nullptr;
  std::string version;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema'", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    version = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return version;
}

enum class OpenResult { Ok, Garbled, Unusable };

// Opens `path` and makes sure it holds this schema version.
OpenResult open_file(const fs::path& path, sqlite3** out, std::string& why) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return OpenResult::Unusable;
  }
  // Writers from other processes wait for each other instead of failing.
  sqlite3_busy_timeout(db, 30000);
  auto fail = [&](int code, const std::string& msg) {
    why = msg;
    sqlite3_close(db);
    const int primary = code & 0xff;
    return primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT || primary == SQLITE_SCHEMA ? OpenResult::Garbled
                                                                                             : OpenResult::Unusable;
  };
  // WAL with synchronous=NORMAL: a crash never damages the file, and a commit costs no
  // fsync (a power loss may lose the last timings, which are measured again).
  auto [wal_rc, wal_msg] = try_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL");
  if (wal_rc != SQLITE_OK) return fail(wal_rc, wal_msg);
  const std::string create = "BEGIN IMMEDIATE;" + schema_sql("") +
                             fmt::format("INSERT OR IGNORE INTO meta VALUES('schema', '{}'); COMMIT;", TuningDb::kSchemaVersion);
  if (auto [c_rc, c_msg] = try_exec(db, create); c_rc != SQLITE_OK) {
    try_exec(db, "ROLLBACK");
    return fail(c_rc, c_msg);
  }
  if (const std::string version = schema_version(db); version != std::to_string(TuningDb::kSchemaVersion)) {
    why = fmt::format("schema version {}, this kiln reads {}", version.empty() ? "?" : version, TuningDb::kSchemaVersion);
    sqlite3_close(db);
    return OpenResult::Garbled;
  }
  // A damaged page shows here rather than in the middle of tuning.
  auto [q_rc, q_msg] = try_exec(db, "PRAGMA quick_check");
  if (q_rc != SQLITE_OK) return fail(q_rc, q_msg);
  *out = db;
  return OpenResult::Ok;
}

// `path` opened read-only as an immutable file (no -wal or -shm file needed), when it holds
// this schema version; nullptr otherwise.
sqlite3* open_read_only(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return nullptr;
  sqlite3* db = nullptr;
  const std::string uri = "file:" + path.string() + "?immutable=1";
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return nullptr;
  }
  if (schema_version(db) != std::to_string(TuningDb::kSchemaVersion)) {
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

sqlite3* open_memory() {
  sqlite3* db = nullptr;
  sqlite3_open(":memory:", &db);
  try_exec(db, schema_sql("") + fmt::format("INSERT OR IGNORE INTO meta VALUES('schema', '{}');", TuningDb::kSchemaVersion));
  return db;
}

}  // namespace

std::string TuningKey::str() const { return fmt::format("{}/{}/{}", device, kernel, bucket); }

std::optional<TuningKey> TuningKey::parse(std::string_view text) {
  const size_t a = text.find('/');
  const size_t b = a == std::string_view::npos ? a : text.find('/', a + 1);
  if (b == std::string_view::npos || a == 0 || b == a + 1 || b + 1 >= text.size()) return std::nullopt;
  return TuningKey{std::string(text.substr(0, a)), std::string(text.substr(a + 1, b - a - 1)),
                   std::string(text.substr(b + 1))};
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Wrong: return "wrong";
    case Status::Failed: return "failed";
    case Status::Running: return "running";
    case Status::Lost: return "lost";
  }
  return "?";
}

const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("localhost");
  }();
  return name;
}

std::unique_ptr<TuningDb> TuningDb::open(const fs::path& dir) {
  if (dir.empty()) return std::unique_ptr<TuningDb>(new TuningDb(open_memory(), {}));
  // A database another user can write chooses what code runs: not used (DiskCache's rule).
  if (const std::string untrusted = untrusted_cache_dir(dir); !untrusted.empty()) {
    auto db = std::unique_ptr<TuningDb>(new TuningDb(open_memory(), {}));
    db->problem_ = fmt::format("the autotune database's directory {} is not used ({})", dir.string(), untrusted);
    return db;
  }
  std::error_code ec;
  std::string why;
  if (!create_private_dirs(dir, why)) ec = std::make_error_code(std::errc::io_error);
  const fs::path path = dir / "autotune.sqlite";
  for (int attempt = 0; !ec && attempt < 2; ++attempt) {
    sqlite3* db = nullptr;
    switch (open_file(path, &db, why)) {
      case OpenResult::Ok: return std::unique_ptr<TuningDb>(new TuningDb(db, path));
      case OpenResult::Unusable: attempt = 2; break;
      case OpenResult::Garbled: {
        const fs::path aside = path.string() + fmt::format(".corrupt-{}-{}", now_s(), getpid());
        warn(fmt::format("autotune database {} is unreadable ({}): moved to {} and rebuilt", path.string(), why,
                         aside.string()));
        std::error_code mv;
        fs::rename(path, aside, mv);
        for (const char* side : {"-wal", "-shm"}) fs::remove(path.string() + side, mv);
        break;
      }
    }
  }
  // A database deployed read-only (filled ahead of time, then shipped) is still read.
  if (sqlite3* ro = open_read_only(path)) {
    auto db = std::unique_ptr<TuningDb>(new TuningDb(ro, path));
    db->read_only_ = true;
    db->problem_ = fmt::format("the autotune database {} is read-only ({})", path.string(), why);
    return db;
  }
  auto db = std::unique_ptr<TuningDb>(new TuningDb(open_memory(), {}));
  db->problem_ = fmt::format("cannot keep the autotune database in {} ({})", dir.string(), why);
  return db;
}

TuningDb::TuningDb(sqlite3* db, fs::path path) : db_(db), path_(std::move(path)) {}
TuningDb::~TuningDb() { sqlite3_close(db_); }

void TuningDb::exec(const char* sql) {
  auto [rc, msg] = try_exec(db_, sql);
  if (rc != SQLITE_OK) throw Error(fmt::format("autotune database: {}", msg));
}

void TuningDb::describe_device(std::string_view device, std::string_view fingerprint, std::string_view name) {
  if (read_only_) return;
  std::lock_guard lock(mutex_);
  Stmt(db_, "INSERT OR IGNORE INTO devices VALUES(?, ?, ?)").bind(1, device).bind(2, fingerprint).bind(3, name).step();
}

void TuningDb::describe_kernel(const TuningKey& key, std::string_view description) {
  if (read_only_) return;
  std::lock_guard lock(mutex_);
  Stmt(db_, "INSERT OR IGNORE INTO kernels VALUES(?, ?, ?, ?, ?)").bind_key(key).bind(4, description).bind(5, now_s()).step();
}

void TuningDb::recover_dead_rows(const TuningKey& key) {
  if (read_only_) return;
  std::vector<std::pair<std::string, std::string>> dead;  // variant, detail
  {
    Stmt q(db_, "SELECT variant, pid, host FROM measurements WHERE device = ? AND kernel = ? AND bucket = ? AND status = 'running'");
    q.bind_key(key);
    while (q.step()) {
      const int64_t pid = q.i64(1);
      const std::string host = q.text(2);
      if (pid == getpid() && host == host_name()) continue;  // this process is measuring it
      if (process_alive(pid, host)) continue;
      dead.emplace_back(q.text(0), fmt::format("process {} on {} died measuring it (a crash in the compiler or the kernel)", pid, host));
    }
  }
  if (dead.empty()) return;
  Transaction t(db_);
  for (const auto& [variant, detail] : dead)
    Stmt(db_, "UPDATE measurements SET status = 'failed', detail = ?, updated = ? WHERE device = ? AND kernel = ? AND bucket = ? AND variant = ? AND status = 'running'")
        .bind(1, detail).bind(2, now_s()).bind(3, key.device).bind(4, key.kernel).bind(5, key.bucket).bind(6, variant).step();
  t.commit();
}

std::vector<Measurement> TuningDb::measurements(const TuningKey& key) {
  std::lock_guard lock(mutex_);
  recover_dead_rows(key);
  std::vector<Measurement> out;
  Stmt q(db_, "SELECT variant, status, median_ns, compile_ms, detail, pid, host FROM measurements "
              "WHERE device = ? AND kernel = ? AND bucket = ? ORDER BY variant");
  q.bind_key(key);
  while (q.step())
    out.push_back({q.text(0), parse_status(q.text(1)), q.f64(2), q.f64(3), q.text(4), q.i64(5), q.text(6)});
  return out;
}

void TuningDb::record(const TuningKey& key, Measurement m) {
  if (read_only_) return;
  std::lock_guard lock(mutex_);
  Stmt(db_, "INSERT OR REPLACE INTO measurements VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
      .bind_key(key)
      .bind(4, m.variant)
      .bind(5, status_name(m.status))
      .bind(6, m.median_ns)
      .bind(7, m.compile_ms)
      .bind(8, m.detail)
      .bind(9, static_cast<int64_t>(getpid()))
      .bind(10, host_name())
      .bind(11, now_s())
      .step();
}

bool TuningDb::claimed_by_another(const TuningKey& key) {
  Stmt q(db_, "SELECT pid, host, started FROM claims WHERE device = ? AND kernel = ? AND bucket = ?");
  q.bind_key(key);
  if (!q.step()) return false;
  const int64_t pid = q.i64(0);
  const std::string host = q.text(1);
  const bool mine = pid == getpid() && host == host_name();
  const bool stale = host != host_name() && now_s() - q.i64(2) > kForeignRowLifetimeS;
  return !mine && !stale && process_alive(pid, host);
}

bool TuningDb::tuned_elsewhere_now(const TuningKey& key) {
  if (read_only_) return false;
  std::lock_guard lock(mutex_);
  return claimed_by_another(key);
}

bool TuningDb::claim(const TuningKey& key) {
  if (read_only_) return true;  // nothing it measures is kept: no one else is told
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  if (claimed_by_another(key)) return false;
  Stmt(db_, "INSERT OR REPLACE INTO claims VALUES(?, ?, ?, ?, ?, ?)")
      .bind_key(key).bind(4, static_cast<int64_t>(getpid())).bind(5, host_name()).bind(6, now_s()).step();
  t.commit();
  return true;
}

void TuningDb::release(const TuningKey& key) {
  if (read_only_) return;
  std::lock_guard lock(mutex_);
  Stmt(db_, "DELETE FROM claims WHERE device = ? AND kernel = ? AND bucket = ? AND pid = ?")
      .bind_key(key).bind(4, static_cast<int64_t>(getpid())).step();
}

std::vector<KeySummary> TuningDb::keys(std::string_view device) {
  std::lock_guard lock(mutex_);
  std::vector<KeySummary> out;
  Stmt q(db_, R"(
SELECT k.device, k.kernel, k.bucket, coalesce(d.name, ''), k.description,
  (SELECT count(*) FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket AND m.status = 'ok'),
  (SELECT count(*) FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket AND m.status = 'failed'),
  (SELECT count(*) FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket AND m.status = 'wrong'),
  coalesce((SELECT m.median_ns FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket AND m.variant = 'default' AND m.status = 'ok'), 0),
  coalesce((SELECT m.variant FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket AND m.status = 'ok' ORDER BY m.median_ns LIMIT 1), ''),
  coalesce((SELECT min(m.median_ns) FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket AND m.status = 'ok'), 0),
  (SELECT count(*) FROM measurements m WHERE m.device = k.device AND m.kernel = k.kernel AND m.bucket = k.bucket)
FROM kernels k LEFT JOIN devices d ON d.device = k.device
WHERE ?1 = '' OR k.device = ?1
ORDER BY k.updated DESC, k.kernel)");
  q.bind(1, device);
  while (q.step()) {
    KeySummary s;
    s.key = {q.text(0), q.text(1), q.text(2)};
    s.device_name = q.text(3);
    s.description = q.text(4);
    s.measured = static_cast<int>(q.i64(5));
    s.failed = static_cast<int>(q.i64(6));
    s.wrong = static_cast<int>(q.i64(7));
    s.default_ns = q.f64(8);
    s.best = q.text(9);
    s.best_ns = q.f64(10);
    s.rows = static_cast<int>(q.i64(11));
    out.push_back(std::move(s));
  }
  return out;
}

int64_t TuningDb::clear(std::string_view device) {
  if (read_only_) throw Error(problem_);
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  int64_t removed = 0;
  for (const char* table : {"measurements", "kernels", "claims", "devices"}) {
    Stmt(db_, fmt::format("DELETE FROM {} WHERE ?1 = '' OR device = ?1", table)).bind(1, device).step();
    removed += sqlite3_changes(db_);
  }
  t.commit();
  return removed;
}

void TuningDb::export_to(const fs::path& file, std::string_view device,
                         const std::vector<std::pair<std::string, std::string>>& artifacts) {
  std::lock_guard lock(mutex_);
  std::error_code ec;
  fs::remove(file, ec);
  Stmt(db_, "ATTACH DATABASE ? AS x").bind(1, file.string()).step();
  try {
    exec((schema_sql("x.") + "CREATE TABLE x.artifacts(name TEXT PRIMARY KEY, bytes BLOB NOT NULL);").c_str());
    Transaction t(db_);
    Stmt(db_, fmt::format("INSERT INTO x.meta VALUES('schema', '{}'), ('kind', 'kiln autotune export')", kSchemaVersion)).step();
    for (const char* table : {"devices", "kernels", "measurements"})
      Stmt(db_, fmt::format("INSERT INTO x.{0} SELECT * FROM main.{0} WHERE device = ?", table)).bind(1, device).step();
    for (const auto& [name, bytes] : artifacts)
      Stmt(db_, "INSERT OR REPLACE INTO x.artifacts VALUES(?, ?)").bind(1, name).bind_blob(2, bytes).step();
    t.commit();
  } catch (...) {
    sqlite3_exec(db_, "DETACH DATABASE x", nullptr, nullptr, nullptr);
    throw;
  }
  exec("DETACH DATABASE x");
}

std::vector<std::pair<std::string, std::string>> TuningDb::import_from(const fs::path& file) {
  if (read_only_) throw Error(problem_);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw Error(fmt::format("{}: no such file", file.string()));
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, std::string>> artifacts;
  Stmt(db_, "ATTACH DATABASE ? AS x").bind(1, file.string()).step();
  try {
    std::string kind, version;
    try {
      Stmt q(db_, "SELECT (SELECT value FROM x.meta WHERE key = 'kind'), (SELECT value FROM x.meta WHERE key = 'schema')");
      if (q.step()) {
        kind = q.text(0);
        version = q.text(1);
      }
    } catch (const Error&) {
    }
    if (kind != "kiln autotune export")
      throw Error(fmt::format("{}: not a file `kiln cache export` wrote", file.string()));
    if (version != std::to_string(kSchemaVersion))
      throw Error(fmt::format("{}: autotune schema version {}, this kiln reads {}", file.string(), version, kSchemaVersion));
    Transaction t(db_);
    exec("INSERT OR IGNORE INTO main.devices SELECT * FROM x.devices");
    exec("INSERT INTO main.kernels SELECT * FROM x.kernels WHERE true ON CONFLICT(device, kernel, bucket) DO NOTHING");
    exec("INSERT INTO main.measurements SELECT * FROM x.measurements WHERE status != 'running' "
         "ON CONFLICT(device, kernel, bucket, variant) DO UPDATE SET status = excluded.status, median_ns = excluded.median_ns, "
         "compile_ms = excluded.compile_ms, detail = excluded.detail, pid = excluded.pid, host = excluded.host, "
         "updated = excluded.updated WHERE excluded.updated > measurements.updated");
    t.commit();
    Stmt q(db_, "SELECT name, bytes FROM x.artifacts ORDER BY name");
    while (q.step()) artifacts.emplace_back(q.text(0), q.blob(1));
  } catch (...) {
    sqlite3_exec(db_, "DETACH DATABASE x", nullptr, nullptr, nullptr);
    throw;
  }
  exec("DETACH DATABASE x");
  return artifacts;
}

}  // namespace kiln::autotune
