// Custom kernels: C and OpenCL C functions used as elementwise ops (kiln/ir/custom_kernel.h).
//
// DeviceCustom.* run on the device under test (ctest runs them again as opencl.* and vulkan.*):
// cpu takes both languages, OpenCL devices OpenCL C, Vulkan neither (a clear error).
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kiln/autotune/kernel_bench.h"
#include "kiln/codegen/variants.h"
#include "kiln/frontend/custom_op.h"
#include "kiln/ir/custom_kernel.h"
#include "kiln/passes/pass_manager.h"
#include "test_util.h"

namespace kiln {
namespace {

// tanh-approximated GELU, its polynomial evaluated by a loop that UNROLL regroups without
// changing the order of any operation. One text for both languages.
const char* const kGelu = R"(#ifdef __OPENCL_C_VERSION__
#define tanhf tanh
#endif
#ifndef __OPENCL_C_VERSION__
#include <math.h>
#endif
float gelu(float x) {
  const float c[4] = {0.0f, 0.7978845608f, 0.0f, 0.0356774081f};
  float poly = 0.0f, power = 1.0f;
  for (int k = 0; k < 4; k += UNROLL)
    for (int u = 0; u < UNROLL; ++u) {
      poly += c[k + u] * power;
      power *= x;
    }
  return 0.5f * x * (1.0f + tanhf(poly));
}
)";
const char* const kSignature = "(f32) -> f32 tunable UNROLL = [1, 2, 4] default 2";

bool takes(const Device& d, CustomLanguage l) {
  if (d.kind == Device::Kind::Cpu || d.kind == Device::Kind::Interp) return true;
  return d.kind == Device::Kind::OpenCL && l == CustomLanguage::OpenCLC;
}

// A declaration line for IR text.
std::string declare(CustomLanguage l, const std::string& name, const std::string& sig, const std::string& source) {
  auto k = make_custom_kernel(name, l, source, "", *CustomSignature::parse(sig));
  EXPECT_TRUE(k) << k.error().str();
  return custom_declaration(**k) + "\n";
}

// `text` on the device under test against the interpreter, elementwise within `rtol`; on a
// device that cannot compile `language`, the error that says so.
void expect_matches_interpreter(const std::string& text, CustomLanguage language, double rtol) {
  const Graph g = test::parse_or_fail(text);
  const Device d = test::device_under_test();
  if (!takes(d, language)) {
    try {
      test::run_on_device_under_test(g, {});
      ADD_FAILURE() << d.str() << " ran a custom kernel it has no compiler for";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("which this device cannot compile"), std::string::npos) << e.what();
    }
    return;
  }
  register_custom_host();
  const std::vector<HostTensor> want = interpret(g, std::vector<HostTensor>{});
  const std::vector<HostTensor> got = test::run_on_device_under_test(g, {});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].type(), want[o].type());
    int bad = 0;
    for (int64_t k = 0; k < want[o].numel(); ++k) {
      const double w = is_float(want[o].dtype()) ? want[o].get_double(k) : static_cast<double>(want[o].get_int(k));
      const double v = is_float(got[o].dtype()) ? got[o].get_double(k) : static_cast<double>(got[o].get_int(k));
      if (std::fabs(w - v) <= rtol * (1 + std::fabs(w))) continue;
      if (++bad <= 5) ADD_FAILURE() << "output " << o << " element " << k << ": " << d.str() << " " << v << ", interpreter " << w;
    }
  }
}

std::string gelu_graph(CustomLanguage l) {
  return declare(l, "gelu", kSignature, kGelu) + R"(
graph @g() -> (f32[33,100], f32[33]) {
  %r = rand {seed = 5} : f32[33,100]
  %k60 = constant {value = 60.0} : f32[]
  %k30 = constant {value = 30.0} : f32[]
  %x = mul %r, %k60 : f32[33,100]
  %c = sub %x, %k30 : f32[33,100]
  %b = rand {seed = 6} : f32[100]
  %s = add %c, %b : f32[33,100]
  %y = custom @gelu(%s) : f32[33,100]
  %z = sub %y, %c : f32[33,100]
  %m = reduce_sum %z {axes = [1]} : f32[33]
  return %z, %m
}
)";
}

