// dist/communicator.cpp - MPI's lifetime, the world's rank and size, and waiting with a
// deadline.
#include "communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/support/env.h"
#include "kiln/support/error.h"
#include "kiln/support/hash.h"

namespace kiln::dist {
namespace {

enum class State { Before, Running, Finalized };
std::atomic<State> g_state{State::Before};
std::atomic<double> g_timeout_s{300};

std::string human_bytes(size_t bytes) {
  if (bytes >= (size_t{1} << 20))
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{} bytes", bytes);
}

}  // namespace

void init(int* argc, char*** argv, InitOptions options) {
  if (g_state.load() != State::Before)
    throw Error(g_state.load() == State::Running
                    ? "kiln::dist::init: already initialized"
                    : "kiln::dist::init: MPI was finalized and cannot start again");
  // Serialized: kiln's worker threads never call MPI; a program that calls kiln::dist from
  // several threads must make them take turns.
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    throw Error("kiln::dist::init: MPI_Init_thread failed");
  // Errors in MPI calls come back as codes, which this module turns into kiln::Error,
  // rather than ending the process without a word.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_timeout_s = options.timeout_s;
  if (const std::optional<int64_t> env = env_int("KILN_DIST_TIMEOUT", 0, 1000000))
    g_timeout_s = static_cast<double>(*env);
  g_state = State::Running;
}

void finalize() {
  if (g_state.load() != State::Running) return;
  barrier();
  MPI_Finalize();
  g_state = State::Finalized;
}

bool initialized() {
  return g_state.load() == State::Running;
}

int rank() {
  detail::require_initialized("rank");
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  detail::require_initialized("size");
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void set_timeout(double seconds) {
  g_timeout_s = seconds;
}

void barrier() {
  detail::require_initialized("barrier");
  MPI_Request request;
  detail::check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "barrier");
  detail::wait_all({&request, 1}, "barrier", 0);
}

namespace detail {

void require_initialized(std::string_view what) {
  if (g_state.load() != State::Running)
    throw Error(fmt::format(
        "kiln::dist::{}: {}", what,
        g_state.load() == State::Before ? "call kiln::dist::init first" : "MPI was finalized"));
}

bool has_mpi_type(DType dtype) {
  return dtype != DType::F16 && dtype != DType::BF16;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return MPI_C_BOOL;
    case DType::I8:
      return MPI_INT8_T;
    case DType::I16:
      return MPI_INT16_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::U8:
      return MPI_UINT8_T;
    case DType::U16:
      return MPI_UINT16_T;
    case DType::U32:
      return MPI_UINT32_T;
    case DType::U64:
      return MPI_UINT64_T;
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::F16:
    case DType::BF16:
      break;
  }
  throw Error(fmt::format("kiln::dist: {} has no MPI type (reduced in f32)", dtype_name(dtype)));
}

MPI_Op mpi_op(ReduceOp op, DType dtype) {
  if (dtype == DType::Bool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

void check(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, message, &length);
  throw Error(fmt::format("kiln::dist::{}: MPI: {}", what,
                          std::string_view(message, static_cast<size_t>(length))));
}

void wait_all(std::span<MPI_Request> requests, std::string_view what, size_t bytes) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const double timeout = g_timeout_s.load();
  for (;;) {
    int done = 0;
    check(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        what);
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeout > 0 && waited > timeout) {
      int r = 0, n = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &r);
      MPI_Comm_size(MPI_COMM_WORLD, &n);
      std::fprintf(stderr,
                   "kiln::dist: rank %d of %d: %.*s (%s) waited %.1f s for the other ranks, past "
                   "the timeout of %g s "
                   "(KILN_DIST_TIMEOUT): a rank has stopped, hung or called another collective. "
                   "Ending every rank.\n",
                   r, n, static_cast<int>(what.size()), what.data(), human_bytes(bytes).c_str(),
                   waited, timeout);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 70);
      std::_Exit(70);  // MPI_Abort does not return; this is for an MPI that would
    }
    // MPI moves a large message in fragments, each needing both ranks inside an MPI call:
    // poll without pause while the exchange runs (a sleep of 50 us between polls made 4 MiB
    // take 7x MPI_Allreduce's time). A rank still waiting after a second waits for another
    // rank's compute, not for the transfer: from then on it polls each millisecond.
    if (waited > 1.0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void require_same_type(const Tensor& t, std::string_view what) {
  // A hash of dtype and shape, and its negation: one MIN all-reduce gives the smallest and
  // (negated) the largest, which differ exactly when some rank's differs.
  const std::string mine = TensorType{t.dtype(), t.shape()}.str();
  // kiln's own mixing, not std::hash: the same on every rank, whichever library built it.
  uint64_t mixed = hash_mix(static_cast<uint64_t>(t.dtype()), static_cast<uint64_t>(t.rank()));
  for (int64_t d : t.shape().dims()) mixed = hash_mix(mixed, static_cast<uint64_t>(d));
  const int64_t h = static_cast<int64_t>(mixed >> 1);
  int64_t send[2] = {h, -h}, recv[2] = {0, 0};
  MPI_Request request;
  check(MPI_Iallreduce(send, recv, 2, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD, &request), what);
  // Named by the collective it checks for: a rank that never arrives is seen here first.
  wait_all({&request, 1}, fmt::format("{} of {}", what, mine),
           static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  if (recv[0] == -recv[1]) return;
  constexpr int kText = 128;
  const int n = size();
  std::vector<char> texts(static_cast<size_t>(kText) * static_cast<size_t>(n), '\0'),
      own(kText, '\0');
  std::memcpy(own.data(), mine.data(), std::min<size_t>(mine.size(), kText - 1));
  check(MPI_Iallgather(own.data(), kText, MPI_CHAR, texts.data(), kText, MPI_CHAR, MPI_COMM_WORLD,
                       &request),
        what);
  wait_all({&request, 1}, what, texts.size());
  std::string list;
  for (int r = 0; r < n; ++r)
    list += fmt::format("{}rank {}: {}", r ? ", " : "", r, texts.data() + r * kText);
  throw Error(fmt::format("kiln::dist::{}: the ranks' tensors differ ({})", what, list));
}

namespace {
template <class T>
void combine_as(T* acc, const T* x, int64_t n, ReduceOp op) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      acc[i] = op == ReduceOp::Min ? (acc[i] && x[i]) : (acc[i] || x[i]);
    } else {
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
          acc[i] = static_cast<T>(acc[i] + x[i]);
          break;
        case ReduceOp::Max:
          acc[i] = std::max(acc[i], x[i]);
          break;
        case ReduceOp::Min:
          acc[i] = std::min(acc[i], x[i]);
          break;
      }
    }
  }
}

