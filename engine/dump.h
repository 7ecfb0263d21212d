// engine/dump.h - KILN_DUMP: every stage of every compiled stream, written to files.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {

/// KILN_DUMP=graph,fused,kernel,llvm (or all) and KILN_DUMP_DIR (default kiln-dump/), read
/// once per process; a stage kiln does not know is an error (kiln::Error at the first
/// compile), and the first file written says on stderr where the dump goes.
class Dumper {
 public:
  static const Dumper& get();
  bool wants(std::string_view stage) const;
  /// Whether KILN_DUMP names `stage` itself (not only through `all`).
  bool names(std::string_view stage) const;
  bool any() const { return !stages_.empty(); }
  /// Writes `text` to KILN_DUMP_DIR/`file`; warns once when the directory is not writable.
  void write(const std::string& file, const std::string& text) const;

 private:
  std::vector<std::string> stages_;
  std::filesystem::path dir_;
};

}  // namespace kiln::engine