TEST(InterpreterCustom, RunsTheFunctionOnEveryBroadcastElement) {
  const std::string text = declare(CustomLanguage::C, "lerp", "(f32, f32, f64) -> f64",
                                   "double lerp(float a, float b, double t) { return a + (b - a) * t; }") +
                           R"(
graph @g() -> f64[2,3] {
  %a = constant {data = [1.0, 2.0, 3.0]} : f32[3]
  %b = constant {data = [10.0, 20.0]} : f32[2,1]
  %t = constant {value = 0.25} : f64[]
  %y = custom @lerp(%a, %b, %t) : f64[2,3]
  return %y
}
)";
  const HostTensor y = test::run(text).at(0);
  const double want[] = {3.25, 4.0, 4.75, 5.75, 6.5, 7.25};
  for (int k = 0; k < 6; ++k) EXPECT_DOUBLE_EQ(y.get_double(k), want[k]) << k;
}

TEST(InterpreterCustom, BoolAndIntegerTypesPassByValue) {
  const std::string text =
      declare(CustomLanguage::C, "pick", "(bool, i32, i64) -> i64",
              "long pick(_Bool c, int a, long b) { return c ? (long)a * 3 : b - 1; }") +
      R"(
graph @g() -> i64[4] {
  %c = constant {data = [true, false, true, false]} : bool[4]
  %a = constant {data = [1, -2, 2147483647, 4]} : i32[4]
  %b = constant {data = [10, 20, 30, -9223372036854775807]} : i64[4]
  %y = custom @pick(%c, %a, %b) : i64[4]
  return %y
}
)";
  const HostTensor y = test::run(text).at(0);
  EXPECT_EQ(y.get_int(0), 3);
  EXPECT_EQ(y.get_int(1), 19);
  EXPECT_EQ(y.get_int(2), 6442450941);
  EXPECT_EQ(y.get_int(3), std::numeric_limits<int64_t>::min());
}

TEST(DeviceCustom, CFunctionFusedWithItsNeighbours) {
  expect_matches_interpreter(gelu_graph(CustomLanguage::C), CustomLanguage::C, 1e-5);
}

TEST(DeviceCustom, OpenCLCFunctionFusedWithItsNeighbours) {
  expect_matches_interpreter(gelu_graph(CustomLanguage::OpenCLC), CustomLanguage::OpenCLC, 1e-5);
}

// The builtins kiln defines for OpenCL C on cpu, against the device's own where it has them.
TEST(DeviceCustom, OpenCLCBuiltins) {
  const std::string text = declare(CustomLanguage::OpenCLC, "mix3", "(f32, i32) -> f32", R"(
float mix3(float x, int n) {
  float a = clamp(x, -2.0f, 2.0f) + rsqrt(1.0f + x * x) + mad(x, 0.5f, 1.0f);
  float b = pow(fabs(x) + 1.0f, 0.5f) + atan2(x, 3.0f) + floor(x) + fmin(x, 0.25f);
  int m = clamp(n, -3, 3) + max(n, 1) + abs(n);
  return a + b + sqrt(fabs(x)) + log1p(fabs(x)) + tanh(x) + (float)m;
})") + R"(
graph @g() -> f32[7,50] {
  %r = rand {seed = 9} : f32[7,50]
  %k10 = constant {value = 10.0} : f32[]
  %k5 = constant {value = 5.0} : f32[]
  %x = mul %r, %k10 : f32[7,50]
  %c = sub %x, %k5 : f32[7,50]
  %i = arange {start = -25, step = 1} : i32[50]
  %y = custom @mix3(%c, %i) : f32[7,50]
  return %y
}
)";
  expect_matches_interpreter(text, CustomLanguage::OpenCLC, 1e-5);
}

