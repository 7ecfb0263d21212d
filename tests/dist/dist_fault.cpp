// tests/dist/dist_fault.cpp - a rank that stops mid-training, for tests/dist/fault_test.py.
//
//   mpirun -np 2 dist_fault hang|exit
//
// Both ranks take a step (an all-reduce of gradients), then rank 1 hangs (sleeps) or exits
// without finalize() before the second, and rank 0 waits in it: it must end with an error
// within the timeout (KILN_DIST_TIMEOUT), never hang.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "kiln/dist/dist.h"
#include "kiln/kiln.h"

int main(int argc, char** argv) {
  kiln::dist::init(&argc, &argv);
  const bool hang = argc > 1 && std::strcmp(argv[1], "hang") == 0;
  const kiln::Tensor g = kiln::ones({1024, 256});
  for (int step = 0; step < 3; ++step) {
    if (step == 1 && kiln::dist::rank() == 1) {
      std::fprintf(stderr, "dist_fault: rank 1 %s at step %d\n", hang ? "hangs" : "exits", step);
      if (hang) std::this_thread::sleep_for(std::chrono::minutes(10));
      _exit(0);  // as a rank that returns from main early: a zero status, no finalize()
    }
    const float total = kiln::dist::all_reduce(g).to_vector<float>()[0];
    std::printf("rank %d step %d: %g\n", kiln::dist::rank(), step, total);
    std::fflush(stdout);
  }
  kiln::dist::finalize();
  return 0;
}
