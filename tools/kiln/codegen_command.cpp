// tools/kiln/codegen_command.cpp - `kiln codegen`: what a backend generates for an IR file.
#include <algorithm>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/backends/cpu.h"
#include "kiln/backends/vulkan.h"
#include "kiln/codegen/c_source.h"
#include "kiln/codegen/variants.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/spelling.h"

namespace kiln::cli {
namespace {

struct CodegenOptions {
  std::string file;
  std::string target = "llvm";
  bool assembly = false;
  bool unoptimized = false;
  std::string kernel;
  std::string custom;
  std::string output;
  std::string device;  // default: cpu, opencl:0 for --target opencl, a reference GPU for glsl|spirv
  std::string variant;  // knob settings applied to every kernel shown ("" for none)
};

// Every kernel of `plan` (only `only` when not empty) run with `variant`'s settings over its
// schedule: an error names the first kernel that lacks one of the knobs or values, with the
// knobs it has.
void apply_variant_to(LaunchPlan& plan, const std::string& only, const std::string& variant, const Capabilities& caps) {
  const std::optional<kir::Variant> v = kir::Variant::parse(variant);
  if (!v) throw Error(fmt::format("--variant '{}': expected knob=value settings, sorted by name, separated by spaces "
                                  "(`local_size=64 vector_width=4`)", variant));
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const kir::Kernel& k = plan.kernels[i];
    if (!only.empty() && k.name != only) continue;
    std::optional<kir::Schedule> s = kir::apply_variant(k, plan.schedules[i], *v, caps);
    if (!s) {
      std::vector<std::string> knobs;
      std::vector<std::string_view> names;
      const std::vector<kir::Knob> all = kir::schedule_knobs(k, plan.schedules[i], caps);
      for (const kir::Knob& knob : all) {
        std::vector<std::string> values;  // as a variant spells them: pipeline={lean,o2}
        for (int64_t value : knob.values) {
          const std::string one = kir::Variant{{{knob.name, value}}}.str();
          values.push_back(one.substr(one.find('=') + 1));
        }
        knobs.push_back(fmt::format("{}={{{}}}", knob.name, fmt::join(values, ",")));
        names.push_back(knob.name);
      }
      std::string hint;
      for (const auto& [name, value] : v->settings)
        if (std::find(names.begin(), names.end(), name) == names.end()) hint += did_you_mean(name, names);
      throw Error(fmt::format("--variant '{}' does not apply to kernel @{} on this device{}: its knobs are {}", variant,
                              k.name, hint,
                              knobs.empty() ? std::string("none") : fmt::format("{}", fmt::join(knobs, " "))));
    }
    plan.schedules[i] = *s;
  }
}

// The backend whose code is shown: --device, or the first device of the kind whose registry
// row generates --target (cpu for `kernel`, which every device compiles).
Backend& backend_for(const CodegenOptions& o) {
  const DeviceKindInfo* generator = nullptr;
  for (const DeviceKindInfo& k : device_kinds())
    for (const DumpStage& stage : k.dump_stages)
      if (stage.name == o.target) generator = &k;
  Device d = Device::cpu();
  if (!o.device.empty()) {
    d = Device::parse(o.device);
  } else if (generator) {
    d = Device::parse(generator->name);  // its first device; an error naming those there are when it has none
  }
  if (generator && &device_kind(d) != generator)
    throw Error(fmt::format("--target {} is generated for {}{} devices, not {}", o.target, generator->name,
                            generator->indexed ? ":N" : "", d.str()));
  Backend* b = engine_for(d).backend();
  if (!b) throw Error(fmt::format("{} generates no code (it interprets the graph)", d.str()));
  return *b;
}

// Each attention step of `plan` (with --kernel, the one of that kernel region).
template <typename Fn>
void for_each_attention(const LaunchPlan& plan, const std::string& only, bool& found, Fn&& fn) {
  for (const LaunchPlan::Step& step : plan.steps) {
    if (!step.attention || (!only.empty() && step.attention->name != only)) continue;
    found = true;
    fn(*step.attention);
  }
}

// Each GEMM step of `plan` with the epilogue computed in its registers (when it has one and
// it fits the loop budget of `caps`, as the device decides) and whether it stores the
// product; with --kernel, only the GEMM whose epilogue is that kernel.
template <typename Fn>
void for_each_gemm(const LaunchPlan& plan, const Capabilities& caps, const std::string& only, bool& found, Fn&& fn) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const LaunchPlan::Step& step = plan.steps[i];
    if (!step.is_gemm()) continue;
    std::optional<kir::GemmEpilogueSource> epilogue = kir::gemm_epilogue_source(plan, i);
    if (epilogue && !kir::gemm_epilogue_fits(step.gemm, *epilogue, caps)) epilogue.reset();
    if (!only.empty() && !(epilogue && epilogue->kernel.name == only)) continue;
    found = true;
    fn(step.gemm, epilogue ? &*epilogue : nullptr, !epilogue || gemm_product_read_after_epilogue(plan, i));
  }
}

