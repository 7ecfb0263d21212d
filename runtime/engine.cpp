// runtime/engine.cpp - the engine registry and the interpreter engine.
#include "kiln/runtime/engine.h"

#include "kiln/codegen/cpu.h"
#include "kiln/runtime/interpreter.h"

namespace kiln {
namespace {

class InterpreterEngine final : public Engine {
 public:
  const char* name() const override { return "interp"; }
  // The interpreter is the oracle: it never writes over its inputs, donated or not.
  std::vector<BufferRef> run(const Graph& g, std::span<const BufferRef> inputs, const std::vector<bool>&) override {
    std::vector<const HostTensor*> views;
    views.reserve(inputs.size());
    for (const BufferRef& b : inputs) views.push_back(b.get());
    std::vector<HostTensor> results = interpret(g, views);
    std::vector<BufferRef> out;
    out.reserve(results.size());
    for (HostTensor& t : results) out.push_back(std::make_shared<const HostTensor>(std::move(t)));
    return out;
  }
};

}  // namespace

Engine& engine_for(Device device) {
  static InterpreterEngine interpreter;
  switch (device.kind) {
    case Device::Kind::Cpu: return cpu_engine();
    case Device::Kind::Interp: return interpreter;
  }
  return interpreter;
}

}  // namespace kiln