// No calls, no loops: on cpu the vector loop runs it widened (CustomKernel.*Widened below).
std::string hinge_graph(CustomLanguage l) {
  const char* c = "float hinge(float x, _Bool m, int k) { return m ? x * (float)k : (x > 0.0f ? x : -0.5f * x); }";
  const char* cl = "float hinge(float x, bool m, int k) { return m ? x * (float)k : (x > 0.0f ? x : -0.5f * x); }";
  return declare(l, "hinge", "(f32, bool, i32) -> f32", l == CustomLanguage::C ? c : cl) + R"(
graph @g() -> f32[8,100] {
  %r = rand {seed = 11} : f32[8,100]
  %h = constant {value = 0.5} : f32[]
  %x = sub %r, %h : f32[8,100]
  %q = rand {seed = 12} : f32[8,100]
  %m = gt %q, %h : bool[8,100]
  %k = arange {start = -50, step = 1} : i32[100]
  %y = custom @hinge(%x, %m, %k) : f32[8,100]
  return %y
}
)";
}

TEST(DeviceCustom, BranchyFunctionOfFloatBoolAndInt) {
  const Device d = test::device_under_test();
  const CustomLanguage l = d.kind == Device::Kind::OpenCL ? CustomLanguage::OpenCLC : CustomLanguage::C;
  expect_matches_interpreter(hinge_graph(l), l, 0);
}

// Every value of a tunable macro is a knob value the tuner may pick; each computes the same.
TEST(DeviceCustom, TunableMacroIsAKnobAndEveryValueAgrees) {
  const Device d = test::device_under_test();
  const CustomLanguage l = d.kind == Device::Kind::OpenCL ? CustomLanguage::OpenCLC : CustomLanguage::C;
  if (!takes(d, l)) GTEST_SKIP() << d.str() << " compiles no custom kernels";
  Backend& b = *engine_for(d).backend();
  const Graph g = test::parse_or_fail(gelu_graph(l));
  const LaunchPlan plan = compile_graph(b.capabilities(), b.extra_passes(), g).plan;
  int tried = 0;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const kir::Kernel& k = plan.kernels[i];
    if (k.customs.empty()) continue;
    const std::vector<kir::Knob> knobs = kir::schedule_knobs(k, plan.schedules[i], b.capabilities());
    const auto knob = std::find_if(knobs.begin(), knobs.end(), [](const kir::Knob& n) { return n.name == "gelu.UNROLL"; });
    ASSERT_NE(knob, knobs.end());
    EXPECT_EQ(knob->values, (std::vector<int64_t>{1, 2, 4}));
    autotune::KernelBench bench(b, k);
    const std::vector<std::string> want = bench.outputs(*b.compile(k, plan.schedules[i]), plan.schedules[i]);
    for (int64_t v : knob->values) {
      kir::Variant variant;
      variant.settings.emplace_back("gelu.UNROLL", v);
      const std::optional<kir::Schedule> s = kir::apply_variant(k, plan.schedules[i], variant, b.capabilities());
      ASSERT_TRUE(s);
      EXPECT_EQ(s->str() == plan.schedules[i].str(), v == 2) << "UNROLL=" << v << " is part of the schedule's key";
      const std::optional<std::string> diff =
          autotune::compare_outputs(k, want, bench.outputs(*b.compile(k, *s), *s));
      EXPECT_FALSE(diff) << "UNROLL=" << v << ": " << *diff;
      ++tried;
    }
  }
  EXPECT_EQ(tried, 3);
}

