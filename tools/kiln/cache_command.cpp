// tools/kiln/cache_command.cpp - `kiln cache`: what the autotune database and the compiled
// kernel caches hold, and moving them between machines of the same kind.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "json_out.h"
#include "kiln/autotune/autotuner.h"
#include "kiln/backends/backend.h"
#include "kiln/engine/engine.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/support/error.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct CacheOptions {
  std::string device;  // "" : every device
  std::string key;
  std::string file;
  bool tuning_only = false;  // import: the tuning rows, not the bundle's compiled kernels
  bool json = false;         // list: one JSON object
};

Backend& backend_of(const std::string& name) {
  Backend* b = engine_for(Device::parse(name)).backend();
  if (b == nullptr) throw Error(fmt::format("device {} compiles nothing: it has no cache", name));
  return *b;
}

// The cache folders of every kind of device that compiles (the registry's rows).
std::vector<std::string> cache_namespaces() {
  std::vector<std::string> out;
  for (const DeviceKindInfo& k : device_kinds())
    if (!k.cache_namespace.empty()) out.emplace_back(k.cache_namespace);
  return out;
}

// The cache folder of `device`.
std::string cache_namespace_of(const std::string& device) {
  return std::string(device_kind(Device::parse(device)).cache_namespace);
}

// The database's id of `device` ("" for none given).
std::string device_id(const std::string& device) {
  if (device.empty()) return {};
  return autotune::Autotuner::device_id(backend_of(device));
}

autotune::TuningDb& db() { return autotune::Autotuner::instance().db(); }

// What runs for a key: the tuner's choice, the fastest only where it beats the default by
// more than the noise, as Autotuner::choose decides.
bool fastest_runs(const autotune::KeySummary& k) {
  return !k.best.empty() && k.best != "default" && k.default_ns > 0 && autotune::beats_default(k.best_ns, k.default_ns);
}

int list_json(const std::vector<autotune::KeySummary>& keys) {
  std::string items;
  for (const autotune::KeySummary& k : keys) {
    const bool wins = fastest_runs(k);
    items += fmt::format(
        R"({}{{"key": {}, "device": {}, "kernel": {}, "rows": {}, "default_ns": {}, "runs": {}, "runs_ns": {}, "fastest": {}, "fastest_ns": {}}})",
        items.empty() ? "" : ", ", json_string(fmt::format("{}/{}/{}", k.key.device, k.key.kernel, k.key.bucket)),
        json_string(k.device_name), json_string(k.description), k.rows,
        json_number(k.default_ns > 0 ? k.default_ns : NAN), json_string(wins ? k.best : "default"),
        json_number(wins ? k.best_ns : k.default_ns > 0 ? k.default_ns : NAN),
        k.best.empty() ? "null" : json_string(k.best), json_number(k.best_ns > 0 ? k.best_ns : NAN));
  }
  std::cout << fmt::format(R"({{"kernels": [{}]}})", items) << "\n";
  return 0;
}

int list(const CacheOptions& o) {
  const std::vector<autotune::KeySummary> keys = db().keys(device_id(o.device));
  if (o.json) return list_json(keys);
  std::cout << fmt::format("{:<60} {:<28} {:<30} {:>5} {:>10} {:>10}  {}\n", "key", "device", "kernel", "rows",
                           "default", "runs", "variant that runs");
  for (const autotune::KeySummary& k : keys) {
    std::string desc = k.description.size() > 30 ? k.description.substr(0, 27) + "..." : k.description;
    std::string dev = k.device_name.size() > 28 ? k.device_name.substr(0, 25) + "..." : k.device_name;
    const std::string key = fmt::format("{}/{}/{}", k.key.device, k.key.kernel.substr(0, 12), k.key.bucket);
    const bool wins = fastest_runs(k);
    std::string runs = k.default_ns > 0 ? "default" : "-";
    if (wins) runs = k.best;
    else if (!k.best.empty() && k.best != "default" && k.default_ns > 0)
      runs += fmt::format(" ({} is {:.1f}% faster, within the noise)", k.best, 100 * (1 - k.best_ns / k.default_ns));
    std::cout << fmt::format("{:<60} {:<28} {:<30} {:>5} {:>10} {:>10}  {}\n", key, dev, desc,
                             k.rows, time_text(k.default_ns),
                             time_text(wins ? k.best_ns : k.default_ns), runs);
  }
  std::cout << fmt::format("{} tuned kernels\n", keys.size());
  return 0;
}

