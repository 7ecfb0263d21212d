// kiln/support/spelling.h - "did you mean" for a misspelled name.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

/// The candidate closest to `name` by edit distance (insertions, deletions, substitutions
/// and swaps of neighbours), when it is close enough to be a misspelling: at most one edit
/// for names of up to four characters, else a third of the name's length. nullopt otherwise.
std::optional<std::string> closest_name(std::string_view name, std::span<const std::string_view> candidates);

/// " (did you mean 'x'?)" for closest_name's answer, else "".
std::string did_you_mean(std::string_view name, std::span<const std::string_view> candidates);

}  // namespace kiln
