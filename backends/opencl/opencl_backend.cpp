// backends/opencl/opencl_backend.cpp - the `opencl:N` devices: OpenCL C from the shared
// C-family emitter (kiln/codegen/c_source.h), device-resident buffers, one in-order queue.
//
// Programs come from the kernel store (kiln/runtime/kernel_store.h); its disk entries are the
// driver's binaries, keyed by platform, device, driver version, kiln version and the kernel
// with its schedule. An entry the driver no longer accepts is removed and rebuilt from source.
#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "cl_api.h"
#include "kiln/backends/indexed_backend.h"
#include "kiln/backends/opencl.h"
#include "kiln/backends/scalar_abi.h"
#include "kiln/codegen/c_source.h"
#include "kiln/codegen_id.h"
#include "kiln/ir/hash.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/runtime/compile_policy.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/runtime/kernel_store.h"
#include "kiln/runtime/stats.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"
#include "kiln/version.h"

namespace kiln::opencl {
namespace {

// Buffers freed by the engine, kept for the next allocation of the same size class: a new
// cl_mem costs PoCL fresh host pages (page faults on every step of a loop, ~10 ms per
// 64 MiB), a GPU driver a device allocation. One in-order queue makes reuse safe: a
// launch that writes a reused buffer runs after every launch that read it before.
class BufferPool {
 public:
  explicit BufferPool(uint64_t capacity) : capacity_(capacity) {}
  /// The size class of a request: 2 MiB multiples from 1 MiB, powers of two below.
  static size_t size_class(int64_t bytes) {
    const auto b = static_cast<size_t>(std::max<int64_t>(bytes, 1));
    if (b >= (size_t{1} << 20)) return (b + (size_t{2} << 20) - 1) / (size_t{2} << 20) * (size_t{2} << 20);
    return std::max<size_t>(256, std::bit_ceil(b));
  }
  Mem take(size_t size) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end()) return Mem();
    Mem m = std::move(it->second);
    free_.erase(it);
    held_ -= size;
    return m;
  }
  void give(size_t size, Mem m) {
    std::lock_guard lock(mutex_);
    if (held_ + size > capacity_) return;  // released by m's destructor
    held_ += size;
    free_.emplace(size, std::move(m));
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, Mem> free_;
  uint64_t held_ = 0;
  uint64_t capacity_;
};

class ClMemory final : public DeviceMemory {
 public:
  ClMemory(int64_t bytes, size_t size_class, Mem mem, BufferPool& pool)
      : DeviceMemory(bytes), size_class_(size_class), mem_(std::move(mem)), pool_(pool) {}
  ~ClMemory() override { pool_.give(size_class_, std::move(mem_)); }
  cl_mem get() const { return mem_.get(); }

 private:
  size_t size_class_;
  Mem mem_;
  BufferPool& pool_;  // the backend's, which lives as long as the process
};

class ClKernel final : public CompiledKernel {
 public:
  ClKernel(std::shared_ptr<const Program> program, KernelHandle kernel, std::vector<DType> scalars, std::string name)
      : program_(std::move(program)), kernel_(std::move(kernel)), scalars_(std::move(scalars)), name_(std::move(name)) {}
  cl_kernel get() const { return kernel_.get(); }
  const std::vector<DType>& scalar_types() const { return scalars_; }
  const std::string& name() const { return name_; }
  // clSetKernelArg and the enqueue that reads the arguments must not interleave with
  // another thread's launch of the same kernel.
  std::mutex& mutex() const { return mutex_; }