int show(const CacheOptions& o) {
  // A key as `list` prints it: the kernel hash may be shortened to a prefix.
  std::vector<autotune::KeySummary> matches;
  for (const autotune::KeySummary& k : db().keys(device_id(o.device))) {
    const std::optional<autotune::TuningKey> want = autotune::TuningKey::parse(o.key);
    if (want && want->device == k.key.device && want->bucket == k.key.bucket && k.key.kernel.rfind(want->kernel, 0) == 0)
      matches.push_back(k);
  }
  if (matches.empty()) throw Error(fmt::format("no tuned kernel has the key {} (see kiln cache list)", o.key));
  if (matches.size() > 1) throw Error(fmt::format("{} names {} tuned kernels: give more of the kernel hash", o.key, matches.size()));
  const autotune::KeySummary& k = matches[0];
  std::cout << fmt::format("key     {}\ndevice  {}\nkernel  {}\nbucket  {}\n\n", k.key.str(), k.device_name, k.description,
                           k.key.bucket);
  std::cout << fmt::format("{:<40} {:<8} {:>10} {:>10}  {}\n", "variant", "status", "median", "compile", "detail");
  for (const autotune::Measurement& m : db().measurements(k.key))
    std::cout << fmt::format("{:<40} {:<8} {:>10} {:>10}  {}\n", m.variant, autotune::status_name(m.status),
                             time_text(m.median_ns), fmt::format("{:.1f} ms", m.compile_ms), m.detail);
  return 0;
}

int stats(const CacheOptions& o) {
  autotune::TuningDb& d = db();
  const std::vector<autotune::KeySummary> keys = d.keys(device_id(o.device));
  std::map<std::string, int> per_device;
  int rows = 0, failed = 0, wrong = 0, improved = 0;
  for (const autotune::KeySummary& k : keys) {
    per_device[k.device_name]++;
    rows += k.rows;
    failed += k.failed;
    wrong += k.wrong;
    improved += fastest_runs(k);
  }
  std::error_code ec;
  std::cout << fmt::format("autotune database  {}{}\n", d.path().empty() ? std::string("in memory") : d.path().string(),
                           d.path().empty() ? std::string() : fmt::format(" ({} bytes{})", fs::file_size(d.path(), ec), d.persistent() ? "" : ", read-only"));
  std::cout << fmt::format("tuned kernels      {} ({} faster than their default), {} variants measured, {} failed, {} wrong\n",
                           keys.size(), improved, rows, failed, wrong);
  for (const auto& [name, n] : per_device) std::cout << fmt::format("  {:<40} {} kernels\n", name, n);
  const fs::path root = DiskCache::default_root();
  std::cout << fmt::format("kernel caches      {}\n", root.empty() ? std::string("off") : root.string());
  for (const std::string& ns : cache_namespaces()) {
    int64_t files = 0, bytes = 0;
    if (!root.empty() && fs::is_directory(root / ns, ec))
      for (const auto& e : fs::directory_iterator(root / ns, ec))
        if (e.is_regular_file(ec)) {
          ++files;
          bytes += static_cast<int64_t>(e.file_size(ec));
        }
    std::cout << fmt::format("  {:<8} {} entries, {:.1f} MiB\n", ns, files, static_cast<double>(bytes) / (1 << 20));
  }
  return 0;
}

int export_cache(const CacheOptions& o) {
  if (o.device.empty()) throw Error("kiln cache export: --device is required (an export is for one device fingerprint)");
  Backend& b = backend_of(o.device);
  const std::string ns = cache_namespace_of(o.device);
  DiskCache kernels(DiskCache::default_root(), ns);
  std::vector<std::pair<std::string, std::string>> artifacts;
  for (auto& [name, bytes] : kernels.entries_containing(b.fingerprint()))
    artifacts.emplace_back(fmt::format("{}/{}", ns, name), std::move(bytes));
  const std::string id = device_id(o.device);
  db().export_to(o.file, id, artifacts);
  std::cout << fmt::format("exported {} tuned kernels and {} compiled kernels of {} ({}) to {}\n", db().keys(id).size(),
                           artifacts.size(), o.device, b.device_name(), o.file);
  return 0;
}

