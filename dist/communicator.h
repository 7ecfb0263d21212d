// dist/communicator.h - what kiln::dist's files share about MPI: the world, the element
// types, and waiting for a request with a deadline.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "kiln/dist/dist.h"
#include "kiln/ir/dtype.h"

namespace kiln::dist::detail {

/// Throws kiln::Error naming `what` unless init() was called and finalize() was not.
void require_initialized(std::string_view what);

/// The MPI type of `dtype`'s elements as MPI reduces them (f16 and bf16 have none: nullptr
/// check with has_mpi_type).
MPI_Datatype mpi_type(DType dtype);
bool has_mpi_type(DType dtype);
/// The MPI operation for `op` on `dtype` (bool: or for Sum and Max, and for Min).
MPI_Op mpi_op(ReduceOp op, DType dtype);

/// Throws kiln::Error naming `what` and MPI's message unless `rc` is MPI_SUCCESS (MPI's
/// errors return codes: init() sets MPI_ERRORS_RETURN on the world).
void check(int rc, std::string_view what);

/// Waits for every request; past the timeout, prints what waited (`what`, `bytes`) and ends
/// every rank with MPI_Abort (a collective cannot be cancelled).
void wait_all(std::span<MPI_Request> requests, std::string_view what, size_t bytes);

/// Every rank's `t` has `t`'s shape and dtype; otherwise every rank throws kiln::Error
/// listing each rank's (a collective of 16 bytes, and of 128 per rank on a mismatch).
void require_same_type(const Tensor& t, std::string_view what);

/// Combines `n` elements of `x` into `acc` with `op` (Mean as Sum), in `dtype`'s arithmetic:
/// the fixed-order reductions' step.
void combine(std::byte* acc, const std::byte* x, int64_t n, DType dtype, ReduceOp op);
/// Divides `n` float elements in place by `divisor` (Mean's last step).
void divide(std::byte* data, int64_t n, DType dtype, int divisor);

}  // namespace kiln::dist::detail
