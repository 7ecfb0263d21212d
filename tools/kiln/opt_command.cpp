// tools/kiln/opt_command.cpp - `kiln opt`: parse, verify, optimize and print IR.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/ir/symbolic.h"
#include "kiln/ir/text.h"
#include "kiln/passes/memory_plan.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::cli {
namespace {

struct OptOptions {
  std::string input;
  std::string output;
  bool split = false;
  int level = -1;
  std::string passes;
  bool print_after_all = false;
  bool stats = false;
  bool fast_math = false;
  bool list_passes = false;
  bool memory_plan = false;
  std::string donate;  // comma-separated parameter names
  std::vector<std::string> bind;  // NAME=SIZE
};

// The --bind sizes, each NAME=SIZE.
DimBindings parse_bindings(const std::vector<std::string>& specs) {
  DimBindings b;
  for (const std::string& spec : specs) {
    auto [name, value] = split_spec(spec, "--bind");
    if (!is_dim_symbol_name(name)) throw Error(fmt::format("error: --bind: '{}' is not a size's name", name));
    if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)
      throw Error(fmt::format("error: --bind: {} = '{}' is not a size (a number >= 0)", name, value));
    b[name] = std::stoll(value);
  }
  return b;
}

std::string stats_line(std::string_view when, const GraphStats& s) {
  return fmt::format("// {}: {} nodes, {} kernels, {} bytes moved (estimate)\n", when, s.nodes, s.kernels,
                     s.bytes_moved);
}

// Runs the requested passes on one graph; diagnostics and dumps go to stderr.
Expected<Graph> optimize(Graph g, const OptOptions& opts, const std::vector<const PassInfo*>& passes) {
  if (!opts.bind.empty()) {
    Expected<Graph> bound = specialize(g, parse_bindings(opts.bind));
    if (!bound) return bound.error();
    g = std::move(*bound);
  }
  const GraphStats before = opts.stats ? graph_stats(g) : GraphStats{};
  PipelineOptions pipeline;
  pipeline.verify_each = true;  // cheap, and it names the pass that broke an invariant
  if (opts.print_after_all)
    pipeline.after_each = [](const PassInfo& p, const Graph& after) {
      std::cerr << fmt::format("// -----// IR after {} //----- //\n", p.name) << print_graph(after);
    };
  PassOptions options;
  options.fast_math = opts.fast_math;
  auto out = run_pipeline(std::move(g), passes, options, pipeline);
  if (out && opts.stats) std::cerr << stats_line("before", before) << stats_line("after", graph_stats(*out));
  if (out && opts.memory_plan) {
    std::vector<bool> donated(out->inputs().size(), false);
    std::vector<std::string> names;
    for (size_t at = 0; at < opts.donate.size();) {
      const size_t comma = std::min(opts.donate.find(',', at), opts.donate.size());
      if (comma > at) names.push_back(opts.donate.substr(at, comma - at));
      at = comma + 1;
    }
    for (const std::string& name : names) {
      const std::string bare = name.starts_with("%") ? name.substr(1) : name;
      bool found = false;
      for (size_t i = 0; i < out->inputs().size(); ++i)
        if (out->node(out->inputs()[i]).name == bare) donated[i] = found = true;
      if (!found) return make_error(fmt::format("--donate names '{}', which is not a parameter of @{}", name, out->name()));
    }
    std::cerr << plan_memory(*out, donated).str(*out);
  }
  return out;
}

}  // namespace

Command add_opt_command(CLI::App& app) {
  auto opts = std::make_shared<OptOptions>();
  CLI::App* sub = app.add_subcommand("opt", "Parse, verify, optimize and print an IR file.");
  sub->add_option("file", opts->input, "IR file, or - for stdin");
  sub->add_option("-o,--output", opts->output, "Write the result here instead of stdout");
  sub->add_option("-O", opts->level, "Optimization level: 0 (none), 1 (clean-up), 2 (everything)")
      ->check(CLI::Range(0, 2));
  sub->add_option("--passes", opts->passes, "Run these passes in order, e.g. cse,dce (see --list-passes)");
  sub->add_flag("--print-after-all", opts->print_after_all, "Print the IR to stderr after every pass");
  sub->add_flag("--stats", opts->stats, "Print node, kernel and bytes-moved counts before and after, to stderr");
  sub->add_flag("--fast-math", opts->fast_math,
                "Allow rewrites that change NaN/inf behaviour (x*0 -> 0, exp(log x) -> x)");
  sub->add_flag("--list-passes", opts->list_passes, "List the passes and the -O pipelines, then exit");
  sub->add_flag("--memory-plan", opts->memory_plan,
                "Print the buffer assignment (reuse, in-place writes) after the passes, to stderr");
  sub->add_option("--donate", opts->donate,
                  "With --memory-plan: parameters whose buffers the execution may overwrite")
      ->type_name("NAME[,NAME...]");
  sub->add_option("--bind", opts->bind,
                  "Give a symbolic dim's size before the passes, which work on sizes (repeatable)")
      ->type_name("NAME=SIZE");
  sub->add_flag("--split-input-file", opts->split,
                "Treat each chunk between '// -----' lines as its own graph; report every "
                "chunk's error and exit 1 if any failed");
  return {sub, [opts]() {
            if (opts->list_passes) {
              std::string out;
              for (const PassInfo& p : all_passes()) out += fmt::format("{:<14} {}\n", p.name, p.summary);
              for (int level = 1; level <= 2; ++level) {
                std::vector<std::string_view> names;
                for (const PassInfo* p : pipeline_for_level(level)) names.push_back(p->name);
                out += fmt::format("-O{}: {}\n", level, fmt::join(names, ","));
              }
              write_output(opts->output, out);
              return 0;
            }
            if (opts->input.empty()) throw Error("error: kiln opt needs an input file (or - for stdin)");
            if (opts->level >= 0 && !opts->passes.empty())
              throw Error("error: give either -O or --passes, not both");
            const std::vector<const PassInfo*> passes =
                opts->passes.empty() ? pipeline_for_level(std::max(opts->level, 0))
                                     : parse_pipeline(opts->passes).take();
            if (!opts->split) {
              write_output(opts->output, print_graph(optimize(load_graph(opts->input), *opts, passes).take()));
              return 0;
            }
            const std::string text = read_input(opts->input);
            const std::string file = opts->input == "-" ? "<stdin>" : opts->input;
            std::string out;
            bool failed = false;
            for (const TextChunk& chunk : split_input(text)) {
              auto g = parse_graph(chunk.text, file, chunk.first_line);
              if (g) g = optimize(std::move(*g), *opts, passes);
              if (g) {
                if (!out.empty()) out += "// -----\n";
                out += print_graph(*g);
              } else {
                std::cerr << g.error().str() << "\n";
                failed = true;
              }
            }
            write_output(opts->output, out);
            return failed ? 1 : 0;
          }};
}

}  // namespace kiln::cli
