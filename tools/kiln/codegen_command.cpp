// tools/kiln/codegen_command.cpp - `kiln codegen`: what a backend generates for an IR file.
#include <algorithm>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/backend/cpu.h"
#include "kiln/codegen/c_source.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"

namespace kiln::cli {
namespace {

struct CodegenOptions {
  std::string file;
  std::string target = "llvm";
  bool assembly = false;
  bool unoptimized = false;
  std::string kernel;
  std::string output;
  std::string device;  // default: cpu, or opencl:0 for --target opencl
};

// The backend whose code is shown: --device, or the first device of the target's kind.
Backend& backend_for(const CodegenOptions& o) {
  const Device d = !o.device.empty() ? Device::parse(o.device) : o.target == "opencl" ? Device::opencl(0) : Device::cpu();
  const bool wants_cpu = o.target == "llvm", wants_opencl = o.target == "opencl";
  if ((wants_cpu && d.kind != Device::Kind::Cpu) || (wants_opencl && d.kind != Device::Kind::OpenCL))
    throw Error(fmt::format("--target {} is generated for {} devices, not {}", o.target, wants_cpu ? "cpu" : "opencl:N", d.str()));
  Backend* b = engine_for(d).backend();
  if (!b) throw Error(fmt::format("{} generates no code (it interprets the graph)", d.str()));
  return *b;
}

}  // namespace

Command add_codegen_command(CLI::App& app) {
  auto opts = std::make_shared<CodegenOptions>();
  CLI::App* sub = app.add_subcommand(
      "codegen", "Compile a graph as a device does (-O2, its passes, fusion, Kernel IR) and print the generated code.");
  sub->add_option("file", opts->file, "IR file, or - for stdin")->required();
  sub->add_option("--target", opts->target,
                  "What to print: kernel (Kernel IR and launch list), llvm (cpu), or opencl (the OpenCL C program)")
      ->check(CLI::IsMember({"kernel", "llvm", "opencl"}))
      ->capture_default_str();
  sub->add_flag("--asm", opts->assembly, "With --target llvm: host assembly instead of LLVM IR");
  sub->add_flag("--no-opt", opts->unoptimized, "With --target llvm: LLVM IR as generated, before optimization");
  sub->add_option("--kernel", opts->kernel, "Only this kernel (by name, e.g. k0)");
  sub->add_option("-o,--output", opts->output, "Write here instead of stdout");
  sub->add_option("--device", opts->device, "Compile for this device (default: cpu; opencl:0 with --target opencl)");
  return {sub, [opts]() {
            const Graph g = load_graph(opts->file);
            Backend& backend = backend_for(*opts);
            Compilation c = compile_graph(backend, g);
            std::string out;
            bool found = opts->kernel.empty();
            if (opts->target == "kernel") {
              if (!opts->kernel.empty()) {  // that kernel, its accesses and schedule alone
                LaunchPlan one;
                for (size_t i = 0; i < c.plan.kernels.size(); ++i)
                  if (c.plan.kernels[i].name == opts->kernel) {
                    one.kernels.push_back(c.plan.kernels[i]);
                    one.schedules.push_back(c.plan.schedules[i]);
                    found = true;
                  }
                const std::string text = one.str();
                out = text.substr(0, text.find("launch list:"));
              } else {
                out = c.plan.str();
              }
            } else if (opts->target == "opencl") {
              // The program as the device builds it: every kernel of the plan in one.
              std::vector<const kir::Kernel*> kernels;
              std::vector<const kir::Schedule*> schedules;
              for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
                if (!opts->kernel.empty() && c.plan.kernels[i].name != opts->kernel) continue;
                found = true;
                kernels.push_back(&c.plan.kernels[i]);
                schedules.push_back(&c.plan.schedules[i]);
              }
              if (!kernels.empty()) out = kir::opencl_source(kernels, schedules, backend.capabilities());
              // GEMM steps: a program each, with the epilogue the device computes in its
              // registers (gemm_with_epilogue) when the step has one.
              for (size_t i = 0; i < c.plan.steps.size(); ++i) {
                const LaunchPlan::Step& step = c.plan.steps[i];
                if (step.kernel >= 0) continue;
                const LaunchPlan::Gemm& gs = step.gemm;
                const bool fused = gemm_epilogue_iterations_per_row(c.plan, i) > 0;
                const kir::Kernel* epilogue = fused ? &c.plan.kernels[static_cast<size_t>(c.plan.steps[i + 1].kernel)] : nullptr;
                if (!opts->kernel.empty() && !(epilogue && epilogue->name == opts->kernel)) continue;
                found = true;
                std::optional<kir::GemmEpilogueSource> source;
                if (epilogue) {
                  const auto& b = c.plan.steps[i + 1].bindings;
                  source.emplace(kir::GemmEpilogueSource{
                      *epilogue, static_cast<int32_t>(std::find(b.begin(), b.end(), gs.c) - b.begin())});
                  if (source->product_param == static_cast<int32_t>(b.size())) source->product_param = -1;
                }
                out += fmt::format("// ---- gemm buf{} = buf{} x buf{}{} ----\n", gs.c, gs.a, gs.b,
                                   epilogue ? fmt::format(", epilogue @{} in registers", epilogue->name) : "");
                out += kir::opencl_gemm_source(gs, source ? &*source : nullptr,
                                               !epilogue || gemm_product_read_after_epilogue(c.plan, i), "gemm",
                                               backend.capabilities());
              }
            } else {
              out = fmt::format("; target: {}\n", cpu_target_description());
              for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
                const kir::Kernel& k = c.plan.kernels[i];
                if (!opts->kernel.empty() && k.name != opts->kernel) continue;
                found = true;
                out += fmt::format("; ---- kernel @{} ----\n", k.name);
                out += opts->assembly ? cpu_kernel_assembly(k, c.plan.schedules[i])
                                      : cpu_kernel_llvm_ir(k, c.plan.schedules[i], !opts->unoptimized);
              }
              // GEMM steps: the micro-kernel each runs (one per dtype and register tile).
              std::vector<std::string> shown;
              for (const LaunchPlan::Step& step : c.plan.steps) {
                if (step.kernel >= 0 || !opts->kernel.empty()) continue;
                const kir::GemmSchedule& s = step.gemm.schedule;
                const std::string what =
                    fmt::format("{} {}x{}, vector {}", dtype_name(step.gemm.dtype), s.mr, s.nr, s.vector_width);
                if (std::find(shown.begin(), shown.end(), what) != shown.end()) continue;
                shown.push_back(what);
                out += fmt::format("; ---- gemm micro-kernel {} ----\n", what);
                out += opts->assembly ? cpu_gemm_assembly(s, step.gemm.dtype)
                                      : cpu_gemm_llvm_ir(s, step.gemm.dtype, !opts->unoptimized);
              }
            }
            if (!found) throw Error(fmt::format("--kernel {}: no such kernel (see --target kernel)", opts->kernel));
            write_output(opts->output, out);
            return 0;
          }};
}

}  // namespace kiln::cli
