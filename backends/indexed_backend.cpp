// backends/indexed_backend.cpp - one process-lifetime backend per numbered device.
#include "kiln/backends/indexed_backend.h"

#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "kiln/support/error.h"

namespace kiln {

Backend& indexed_backend(std::string_view kind, int index, int count, const std::function<std::string(int)>& name,
                         std::string_view none_hint, const std::function<Backend*(int)>& make) {
  if (index < 0 || index >= count) {
    std::string list;
    for (int i = 0; i < count; ++i) list += fmt::format("{}{}:{} ({})", i ? ", " : "", kind, i, name(i));
    throw Error(fmt::format("device {}:{} does not exist ({})", kind, index, count == 0 ? std::string(none_hint) : "available: " + list));
  }
  static std::mutex mutex;
  static std::map<std::string, std::vector<Backend*>, std::less<>> made;  // never freed: see the header
  std::lock_guard lock(mutex);
  auto it = made.find(kind);
  if (it == made.end()) it = made.emplace(std::string(kind), std::vector<Backend*>(static_cast<size_t>(count), nullptr)).first;
  Backend*& b = it->second[static_cast<size_t>(index)];
  if (!b) b = make(index);
  return *b;
}

}  // namespace kiln