// Kernels compiled together that want one custom kernel with different macro values each get
// theirs: on opencl:0 they went into one program with the first kernel's values (a program
// holds the source once), so a variant was timed with another's code.
TEST(DeviceCustom, KernelsCompiledTogetherKeepTheirOwnMacroValues) {
  const Device d = test::device_under_test();
  if (!takes(d, CustomLanguage::OpenCLC)) GTEST_SKIP() << d.str() << " compiles no custom kernels";
  Backend& b = *engine_for(d).backend();
  // M changes the result here (a tunable must not), so that the code each kernel ran shows.
  const std::string text = declare(CustomLanguage::OpenCLC, "scale", "(f32) -> f32 tunable M = [1, 2]",
                                   "float scale(float x) { return x * (float)M; }") +
                           "graph @g(%x: f32[64]) -> f32[64] {\n  %y = custom @scale(%x) : f32[64]\n  return %y\n}\n";
  const LaunchPlan plan = compile_graph(b.capabilities(), b.extra_passes(), test::parse_or_fail(text)).plan;
  ASSERT_EQ(plan.kernels.size(), 1u);
  const kir::Kernel& k = plan.kernels[0];
  std::vector<kir::Schedule> schedules(2, plan.schedules[0]);
  schedules[1].custom_macros = {2};
  const std::vector<kir::Kernel> kernels = {k, k};
  const auto compiled = b.compile_all(kernels, schedules);
  autotune::KernelBench bench(b, k);
  const std::vector<std::string> one = bench.outputs(*compiled[0], schedules[0]);
  const std::vector<std::string> two = bench.outputs(*compiled[1], schedules[1]);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].size(), 64 * sizeof(float));
  for (size_t i = 0; i < 64; ++i) {
    float a = 0, c = 0;
    std::memcpy(&a, one[0].data() + 4 * i, 4);
    std::memcpy(&c, two[0].data() + 4 * i, 4);
    EXPECT_EQ(c, 2 * a) << "element " << i;
  }
}

TEST(CustomKernel, SignatureParsesAndPrints) {
  const auto s = CustomSignature::parse("(f32, i64,bool) -> f64 tunable A = [4, 1] tunable B = [2, 3] default 3");
  ASSERT_TRUE(s) << s.error().str();
  EXPECT_EQ(s->params, (std::vector<DType>{DType::F32, DType::I64, DType::Bool}));
  EXPECT_EQ(s->result, DType::F64);
  ASSERT_EQ(s->tunables.size(), 2u);
  EXPECT_EQ(s->tunables[0].default_value, 4);
  EXPECT_EQ(s->tunables[1].default_value, 3);
  EXPECT_EQ(s->str(), "(f32, i64, bool) -> f64 tunable A = [4, 1] tunable B = [2, 3] default 3");
  EXPECT_EQ(CustomSignature::parse(s->str())->str(), s->str());
}

TEST(CustomKernel, BadSignaturesAndDefinitionsAreErrors) {
  auto message = [](std::string_view sig) {
    auto s = CustomSignature::parse(sig);
    return s ? std::string("parsed") : s.error().message;
  };
  EXPECT_EQ(message("(f32) f32"), "custom kernel signature, column 7: expected '->' and the result type, found 'f32'");
  EXPECT_EQ(message("(f16) -> f32"),
            "custom kernel signature, column 2: expected an element type (bool, i32, i64, f32, f64), found 'f16'");
  EXPECT_EQ(message("(f32) -> f32 tunable U = []"), "custom kernel signature, column 27: expected an integer, found ']'");
  auto define = [](std::string name, std::string_view sig) {
    auto k = make_custom_kernel(std::move(name), CustomLanguage::C, "", "", *CustomSignature::parse(sig));
    return k ? std::string("ok") : k.error().message;
  };
  EXPECT_EQ(define("soft-plus", "(f32) -> f32"),
            "custom kernel @soft-plus: its name must be a C identifier (the function's name in its source)");
  EXPECT_EQ(define("f", "() -> f32"), "custom kernel @f: its signature needs at least one parameter");
  EXPECT_EQ(define("kiln_max_f32", "(f32) -> f32"),
            "custom kernel @kiln_max_f32: names starting with kiln_ are kiln's own (its helpers and entry points)");
  EXPECT_EQ(define("f", "(f32) -> f32 tunable U = [1, 2] default 4"),
            "custom kernel @f: tunable U's default 4 is not one of its values [1, 2]");
  EXPECT_EQ(define("f", "(f32) -> f32 tunable U = [1] tunable U = [2]"), "custom kernel @f: tunable U is declared twice");
}

