# Every third-party dependency of kiln, from Debian 12 packages (scripts/setup.sh installs
# them). All are required now so that one setup installs everything once; each module links
# only what it uses. See ../shared/TOOLCHAIN.md for the traps these lines avoid.
include_guard(GLOBAL)

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(TBB REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(CLI11 REQUIRED)

# LLVM 19 (one shared libLLVM) and Clang 19's static libraries. The version must be given
# as major.minor: LLVM's version file rejects a bare "19".
find_package(LLVM 19.1 REQUIRED CONFIG HINTS /usr/lib/llvm-19/lib/cmake/llvm)
find_package(Clang 19.1 REQUIRED CONFIG HINTS /usr/lib/llvm-19/lib/cmake/clang)

# Vulkan and shaderc: Debian's shared libshaderc is broken, so link shaderc_combined with
# glslang and SPIRV-Tools in this order.
find_package(Vulkan REQUIRED)
find_package(SPIRV-Tools CONFIG REQUIRED)
find_package(SPIRV-Tools-opt CONFIG REQUIRED)
find_package(glslang CONFIG REQUIRED)
find_library(KILN_SHADERC_COMBINED shaderc_combined REQUIRED)

find_package(OpenCL REQUIRED)

# ONNX import: Debian's libonnx (the generated protobuf classes) over libprotobuf.
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED CONFIG)

# Open MPI, for kiln::dist (its own library, libkiln_dist: kiln::kiln links no MPI), and
# mpirun for the tests that run several ranks.
# kiln is a C++-only project: MPI's C API through the CXX component, without MPI's
# deprecated C++ bindings.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS CXX)
find_program(KILN_MPIEXEC NAMES mpirun mpiexec REQUIRED)
# What the tests that run mpirun need: mpirun refuses root unless told (CI runs as root), and
# containers often forbid the cross-memory attach of Open MPI's shared-memory transport.
# Under the sanitizers, LeakSanitizer is off in the ranks: Open MPI's components keep
# allocations until exit, from libraries without frame pointers and plugins unloaded by then,
# so their stacks name no module a suppression could match (ASan and UBSan stay on).
set(KILN_MPIRUN_ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    "OMPI_MCA_btl_vader_single_copy_mechanism=none")
if(KILN_SANITIZE)
  list(APPEND KILN_MPIRUN_ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()

if(KILN_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(benchmark REQUIRED)
  find_program(KILN_FILECHECK FileCheck HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
  find_file(KILN_LIT lit.py HINTS /usr/lib/llvm-19/build/utils/lit REQUIRED)
  # Debian's python3 (it has numpy for the .npy test); a pyenv one may be first on PATH.
  find_program(KILN_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH REQUIRED)
endif()

message(STATUS "kiln: LLVM ${LLVM_PACKAGE_VERSION}, Vulkan ${Vulkan_VERSION}, OpenCL ${OpenCL_VERSION_STRING}, "
               "TBB ${TBB_VERSION}, fmt ${fmt_VERSION}, MPI ${MPI_CXX_VERSION}")