 private:
  std::shared_ptr<const Program> program_;  // shared by the kernels built together
  KernelHandle kernel_;
  std::vector<DType> scalars_;
  std::string name_;
  mutable std::mutex mutex_;
};

// The entry point of the i-th kernel of a program: programs are shared by kernels that
// differ only in name, so kernels are named by position.
std::string entry_name(size_t i) { return fmt::format("kiln_kernel_{}", i); }

// The device and its toolchain in one: building a program and loading a binary need the
// device's context.
class OpenClBackend final : public Backend, public Toolchain {
 public:
  explicit OpenClBackend(int index) : Toolchain("opencl", fmt::format("opencl:{}", index)), index_(index) {
    const std::vector<FoundDevice>& found = found_devices();
    KILN_ASSERT(index >= 0 && static_cast<size_t>(index) < found.size(), "opencl_backend checks the index");
    const FoundDevice& f = found[static_cast<size_t>(index)];
    device_ = f.device;
    info_ = f.info;
    cl_int err = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(f.platform), 0};
    context_ = Context(clCreateContext(props, 1, &device_, nullptr, nullptr, &err));
    check(err, fmt::format("creating a context on opencl:{} ({})", index, info_.name));
    queue_ = Queue(clCreateCommandQueueWithProperties(context_.get(), device_, nullptr, &err));
    check(err, fmt::format("creating a queue on opencl:{} ({})", index, info_.name));
    caps_.fp64 = info_.fp64;
    caps_.int64 = info_.int64;
    caps_.custom_opencl_c = true;
    caps_.family = DeviceFamily::WorkItems;
    caps_.local_memory = info_.local_memory > 0;
    caps_.subgroup_size = 1;  // subgroup reductions are not generated yet
    caps_.max_work_group = info_.max_work_group;
    caps_.vector_bytes = 4 * info_.preferred_float_vector;  // the widths the driver runs best
    caps_.cores = std::max(1, info_.compute_units);
    caps_.emulated_work_groups = info_.type == "cpu";
    // PoCL's work-group vectorizer: a kernel's own loop inside the work-item loop stops it.
    caps_.vectorizes_work_item_loop = caps_.emulated_work_groups;
    caps_.vector_loads = true;   // vloadN / vstoreN
    caps_.vector_values = true;  // floatN arithmetic
    caps_.buffer_alignment = info_.base_address_align;
    // Horizontal kernels: each part's body in a branch of its own (c_emitter.cpp), as many
    // parts as the cpu's, within what a kernel's arguments may take.
    caps_.horizontal_parts = 64;
    caps_.max_argument_bytes = info_.max_parameter_bytes;
    caps_.buffer_argument_bytes = sizeof(cl_mem);
    caps_.exact_math = false;  // the device's libm, not the host's
    // Warnings about generated code (a self-comparison from `eq %x, %x`) are not the user's
    // to read; KILN_OPENCL_OPTIONS adds options of the user's (-cl-opt-disable...).
    options_ = "-w";
    // The interpreter's f32 division and sqrt are IEEE's, correctly rounded; OpenCL's default
    // allows 2.5 and 3 ulp (NVIDIA's driver uses that freedom, PoCL does not).
    if (info_.correctly_rounded_divide_sqrt) options_ += " -cl-fp32-correctly-rounded-divide-sqrt";
    caps_.exact_f32_divide_sqrt = info_.correctly_rounded_divide_sqrt;
    if (const char* extra = std::getenv("KILN_OPENCL_OPTIONS"); extra && *extra) options_ += fmt::format(" {}", extra);
    names_ = {fmt::format("opencl:{} ({})", index, info_.name), "cl_khr_fp64", "64-bit integers"};
    fingerprint_ = fmt::format("opencl|{}|{}|{}|{}|{}|options {}|kiln {} codegen {}", info_.platform,
                               info_.platform_version, info_.name, info_.driver_version, info_.device_version, options_,
                               KILN_VERSION_STRING, KILN_CODEGEN_ID);
  }

  std::string_view name() const override { return "opencl"; }
  std::string fingerprint() const override { return fingerprint_; }
  std::string device_fingerprint() const override {
    return fmt::format("opencl|{}|{}|{}|{}|{} compute units", info_.platform, info_.vendor, info_.name,
                       info_.driver_version, info_.compute_units);
  }
  std::string device_name() const override { return info_.name; }
  const Capabilities& capabilities() const override { return caps_; }
  // Reductions to few values become block partials, which a second kernel reduces. Matmul
  // stays a GEMM step: a tiled kernel of its own (gemm, gemm_with_epilogue).
  std::vector<const PassInfo*> extra_passes() const override { return {find_pass("split-reductions")}; }

  // ---- toolchain ----
  Toolchain& toolchain() override { return *this; }

  std::string render(const kir::Kernel& k, const kir::Schedule& s, std::string_view stage) override {
    return stage == "opencl" ? kir::opencl_source(k, s, caps_) : std::string();
  }
  void check_kernel(const kir::Kernel& k) const override { kir::check_dtypes(k, caps_, names_); }

  // A build costs about as much for one kernel as for ten (PoCL: ~100 ms either way).
  bool builds_together() const override { return true; }

