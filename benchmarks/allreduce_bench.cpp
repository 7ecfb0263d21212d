// benchmarks/allreduce_bench.cpp - kiln::dist::all_reduce against MPI_Allreduce on raw
// buffers, 1 KiB to 256 MiB of f32.
//
//   mpirun -np 2 --oversubscribe build/bin/kiln_allreduce_bench [--max-mib 256] [--device cpu]
//
// Each size is reduced `reps` times after two warm-up calls, alternating the two: the raw
// MPI_Allreduce (in place, on a host vector) and kiln::dist::all_reduce of an evaluated
// tensor on the device (which checks the ranks' shapes, copies the tensor to host memory,
// reduces it in place and hands the buffer back). Rank 0 prints the median time and the bus
// bandwidth, NCCL's measure: 2 (n - 1) / n * bytes / time, what each rank's link carries in a
// ring all-reduce, comparable across rank counts.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/dist/dist.h"
#include "kiln/kiln.h"
#include "timing.h"

int main(int argc, char** argv) {
  kiln::dist::init(&argc, &argv);
  int64_t max_mib = 256;
  kiln::Device device = kiln::Device::cpu();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--max-mib") == 0) max_mib = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--device") == 0) device = kiln::Device::parse(argv[i + 1]);
  }
  const int ranks = kiln::dist::size(), me = kiln::dist::rank();
  if (me == 0)
    std::printf(
        "%d ranks, f32 on %s; median of the reps, bus bandwidth 2(n-1)/n * bytes / time\n%10s %6s "
        "%12s %10s %12s %10s %7s\n",
        ranks, device.str().c_str(), "bytes", "reps", "MPI us", "MPI GB/s", "kiln us", "kiln GB/s",
        "kiln/MPI");
  for (int64_t bytes = 1024; bytes <= max_mib << 20; bytes *= 4) {
    const int64_t n = bytes / 4;
    const int reps = bytes <= (1 << 20) ? 50 : bytes <= (16 << 20) ? 10 : 4;
    std::vector<float> raw(static_cast<size_t>(n), 1.0f);
    const kiln::Tensor t = kiln::full({n}, 1.0, kiln::DType::F32, device).eval();
    std::vector<double> mpi_s, kiln_s;
    for (int r = -2; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double a = kiln::bench::seconds([&] {
        MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      });
      MPI_Barrier(MPI_COMM_WORLD);
      const double b = kiln::bench::seconds([&] {
        kiln::dist::all_reduce(t);
        kiln::synchronize(device);
      });
      if (r >= 0) {
        mpi_s.push_back(a);
        kiln_s.push_back(b);
      }
    }
    const double m = kiln::bench::median(mpi_s), k = kiln::bench::median(kiln_s);
    const double bus = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes);
    if (me == 0)
      std::printf("%10lld %6d %12.1f %10.2f %12.1f %10.2f %7.2f\n", static_cast<long long>(bytes),
                  reps, m * 1e6, bus / m / 1e9, k * 1e6, bus / k / 1e9, k / m);
  }
  kiln::dist::finalize();
  return 0;
}