std::string gemm_header(std::string_view comment, const LaunchPlan::Gemm& g, const kir::GemmEpilogueSource* epilogue) {
  return fmt::format("{} ---- gemm buf{} = buf{} x buf{}{} ----\n", comment, g.c, g.a, g.b,
                     epilogue ? fmt::format(", epilogue @{} in registers", epilogue->kernel.name) : "");
}

}  // namespace

Command add_codegen_command(CLI::App& app) {
  auto opts = std::make_shared<CodegenOptions>();
  CLI::App* sub = app.add_subcommand(
      "codegen", "Compile a graph as a device does (-O2, its passes, fusion, Kernel IR) and print the generated code.");
  sub->add_option("file", opts->file, "IR file, or - for stdin")->required();
  sub->add_option("--target", opts->target,
                  "What to print: kernel (Kernel IR and launch list), llvm (cpu), opencl (the OpenCL C program), "
                  "glsl or spirv (Vulkan compute shaders, for a reference GPU unless --device vulkan:N)")
      ->check(CLI::IsMember({"kernel", "llvm", "opencl", "glsl", "spirv"}))
      ->capture_default_str();
  sub->add_flag("--asm", opts->assembly, "With --target llvm: host assembly instead of LLVM IR");
  sub->add_flag("--no-opt", opts->unoptimized, "With --target llvm: LLVM IR as generated, before optimization");
  sub->add_option("--custom", opts->custom,
                  "With --target llvm: the LLVM IR Clang makes of custom kernel NAME's source (what kiln links "
                  "into the kernels that call it)");
  sub->add_option("--kernel", opts->kernel, "Only this kernel (by name, e.g. k0)");
  sub->add_option("--variant", opts->variant,
                  "Generate the kernels with these knob settings over their schedules, as the autotuner would "
                  "(`vector_width=4`, `elements_per_item=2 local_size=64`; docs/autotune.md)");
  sub->add_option("-o,--output", opts->output, "Write here instead of stdout");
  sub->add_option("--device", opts->device, "Compile for this device (default: cpu; opencl:0 with --target opencl; a reference GPU with "
                  "--target glsl|spirv)");
  return {sub, [opts]() {
            const Graph g = load_graph(opts->file);
            // Without --device, GLSL and SPIR-V are generated for a reference GPU: the same
            // text on every machine, Vulkan driver or not.
            const bool reference_gpu = (opts->target == "glsl" || opts->target == "spirv") && opts->device.empty();
            Compilation c;
            Capabilities caps;
            if (reference_gpu) {
              caps = vulkan::reference_capabilities();
              const PassInfo* split[] = {find_pass("split-reductions")};  // as on opencl
              c = compile_graph(caps, split, g);
            } else {
              Backend& backend = backend_for(*opts);
              caps = backend.capabilities();
              c = compile_graph(backend, g);
            }
            if (!opts->variant.empty()) apply_variant_to(c.plan, opts->kernel, opts->variant, caps);
            if (!opts->custom.empty() && opts->target != "llvm")
              throw Error(fmt::format("--custom shows LLVM IR: it goes with --target llvm, not --target {}", opts->target));
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
              // The programs as the device builds them: every kernel of the plan in one, unless
              // kernels want a custom kernel with other macro values (custom_macro_groups).
              std::vector<const kir::Kernel*> kernels;
              std::vector<const kir::Schedule*> schedules;
              for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
                if (!opts->kernel.empty() && c.plan.kernels[i].name != opts->kernel) continue;
                found = true;
                kernels.push_back(&c.plan.kernels[i]);
                schedules.push_back(&c.plan.schedules[i]);
              }
              for (const std::vector<size_t>& group : kir::custom_macro_groups(kernels, schedules)) {
                std::vector<const kir::Kernel*> ks;
                std::vector<const kir::Schedule*> ss;
                for (size_t member : group) ks.push_back(kernels[member]), ss.push_back(schedules[member]);
                out += kir::opencl_source(ks, ss, caps);
              }
              // GEMM steps: a program each, with the epilogue the device computes in its
              // registers (gemm_with_epilogue) when the step has one.
              for_each_gemm(c.plan, caps, opts->kernel, found, [&](const LaunchPlan::Gemm& gemm, const kir::GemmEpilogueSource* e, bool store) {
                out += gemm_header("//", gemm, e) + kir::opencl_gemm_source(gemm, e, store, "gemm", caps);
              });
              for_each_attention(c.plan, opts->kernel, found, [&](const LaunchPlan::Attention& a) {
                out += fmt::format("// ---- attention @{} ----\n", a.name) + kir::opencl_attention_source(a, "attention", caps);
              });
            } else if (opts->target == "glsl" || opts->target == "spirv") {
              // A module per kernel (GLSL has one entry point), then per GEMM step.
              const bool spirv = opts->target == "spirv";
              auto show = [&](const std::string& glsl, const std::string& name) {
                out += spirv ? vulkan::disassemble_spirv(vulkan::compile_glsl(glsl, name)) : glsl;
              };
              const char* comment = spirv ? ";" : "//";
              for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
                const kir::Kernel& k = c.plan.kernels[i];
                if (!opts->kernel.empty() && k.name != opts->kernel) continue;
                found = true;
                out += fmt::format("{} ---- kernel @{} ----\n", comment, k.name);
                show(kir::glsl_source(k, c.plan.schedules[i], caps), k.name);
              }
              for_each_gemm(c.plan, caps, opts->kernel, found, [&](const LaunchPlan::Gemm& gemm, const kir::GemmEpilogueSource* e, bool store) {
                out += gemm_header(comment, gemm, e);
                show(kir::glsl_gemm_source(gemm, e, store, caps), "gemm");
              });
              for_each_attention(c.plan, opts->kernel, found, [&](const LaunchPlan::Attention& a) {
                out += fmt::format("{} ---- attention @{} ----\n", comment, a.name);
                show(kir::glsl_attention_source(a, caps), "attention");
              });
            } else if (!opts->custom.empty()) {
              bool named = false;
              std::vector<std::string> names;
              for (const Node& n : c.fused.nodes()) {
                if (n.op != OpKind::Custom) continue;
                const CustomKernel& ck = *n.attrs[0].custom;
                if (ck.name != opts->custom) {
                  names.push_back("@" + ck.name);
                  continue;
                }
                named = true;
                out = fmt::format("; custom kernel @{} ({}, {}), as Clang compiles it\n{}", ck.name, ck.source_file,
                                  custom_language_name(ck.language), cpu_custom_kernel_llvm_ir(ck));
                break;
              }
              if (!named)
                throw Error(fmt::format("--custom {}: the graph calls no such custom kernel ({})", opts->custom,
                                        names.empty() ? "it calls none" : fmt::format("it calls {}", fmt::join(names, ", "))));
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
                if (!step.is_gemm() || !opts->kernel.empty()) continue;
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