  KernelStore::Built build(std::span<const kir::Kernel* const> kernels,
                           std::span<const kir::Schedule* const> schedules, std::string_view) override {
    std::vector<kir::Kernel> renamed;  // entry points named by position: kernels that differ in name only share a program
    std::vector<const kir::Kernel*> members;
    std::string names;
    renamed.reserve(kernels.size());
    for (size_t j = 0; j < kernels.size(); ++j) {
      renamed.push_back(*kernels[j]);
      renamed.back().name = entry_name(j);
      members.push_back(&renamed.back());
      names += fmt::format("{}@{}", j ? " " : "", kernels[j]->name);
    }
    return built(from_source(kir::opencl_source(members, schedules, caps_), names));
  }

  KernelStore::Object load(std::string_view binary, std::string_view) override { return from_binary(binary); }

  std::shared_ptr<const CompiledKernel> member(const KernelStore::Object& program, size_t position, const kir::Kernel& k,
                                               const kir::Schedule&) override {
    return member(program, position, k.scalars, k.name);  // named as launch errors say it: "kernel @<name>"
  }

  // ---- device ----
  std::shared_ptr<DeviceMemory> alloc(int64_t bytes) override {
    KILN_ASSERT(bytes >= 0, "buffer sizes are non-negative");
    if (bytes > info_.max_allocation) throw std::bad_alloc();  // the engine names the tensor
    // OpenCL has no empty buffers: an empty tensor gets a size class no kernel reads.
    const size_t size = BufferPool::size_class(bytes);
    if (Mem reused = pool_.take(size)) return std::make_shared<ClMemory>(bytes, size, std::move(reused), pool_);
    cl_int err = CL_SUCCESS;
    Mem mem(clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, size, nullptr, &err));
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
        err == CL_INVALID_BUFFER_SIZE)
      throw std::bad_alloc();
    check(err, fmt::format("allocating {} bytes on opencl:{}", bytes, index_));
    return std::make_shared<ClMemory>(bytes, size, std::move(mem), pool_);
  }

  void upload(DeviceMemory& dst, const std::byte* src, int64_t bytes) override {
    if (bytes <= 0) return;
    check(clEnqueueWriteBuffer(queue_.get(), mem(dst), CL_TRUE, 0, static_cast<size_t>(bytes), src, 0, nullptr, nullptr),
          fmt::format("writing {} bytes to opencl:{}", bytes, index_));
  }
  void download(const DeviceMemory& src, std::byte* dst, int64_t bytes) override {
    if (bytes <= 0) return;
    check(clEnqueueReadBuffer(queue_.get(), mem(src), CL_TRUE, 0, static_cast<size_t>(bytes), dst, 0, nullptr, nullptr),
          fmt::format("reading {} bytes from opencl:{}", bytes, index_));
  }
  void copy(const DeviceMemory& src, DeviceMemory& dst, int64_t bytes) override {
    if (bytes <= 0) return;
    check(clEnqueueCopyBuffer(queue_.get(), mem(src), mem(dst), 0, 0, static_cast<size_t>(bytes), 0, nullptr, nullptr),
          fmt::format("copying {} bytes on opencl:{}", bytes, index_));
  }

  void finish() override { check(clFinish(queue_.get()), fmt::format("waiting for opencl:{}", index_)); }

  void launch(const CompiledKernel& compiled, const kir::Schedule& s, std::span<DeviceMemory* const> buffers,
              std::span<const Scalar> scalars) override {
    if (s.work_items.global_size <= 0) return;  // an empty domain: nothing to compute
    std::vector<cl_mem> mems;
    for (DeviceMemory* b : buffers) mems.push_back(mem(*b));
    enqueue(static_cast<const ClKernel&>(compiled), mems, scalars, s.work_items.global_size, s.work_items.local_size);
  }

  bool gemm(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers) override {
    run_gemm(g, buffers, nullptr);
    return true;
  }
  void prepare_gemm(const LaunchPlan::Gemm& g) override {
    if (kir::gemm_work_groups(g) > 0) gemm_kernel(g, nullptr, /*store_product=*/true);
  }
  bool gemm_with_epilogue(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers,
                          const GemmEpilogue& epilogue) override {
    if (!epilogue.ir) return false;
    run_gemm(g, buffers, &epilogue);
    return true;
  }
  bool attention(const LaunchPlan::Attention& a, std::span<DeviceMemory* const> buffers) override {
    const int64_t groups = kir::attention_work_groups(a);
    if (groups == 0 || a.width == 0) return true;  // no rows: nothing to compute
    const std::shared_ptr<const ClKernel> k = attention_kernel(a);
    std::vector<cl_mem> mems;
    for (int32_t b : {a.q.buffer, a.k.buffer, a.v.buffer, a.bias.buffer, a.out})
      if (b >= 0) mems.push_back(mem(*buffers[static_cast<size_t>(b)]));
    enqueue(*k, mems, {}, groups * a.schedule.local_size, a.schedule.local_size);
    return true;
  }

 private:
  static cl_mem mem(const DeviceMemory& m) { return static_cast<const ClMemory&>(m).get(); }

  void enqueue(const ClKernel& k, std::span<const cl_mem> mems, std::span<const Scalar> scalars, int64_t global_size,
               int64_t local_size) {
    std::lock_guard lock(k.mutex());
    cl_uint arg = 0;
    for (const cl_mem& m : mems)
      check(clSetKernelArg(k.get(), arg++, sizeof m, &m), fmt::format("binding a buffer of kernel @{}", k.name()));
    for (size_t i = 0; i < scalars.size(); ++i) set_scalar(k, arg++, scalars[i], k.scalar_types()[i]);
    const auto global = static_cast<size_t>(global_size), local = static_cast<size_t>(local_size);
    check(clEnqueueNDRangeKernel(queue_.get(), k.get(), 1, nullptr, &global, &local, 0, nullptr, nullptr),
          fmt::format("launching kernel @{} ({} work-items in groups of {})", k.name(), global, local));
  }

  // A GEMM step on its tiled kernel, with `epilogue` computed in its registers when given.
  void run_gemm(const LaunchPlan::Gemm& g, std::span<DeviceMemory* const> buffers, const GemmEpilogue* epilogue) {
    const int64_t groups = kir::gemm_work_groups(g);
    if (groups == 0) return;  // an empty product: nothing to compute or store
    const bool store_product = !epilogue || epilogue->product_read_later;
    std::optional<kir::GemmEpilogueSource> fused;
    if (epilogue) fused.emplace(kir::GemmEpilogueSource{*epilogue->ir, epilogue->product_param});
    const std::shared_ptr<const ClKernel> k = gemm_kernel(g, fused ? &*fused : nullptr, store_product);
    std::vector<cl_mem> mems;
    for (int32_t b : {g.a, g.b, g.c}) mems.push_back(mem(*buffers[static_cast<size_t>(b)]));
    std::span<const Scalar> scalars;
    if (epilogue) {
      for (DeviceMemory* b : epilogue->buffers) mems.push_back(mem(*b));
      // The compiled kernel's scalars may end with its rows (kir::rows_at_launch); the
      // GEMM computes the epilogue from its Kernel IR, which takes the ones before.
      scalars = epilogue->scalars.first(epilogue->ir->scalars.size());
    }
    const int64_t local = g.schedule.local_size();
    enqueue(*k, mems, scalars, groups * local, local);
  }

  // The kernel of a GEMM step (and of the epilogue computed in it), from the kernel caches or
  // built now.
  std::shared_ptr<const ClKernel> gemm_kernel(const LaunchPlan::Gemm& g, const kir::GemmEpilogueSource* epilogue,
                                              bool store_product) {
    kir::check_matmul_dtype(g.dtype, caps_, names_);
    return single_kernel(
        kir::gemm_canonical(g, epilogue, store_product, fingerprint_),
        epilogue ? fmt::format("gemm+@{}", epilogue->kernel.name) : std::string("gemm"),
        [&] { return kir::opencl_gemm_source(g, epilogue, store_product, entry_name(0), caps_); },
        epilogue ? epilogue->kernel.scalars : std::vector<DType>{});
  }

  // The kernel of an attention step, from the kernel caches or built now.
  std::shared_ptr<const ClKernel> attention_kernel(const LaunchPlan::Attention& a) {
    return single_kernel(kir::attention_canonical(a, fingerprint_), "attention @" + a.name,
                         [&] { return kir::opencl_attention_source(a, entry_name(0), caps_); }, {});
  }

  // A program of one kernel (a library step's) keyed by `canonical`: from the kernel store,
  // or built from `source()` now.
  template <class Source>
  std::shared_ptr<const ClKernel> single_kernel(std::string canonical, const std::string& name, Source&& source,
                                                std::vector<DType> scalars) {
    KernelStore::Toolchain calls;
    calls.build = [&](std::span<const size_t>, std::string_view) { return built(from_source(source(), name)); };
    calls.load = [this](std::string_view binary, std::string_view) -> KernelStore::Object { return from_binary(binary); };
    calls.member = [&](const KernelStore::Object& program, size_t position, size_t) -> KernelStore::Object {
      return member(program, position, scalars, name);
    };
    return store().get_one<ClKernel>({std::move(canonical), "kernel " + name}, calls);
  }

  // A built program and, for the disk, the driver's binary of it.
  KernelStore::Built built(std::shared_ptr<const Program> program) {
    KernelStore::Built b;
    if (store().disk().enabled()) {
      size_t size = 0;
      if (clGetProgramInfo(program->get(), CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) == CL_SUCCESS && size > 0) {
        std::string binary(size, '\0');
        auto* ptr = reinterpret_cast<unsigned char*>(binary.data());
        if (clGetProgramInfo(program->get(), CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) == CL_SUCCESS)
          b.bytes = std::move(binary);
      }
    }
    b.group = std::move(program);
    return b;
  }

  // The kernel at `position` of a program; throws kiln::Error when it has none there.
  std::shared_ptr<const ClKernel> member(const KernelStore::Object& group, size_t position,
                                         const std::vector<DType>& scalars, const std::string& name) {
    auto program = std::static_pointer_cast<const Program>(group);
    cl_int err = CL_SUCCESS;
    KernelHandle handle(clCreateKernel(program->get(), entry_name(position).c_str(), &err));
    check(err, fmt::format("creating kernel {}", name));
    return std::make_shared<const ClKernel>(std::move(program), std::move(handle), scalars, name);
  }

  // OpenCL C takes a bool argument as a uchar.
  static constexpr ScalarAbi kScalarAbi{.bool_bytes = 1};

  void set_scalar(const ClKernel& k, cl_uint arg, const Scalar& v, DType t) {
    alignas(8) std::byte bytes[8];
    write_scalar(v, t, kScalarAbi, bytes);
    check(clSetKernelArg(k.get(), arg, scalar_bytes(t, kScalarAbi), bytes),
          fmt::format("binding a scalar of kernel @{}", k.name()));
  }

  std::string build_log(cl_program p) const {
    size_t n = 0;
    clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  std::shared_ptr<const Program> from_binary(std::string_view binary) {
    const size_t size = binary.size();
    const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    auto p = std::make_shared<Program>(clCreateProgramWithBinary(context_.get(), 1, &device_, &size, &bytes, &status, &err));
    check(err, "loading a program binary");
    check(status, "loading a program binary");
    check(clBuildProgram(p->get(), 1, &device_, options_.c_str(), nullptr, nullptr), "building a program binary");
    return p;
  }

  std::shared_ptr<const Program> from_source(const std::string& source, const std::string& names) {
    const char* text = source.c_str();
    const size_t length = source.size();
    cl_int err = CL_SUCCESS;
    auto p = std::make_shared<Program>(clCreateProgramWithSource(context_.get(), 1, &text, &length, &err));
    check(err, "creating a program");
    if (cl_int built = clBuildProgram(p->get(), 1, &device_, options_.c_str(), nullptr, nullptr); built != CL_SUCCESS) {
      // The source goes where a person can read it beside the log's line numbers: in kiln's
      // own cache root (one file per program, written over, not a new temporary file each
      // time), or the temporary directory when there is no cache.
      std::filesystem::path dir = DiskCache::default_root();
      std::string why;
      if (dir.empty() || !untrusted_cache_dir(dir).empty() || !create_private_dirs(dir / "opencl-failed", why))
        dir = std::filesystem::temp_directory_path();
      else
        dir /= "opencl-failed";
      const std::filesystem::path file = dir / fmt::format("kiln-opencl-{}.cl", hash_text(source).hex().substr(0, 16));
      std::ofstream(file) << source;
      throw Error(fmt::format("opencl: kernel {} does not build on opencl:{} ({}): {}\n  generated source: {}\n{}", names,
                              index_, info_.name, error_name(built), file.string(), build_log(p->get())));
    }
    return p;
  }

  int index_;
  cl_device_id device_ = nullptr;
  OpenClDeviceInfo info_;
  Context context_;
  Queue queue_;
  Capabilities caps_;
  std::string options_;  // clBuildProgram's
  std::string fingerprint_;
  kir::DeviceNames names_;  // for errors about dtypes the device lacks
  // As much as the host allocator caches ($KILN_ALLOCATOR_CACHE_MB).
  BufferPool pool_{allocator_cache_limit_from_env()};
};

}  // namespace
}  // namespace kiln::opencl

namespace kiln {

Backend& opencl_backend(int index) {
  return indexed_backend<opencl::OpenClBackend>("opencl", index, opencl_devices(),
                                                "no OpenCL platform is installed; Debian's pocl-opencl-icd provides one");
}

}  // namespace kiln
