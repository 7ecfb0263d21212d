// kiln/engine/engine.h - devices, their buffers, and the one interface that runs graphs.
//
// The frontend hands a verified Graph and its input buffers to the Engine of a device and
// gets the output buffers back; it never knows which backend ran them. Every compiling
// device shares one engine implementation over its Backend (plan cache, pipeline, memory
// plan, lowering, launch list, dumps); the reference interpreter is the `interp` device.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/engine/device.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"

namespace kiln {

class DeviceMemory;
class Backend;

/// One tensor's memory, on its device, immutable once written. Reading it on the host is
/// an explicit download (Engine::download; Tensor::to_vector, item and host do that).
class Buffer {
 public:
  Buffer(Device device, TensorType type, std::shared_ptr<DeviceMemory> memory);
  Device device() const { return device_; }
  const TensorType& type() const { return type_; }
  DeviceMemory& memory() const { return *memory_; }
  /// Whether another Buffer holds the same memory: two outputs of one run that CSE made one
  /// value come back as two buffers of one memory, and writing over one writes the other.
  bool memory_shared() const { return memory_.use_count() > 1; }
  /// The bytes in host memory when the device keeps tensors there (cpu, interp), or nullptr.
  const std::byte* host_data() const;

 private:
  Device device_;
  TensorType type_;
  std::shared_ptr<DeviceMemory> memory_;
};
using BufferRef = std::shared_ptr<const Buffer>;

/// A graph made ready to run on one engine, again and again, without the canonical form,
/// hash and plan-cache lookup of Engine::run (kiln::capture replays through it).
class PreparedGraph {
 public:
  virtual ~PreparedGraph() = default;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual Device device() const = 0;
  /// The backend that compiles for this device, or nullptr (the interpreter).
  virtual Backend* backend() { return nullptr; }

  /// Runs `g` on `inputs` (one per graph parameter, of the declared types, on this device)
  /// and returns one buffer per graph output. `donated[i]` says nothing else will read
  /// input i after this run, so its buffer may be overwritten (plan_memory's in-place
  /// writes); empty means none is. The `value`s of the graph's `scalar` nodes are bound at
  /// launch. Safe to call from several threads at once.
  virtual std::vector<BufferRef> run(const Graph& g, std::span<const BufferRef> inputs,
                                     const std::vector<bool>& donated = {}) = 0;

  /// `g` made ready to run with these donation flags (as run's): compiled, or taken from the
  /// plan cache. The graph is kept; the caller keeps the result as long as it replays.
  virtual std::shared_ptr<const PreparedGraph> prepare(const Graph& g, const std::vector<bool>& donated);
  /// Runs a graph that prepare() made on this engine, its launch-bound scalars taken from
  /// `scalars` (by slot, as launch_scalars orders them) instead of the graph's values. The
  /// caller has checked the inputs against the graph's parameters and donates only inputs
  /// prepared as donated that are dead after the run.
  virtual std::vector<BufferRef> run_prepared(const PreparedGraph& p, std::span<const BufferRef> inputs,
                                              std::span<const Scalar> scalars);

  /// `host` in this device's memory (host-memory devices take the bytes without a copy).
  virtual BufferRef upload(HostTensor host) = 0;
  /// `host` in this device's memory, shared with the caller: host-memory devices read its
  /// bytes in place (Backend::borrow), others upload a copy. Runs only read it.
  virtual BufferRef upload_shared(std::shared_ptr<const HostTensor> host) { return upload(HostTensor(*host)); }
  /// A copy of `b` (of this device) in host memory.
  virtual HostTensor download(const Buffer& b) = 0;
  /// Blocks until the work already handed to this device has finished (Backend::finish).
  virtual void finish() {}
};

/// The engine of `device`; throws kiln::Error naming the registered devices when it has none.
Engine& engine_for(Device device);

/// Lets the reference interpreter run custom kernels: their C or OpenCL C compiled for the
/// host by the cpu backend (the IR layer compiles nothing). engine_for() calls it, and so do
/// the `kiln` tools; a program that calls kiln::interpret on custom kernels before any engine
/// calls it first. Calling it again does nothing.
void register_custom_host();

/// Every device this build registers, in registry order (`interp` last).
std::vector<Device> registered_devices();

/// A source a backend generates, as KILN_DUMP names it, and the extension of its files.
struct DumpStage {
  std::string_view name;       // "llvm"
  std::string_view extension;  // "ll": <graph>.<kernel>.ll
};

/// A kind of device as its row in the registry (engine/registry.cpp) declares it: the one
/// place that lists backends. Tools and the engine read these rows instead of naming them.
struct DeviceKindInfo {
  std::string_view name;  // "opencl": devices are named "opencl:N" when `indexed`
  bool indexed = false;
  /// Its folder in the disk cache root (kiln/runtime/kernel_store.h), where its backend's
  /// kernel store keeps compiled kernels; empty for a device that compiles nothing.
  std::string_view cache_namespace;
  std::span<const DumpStage> dump_stages;  // the KILN_DUMP stages of its generated sources
};

/// Every kind of device the registry declares, in its order.
std::span<const DeviceKindInfo> device_kinds();
/// The kind of `device`; throws kiln::Error when this build does not register it.
const DeviceKindInfo& device_kind(Device device);
/// How `kiln devices` describes `device`: its compiler or driver, memory and features.
std::string device_description(Device device);

/// Runs `g` on `device` from host inputs to host outputs: upload, run, download (tools
/// and tests; the frontend keeps values on their device instead).
std::vector<HostTensor> run_on_host(Device device, const Graph& g, std::span<const HostTensor> inputs);

/// `b` on `to`: the same buffer when it is there already, else downloaded and uploaded.
BufferRef copy_to_device(const BufferRef& b, Device to);

}  // namespace kiln