std::string custom_op_error(CustomSource source, std::string_view signature, std::string name = "f") {
  try {
    custom_op(std::move(name), std::move(source), signature);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CustomKernel, ClangDiagnosticsPointIntoTheSource) {
  EXPECT_EQ(custom_op_error(CustomSource::c("float f(float x) {\n  return x + y;\n}\n", "kernels/f.c"), "(f32) -> f32"),
            "custom kernel @f: Clang rejected its C source:\nkernels/f.c:2:14: error: use of undeclared identifier 'y'");
  EXPECT_EQ(custom_op_error(CustomSource::opencl("float f(float x) {\n  return x +;\n}\n"), "(f32) -> f32"),
            "custom kernel @f: Clang rejected its OpenCL C source:\nf.cl:2:13: error: expected expression");
  // A tunable value that breaks the source is found when the op is registered, not when tuned.
  EXPECT_EQ(custom_op_error(CustomSource::c("float f(float x) {\n  float a[U];\n  return x + a[0];\n}\n"),
                            "(f32) -> f32 tunable U = [1, -1]"),
            "custom kernel @f: Clang rejected its C source:\nf.c:2:11: error: 'a' declared as an array with a negative size");
}

TEST(CustomKernel, FunctionMustExistWithTheSignaturesTypes) {
  EXPECT_EQ(custom_op_error(CustomSource::c("float g(float x) { return x; }"), "(f32) -> f32"),
            "custom kernel @f: f.c defines no external function 'f' (a static one is not visible)");
  EXPECT_EQ(custom_op_error(CustomSource::c("double f(float x, int n) { return x * n; }"), "(f32, i64) -> f64"),
            "custom kernel @f: its signature is (f32, i64) -> f64, but f.c's function f is double (float, i32)");
  EXPECT_EQ(custom_op_error(CustomSource::opencl("float4 f(float4 x) { return sin(x); }"), "(f32) -> f32"),
            "custom kernel @f: its signature is (f32) -> f32, but f.cl's function f is <4 x float> (<4 x float>)");
  EXPECT_EQ(custom_op_error(CustomSource::opencl("float f(float x) { return sin(x).x; }"), "(f32) -> f32").substr(0, 60),
            "custom kernel @f: Clang rejected its OpenCL C source:\nf.cl:1");
}

TEST(CustomKernel, OperandsMustHaveTheParametersTypes) {
  const CustomOp f = custom_op("f", CustomSource::c("float f(float x, float y) { return x * y; }"), "(f32, f32) -> f32");
  const Tensor x = zeros({2, 3});
  try {
    (void)f(x, zeros({3}, DType::F64));
    ADD_FAILURE() << "an f64 operand was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "custom @f: custom @f: operand 2 is f64[3] but its signature (f32, f32) -> f32 wants f32 (cast it)");
  }
  try {
    (void)f(x);
    ADD_FAILURE() << "one operand was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "custom @f: custom @f takes 2 operands ((f32, f32) -> f32), got 1");
  }
  const std::vector<float> y = f(x + 2.0f, full({3}, 1.5)).to_vector<float>();
  EXPECT_EQ(y, std::vector<float>(6, 3.0f));
}

TEST(CustomKernel, TextRoundTripsWithTheSourceInline) {
  const std::string text = gelu_graph(CustomLanguage::C);
  const Graph g = test::parse_or_fail(text);
  const std::string printed = print_graph(g);
  EXPECT_EQ(printed.substr(0, printed.find('\n')), text.substr(0, text.find('\n')));
  EXPECT_NE(printed.find("%y = custom @gelu(%s) : f32[33,100]"), std::string::npos) << printed;
  EXPECT_EQ(print_graph(test::parse_or_fail(printed)), printed);
  auto undeclared = parse_graph("graph @g(%x: f32[2]) -> f32[2] {\n  %y = custom @nope(%x) : f32[2]\n  return %y\n}\n", "u.kir");
  ASSERT_FALSE(undeclared);
  EXPECT_EQ(undeclared.error().str(),
            "u.kir:2:15: error: custom kernel @nope is not declared (declare it before the graph: custom c @nope(f32) -> "
            "f32 file \"nope.c\")");
}

// The kernel caches key a kernel by its text: the source's digest is in it, so an edited
// source is a new kernel (and the cpu backend's fingerprint names Clang's version).
TEST(CustomKernel, KernelKeyHoldsTheSourceDigest) {
  auto kernel_text = [](const std::string& body) {
    const std::string text = declare(CustomLanguage::C, "f", "(f32) -> f32", "float f(float x) { return " + body + "; }") +
                             "graph @g(%x: f32[8]) -> f32[8] {\n  %y = custom @f(%x) : f32[8]\n  return %y\n}\n";
    const Graph g = test::parse_or_fail(text);
    const LaunchPlan plan = compile_graph(cpu_backend().capabilities(), {}, g).plan;
    EXPECT_EQ(plan.kernels.size(), 1u);
    return plan.kernels.at(0).str(/*names=*/false);
  };
  const std::string a = kernel_text("x + 1.0f"), b = kernel_text("x + 2.0f");
  EXPECT_NE(a, b);
  EXPECT_EQ(a, kernel_text("x + 1.0f"));
  EXPECT_NE(a.find("custom @f = c "), std::string::npos) << a;
  EXPECT_NE(cpu_backend().device_fingerprint().size(), 0u);
}

// A function without calls or loops becomes vector code in the kernel's vector loop; one
// that calls libm stays one call per lane.
TEST(CustomKernel, StraightLineFunctionIsWidenedOnCpu) {
  for (CustomLanguage l : {CustomLanguage::C, CustomLanguage::OpenCLC}) {
    const Graph g = test::parse_or_fail(hinge_graph(l));
    const Compilation c = compile_graph(cpu_backend(), g);
    ASSERT_EQ(c.plan.kernels.size(), 1u);
    if (c.plan.schedules[0].vector_width == 1) GTEST_SKIP() << "this host's kernels are scalar";
    const std::string ir = cpu_kernel_llvm_ir(c.plan.kernels[0], c.plan.schedules[0]);
    const std::string widened = fmt::format("fmul <{} x float>", c.plan.schedules[0].vector_width);
    EXPECT_NE(ir.find(widened), std::string::npos) << ir;
    EXPECT_EQ(ir.find("call float @"), std::string::npos) << ir;
  }
}

// A builtin kiln does not define on cpu is refused where cpu compiles a kernel calling it,
// not when the op is registered: OpenCL devices have it.
TEST(CustomKernel, VectorBuiltinsOfOpenCLCAreRefusedOnCpuOnly) {
  const CustomOp dotself = custom_op(
      "dotself", CustomSource::opencl("float dotself(float x) { float2 v = (float2)(x, 1.0f); return dot(v, v); }"),
      "(f32) -> f32");
  try {
    (void)dotself(ones({4}).to(Device::cpu())).to_vector<float>();
    ADD_FAILURE() << "cpu ran an OpenCL builtin it does not define";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, 80),
              "custom kernel @dotself: OpenCL builtin 'dot' (_Z3dotDv2_fS_) cannot run on cpu: ");
  }
}

TEST(CustomKernel, ANameRegistersOneKernel) {
  const CustomSource source = CustomSource::c("float twice(float x) { return 2.0f * x; }");
  (void)custom_op("twice", source, "(f32) -> f32");
  EXPECT_NO_THROW((void)custom_op("twice", source, "(f32) -> f32"));
  EXPECT_EQ(custom_op_error(CustomSource::c("float twice(float x) { return x + x; }"), "(f32) -> f32", "twice"),
            "custom_op(\"twice\"): a custom kernel of that name with another source or signature is registered "
            "already; give this one another name");
}

}  // namespace
}  // namespace kiln
