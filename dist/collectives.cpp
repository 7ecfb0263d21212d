// dist/collectives.cpp - all_reduce, broadcast, all_gather and reduce_scatter of tensors.
//
// Each evaluates its operand, exchanges its values in host memory with a nonblocking MPI
// collective waited for with the deadline (communicator.cpp), and hands the result to the
// operand's device: a `cpu` tensor's bytes are read in place and the result's taken over
// without a copy; other devices' are downloaded and uploaded.
#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <vector>

#include "communicator.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/support/error.h"

namespace kiln::dist {
namespace {

using detail::wait_all;

// The operand's bytes in host memory, for MPI to read: a `cpu` (or `interp`) tensor's own,
// in place, or a download of another device's. In a type MPI can reduce when `reducing` (f16
// and bf16 are reduced in f32, as mixed precision's gradients are).
struct HostBytes {
  std::shared_ptr<const Buffer> buffer;  // keeps the bytes read in place alive
  HostTensor copy;                       // or holds the download
  const std::byte* data = nullptr;
  TensorType type;
  size_t bytes() const { return static_cast<size_t>(type.bytes()); }
  void* mpi_data() const {
    return const_cast<std::byte*>(data);
  }  // MPI's send buffers are const only from MPI 3 on
};

HostBytes read_host(const Tensor& t, bool reducing) {
  const Tensor x =
      reducing && !detail::has_mpi_type(t.dtype()) ? t.detach().to(DType::F32) : t.detach();
  HostBytes h;
  h.type = TensorType{x.dtype(), x.shape()};
  h.buffer = x.buffer();
  if ((h.data = h.buffer->host_data()) == nullptr) {
    h.copy = x.host();
    h.data = h.copy.data();
    h.buffer.reset();
  }
  return h;
}

// `h` on `like`'s device (host-memory devices take the bytes without a copy), in its dtype.
Tensor unstage(HostTensor h, const Tensor& like) {
  Tensor r = from_host(std::move(h), like.device());
  if (r.dtype() != like.dtype()) r = r.to(like.dtype());
  return r.eval();
}

void require_operand(const Tensor& t, const char* what) {
  detail::require_initialized(what);
  if (!t.defined()) throw Error(fmt::format("kiln::dist::{}: the tensor is undefined", what));
}

// MPI counts are ints.
int count_of(int64_t n, const char* what) {
  if (n > INT_MAX)
    throw Error(fmt::format(
        "kiln::dist::{}: {} elements in one collective, past MPI's count limit of {}: split it",
        what, n, INT_MAX));
  return static_cast<int>(n);
}

void require_reducible(const Tensor& t, ReduceOptions o, const char* what) {
  if (o.op == ReduceOp::Mean && !is_float(t.dtype()))
    throw Error(fmt::format("kiln::dist::{}: a mean of {} values (floats only)", what,
                            dtype_name(t.dtype())));
}

// Every rank's `h` into `out` (size() times h.bytes()), in rank order.
void gather_into(const HostBytes& h, std::byte* out, const char* what) {
  const int bytes = count_of(static_cast<int64_t>(h.bytes()), what);
  MPI_Request request;
  detail::check(
      MPI_Iallgather(h.mpi_data(), bytes, MPI_BYTE, out, bytes, MPI_BYTE, MPI_COMM_WORLD, &request),
      what);
  wait_all({&request, 1}, what, h.bytes() * static_cast<size_t>(size()));
}

// The `n` elements from element `first` on of every rank's `in`, reduced with `o` into `out`:
// in rank order when o.fixed_order (every rank's values gathered, then combined), else by
// the MPI collective that `start` begins. Mean divides last.
template <class Start>
void reduce_part(const HostBytes& in, std::byte* out, int64_t first, int64_t n, ReduceOptions o,
                 const char* what, Start start) {
  const DType dt = in.type.dtype;
  if (o.fixed_order) {
    std::vector<std::byte> all(in.bytes() * static_cast<size_t>(size()));
    gather_into(in, all.data(), what);
    const size_t first_byte = static_cast<size_t>(first) * dtype_size(dt);
    std::memcpy(out, all.data() + first_byte, static_cast<size_t>(n) * dtype_size(dt));
    for (int r = 1; r < size(); ++r)
      detail::combine(out, all.data() + static_cast<size_t>(r) * in.bytes() + first_byte, n, dt,
                      o.op);
  } else {
    MPI_Request request;
    detail::check(start(&request), what);
    wait_all({&request, 1}, what, in.bytes());
  }
  if (o.op == ReduceOp::Mean) detail::divide(out, n, dt, size());
}

}  // namespace

Tensor all_reduce(const Tensor& t, ReduceOptions o) {
  require_operand(t, "all_reduce");
  require_reducible(t, o, "all_reduce");
  detail::require_same_type(t, "all_reduce");
  const HostBytes in = read_host(t, true);
  const DType dt = in.type.dtype;
  const int n = count_of(in.type.shape.numel(), "all_reduce");
  HostTensor out = HostTensor::uninitialized(in.type);
  reduce_part(in, out.data(), 0, n, o, "all_reduce", [&](MPI_Request* request) {
    return MPI_Iallreduce(in.mpi_data(), out.data(), n, detail::mpi_type(dt),
                          detail::mpi_op(o.op, dt), MPI_COMM_WORLD, request);
  });
  return unstage(std::move(out), t);
}

Tensor broadcast(const Tensor& t, int root) {
  require_operand(t, "broadcast");
  if (root < 0 || root >= size())
    throw Error(
        fmt::format("kiln::dist::broadcast: root {} is not a rank (0 .. {})", root, size() - 1));
  detail::require_same_type(t, "broadcast");
  const int bytes = count_of(t.numel() * static_cast<int64_t>(dtype_size(t.dtype())), "broadcast");
  MPI_Request request;
  if (rank() == root) {  // sends its own bytes, which MPI does not write on the root
    const HostBytes in = read_host(t, false);
    detail::check(MPI_Ibcast(in.mpi_data(), bytes, MPI_BYTE, root, MPI_COMM_WORLD, &request),
                  "broadcast");
    wait_all({&request, 1}, "broadcast", in.bytes());
    return t.detach().eval();
  }
  HostTensor out = HostTensor::uninitialized(TensorType{t.dtype(), t.shape()});
  detail::check(MPI_Ibcast(out.data(), bytes, MPI_BYTE, root, MPI_COMM_WORLD, &request),
                "broadcast");
  wait_all({&request, 1}, "broadcast", out.nbytes());
  return unstage(std::move(out), t);
}

Tensor all_gather(const Tensor& t) {
  require_operand(t, "all_gather");
  detail::require_same_type(t, "all_gather");
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  if (dims.empty()) dims.push_back(1);
  dims[0] *= size();
  const HostBytes in = read_host(t, false);
  HostTensor out = HostTensor::uninitialized(TensorType{t.dtype(), Shape(dims)});
  gather_into(in, out.data(), "all_gather");
  return unstage(std::move(out), t);
}

Tensor reduce_scatter(const Tensor& t, ReduceOptions o) {
  require_operand(t, "reduce_scatter");
  require_reducible(t, o, "reduce_scatter");
  const int ranks = size();
  if (t.rank() == 0 || t.size(0) % ranks != 0)
    throw Error(
        fmt::format("kiln::dist::reduce_scatter: dim 0 of {} does not split into {} equal parts",
                    TensorType{t.dtype(), t.shape()}.str(), ranks));
  detail::require_same_type(t, "reduce_scatter");
  const HostBytes in = read_host(t, true);
  const DType dt = in.type.dtype;
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  dims[0] /= ranks;
  HostTensor out = HostTensor::uninitialized(TensorType{dt, Shape(dims)});
  const int part = count_of(out.numel(), "reduce_scatter");
  reduce_part(
      in, out.data(), rank() * out.numel(), part, o, "reduce_scatter", [&](MPI_Request* request) {
        return MPI_Ireduce_scatter_block(in.mpi_data(), out.data(), part, detail::mpi_type(dt),
                                         detail::mpi_op(o.op, dt), MPI_COMM_WORLD, request);
      });
  return unstage(std::move(out), t);
}

}  // namespace kiln::dist