template <class F>
void visit(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool:
      return f(bool{});
    case DType::I8:
      return f(int8_t{});
    case DType::I16:
      return f(int16_t{});
    case DType::I32:
      return f(int32_t{});
    case DType::I64:
      return f(int64_t{});
    case DType::U8:
      return f(uint8_t{});
    case DType::U16:
      return f(uint16_t{});
    case DType::U32:
      return f(uint32_t{});
    case DType::U64:
      return f(uint64_t{});
    case DType::F32:
      return f(float{});
    case DType::F64:
      return f(double{});
    case DType::F16:
    case DType::BF16:
      break;
  }
  throw Error(fmt::format("kiln::dist: no host arithmetic for {}", dtype_name(dtype)));
}
}  // namespace

void combine(std::byte* acc, const std::byte* x, int64_t n, DType dtype, ReduceOp op) {
  visit(dtype, [&]<class T>(T) {
    combine_as(reinterpret_cast<T*>(acc), reinterpret_cast<const T*>(x), n, op);
  });
}

void divide(std::byte* data, int64_t n, DType dtype, int divisor) {
  if (dtype == DType::F32) {
    float* p = reinterpret_cast<float*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(divisor);
  } else if (dtype == DType::F64) {
    double* p = reinterpret_cast<double*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(divisor);
  } else {
    throw Error(fmt::format("kiln::dist: a mean of {} values (floats only)", dtype_name(dtype)));
  }
}

}  // namespace detail
}  // namespace kiln::dist