int import_cache(const CacheOptions& o) {
  const std::vector<std::pair<std::string, std::string>> artifacts = db().import_from(o.file);
  if (o.tuning_only) {
    // Tunings only choose among variants this machine compiles itself: no code from the bundle.
    std::cout << fmt::format("imported {}: tuning rows merged, {} compiled kernels left out (--tuning-only)\n", o.file,
                             artifacts.size());
    return 0;
  }
  int stored = 0, rejected = 0;
  std::map<std::string, std::unique_ptr<DiskCache>> caches;
  for (const auto& [name, bytes] : artifacts) {
    const size_t slash = name.find('/');
    const std::string ns = slash == std::string::npos ? std::string() : name.substr(0, slash);
    const std::vector<std::string> known = cache_namespaces();
    if (std::find(known.begin(), known.end(), ns) == known.end()) {
      ++rejected;
      continue;
    }
    auto& cache = caches[ns];
    if (!cache) cache = std::make_unique<DiskCache>(DiskCache::default_root(), ns);
    (cache->store_entry_file(name.substr(slash + 1), bytes) ? stored : rejected)++;
  }
  std::cout << fmt::format("imported {}: tuning rows merged, {} compiled kernels stored{}\n", o.file, stored,
                           rejected ? fmt::format(", {} invalid entries skipped", rejected) : std::string());
  return 0;
}

int clear(const CacheOptions& o) {
  const int64_t rows = db().clear(device_id(o.device));
  int64_t files = 0;
  const fs::path root = DiskCache::default_root();
  std::error_code ec;
  if (!root.empty()) {
    if (o.device.empty()) {
      for (const std::string& ns : cache_namespaces()) files += static_cast<int64_t>(fs::remove_all(root / ns, ec));
    } else {
      Backend& b = backend_of(o.device);
      DiskCache kernels(root, cache_namespace_of(o.device));
      for (const auto& [name, bytes] : kernels.entries_containing(b.fingerprint())) {
        kernels.remove(name);
        ++files;
      }
    }
  }
  std::cout << fmt::format("removed {} tuning rows and {} compiled kernel files{}\n", rows, files,
                           o.device.empty() ? std::string() : " of " + o.device);
  return 0;
}

}  // namespace

Command add_cache_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("cache", "Inspect, ship or clear the autotune database and compiled kernels.");
  sub->require_subcommand(1);
  auto opts = std::make_shared<CacheOptions>();
  auto device_option = [&](CLI::App* c) { c->add_option("--device", opts->device, "Only this device (see kiln devices)"); };
  CLI::App* l = sub->add_subcommand("list", "Every tuned kernel: its key, device, the default's time and what runs.");
  device_option(l);
  l->add_flag("--json", opts->json, "Print one JSON object instead of the table (docs/cli.md, \"JSON output\")");
  CLI::App* s = sub->add_subcommand("show", "Every variant measured for one key.");
  s->add_option("key", opts->key, "A key as kiln cache list prints it")->required();
  device_option(s);
  CLI::App* st = sub->add_subcommand("stats", "Sizes and counts of the database and the kernel caches.");
  device_option(st);
  CLI::App* e = sub->add_subcommand("export", "Write one device's tuning and compiled kernels to a file.");
  e->add_option("file", opts->file, "The file to write")->required();
  e->add_option("--device", opts->device, "The device whose caches to write (see kiln devices)")->required();
  CLI::App* i = sub->add_subcommand("import", "Merge a file kiln cache export wrote into this machine's caches.");
  i->add_option("file", opts->file, "The file to read")->required();
  i->add_flag("--tuning-only", opts->tuning_only,
              "Merge the tuning rows alone, not the compiled kernels (which are code from the bundle's author)");
  CLI::App* c = sub->add_subcommand("clear", "Remove tuning rows and compiled kernels (of one device with --device).");
  device_option(c);
  return {sub, [=]() {
            if (l->parsed()) return list(*opts);
            if (s->parsed()) return show(*opts);
            if (st->parsed()) return stats(*opts);
            if (e->parsed()) return export_cache(*opts);
            if (i->parsed()) return import_cache(*opts);
            if (c->parsed()) return clear(*opts);
            return 1;
          }};
}

}  // namespace kiln::cli
