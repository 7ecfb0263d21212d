// internal/kiln/codegen/dim_rewrite.h - a kernel's instructions rebuilt over another domain
// (kir::merge_rows, kir::coalesce_dims).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/codegen/kernel_ir.h"

namespace kiln::kir {

/// Appends the index arithmetic (i64) that stands for an old dim in the kernel being rebuilt.
class IndexAppender {
 public:
  explicit IndexAppender(Kernel& out) : out_(out) {}
  Ref dim(int d) { return append(Code::Dim, {}, d); }  // dim `d` of the new domain
  Ref constant(int64_t v);
  Ref floordiv(Ref p, int64_t by) { return append(Code::IndexDiv, {p}, by); }
  Ref mod(Ref p, int64_t by) { return append(Code::IndexMod, {p}, by); }

 private:
  Ref append(Code code, std::vector<Ref> args, int64_t imm);
  Kernel& out_;
};

/// `k` over `domain` (`reduced` per dim): every instruction but `dim` copied with its
/// arguments renumbered, each `dim d` of `k` replaced by what `index(d, append)` returns,
/// and the stores renumbered. `renumbered`, when given, maps `k`'s refs to the result's.
Kernel rewrite_dims(const Kernel& k, Shape domain, std::vector<bool> reduced,
                    const std::function<Ref(int d, IndexAppender& append)>& index,
                    std::vector<Ref>* renumbered = nullptr);

/// The positions a rewrite of the domain must keep affine: load and store offsets, and both
/// sides of every compare of positions (a mask: a pad's border, a slice's end).
std::vector<Ref> positions(const Kernel& k);

}  // namespace kiln::kir
