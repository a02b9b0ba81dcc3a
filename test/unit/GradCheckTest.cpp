//===- GradCheckTest.cpp - Finite-difference check of every gradient rule -===//
//
// For each `@case_*` function of gradcheck_cases.mlir: runs loom-autodiff on
// it (entry = the case), evaluates `@case_*_backward` with the reference
// interpreter in f64, and compares each parameter's gradient with central
// differences of the forward function. Inputs are random from a fixed seed
// per case (uniform in the argument's `gradcheck.range`, default [-1, 1];
// with `gradcheck.signed` a magnitude in the range and a random sign).
//
// The error metric is norm-based, so that exact zeros (relu below 0, floor)
// and finite-difference noise around them do not dominate:
//   |analytic - numeric|_2 / max(1e-8, |analytic|_2 + |numeric|_2) < 1e-6.
//
// A coverage test checks that every op registered in the loom dialect has a
// case (`@case_<op>` or `@case_<op>__<variant>`) or is on the explicit list
// of ops without a gradient below, so a new op without a case fails here.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/InitAll.h"
#include "loom/Interp/Interpreter.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

using namespace mlir;

namespace {

#ifndef LOOM_GRADCHECK_CASES
#error "LOOM_GRADCHECK_CASES must name gradcheck_cases.mlir"
#endif
constexpr const char *kCasesPath = LOOM_GRADCHECK_CASES;

/// Ops that carry no gradient, and why. Every other loom op needs a case.
const std::map<std::string, std::string> &nonDifferentiableOps() {
  static const std::map<std::string, std::string> ops = {
      {"compare", "boolean result"},
      {"constant", "no operands"},
      {"random", "its only operand is the integer seed"},
      {"max_pool2d_argmax", "integer result"},
      {"stop_gradient", "blocks gradients by definition (finite differences "
                        "see the identity)"},
      // Collectives combine several ranks' values; this harness runs one.
      {"all_reduce", "several ranks: test/Interp/collective-gradients.test "
                     "checks its rule on 2 interpreted ranks"},
      {"all_gather", "several ranks: test/Interp/collective-gradients.test"},
      {"reduce_scatter",
       "several ranks: test/Interp/collective-gradients.test"},
      {"rank_slice", "no gradient rule (a rank-dependent offset): an error"},
      {"attention_grad", "second derivatives of attention are refused "
                         "(its rule is an error)"},
      {"linear_cross_entropy_grad",
       "second derivatives of the fused LM head are refused (its rule is "
       "an error)"},
  };
  return ops;
}

constexpr double kRelativeStep = 1e-6;
constexpr double kTolerance = 1e-6;

std::string readCases() {
  std::ifstream in(kCasesPath);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Case names, found by scanning the text (test registration happens before
/// any MLIR context exists).
std::vector<std::string> caseNames() {
  std::vector<std::string> names;
  std::string text = readCases();
  std::regex def(R"(func\.func @(case_[A-Za-z0-9_]+)\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), def);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

/// Deterministic uniform doubles in [0, 1) (splitmix64), the same on every
/// platform.
struct Random {
  uint64_t state;
  explicit Random(uint64_t seed) : state(seed) {}
  double next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

uint64_t hashName(const std::string &name) {
  uint64_t h = 1469598103934665603ULL; // FNV-1a
  for (char c : name)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

/// Parses the cases with the loom dialect and everything Loom's tools load;
/// collects diagnostics into `diagnostics`.
struct Fixture {
  MLIRContext context;
  std::string diagnostics;
  std::unique_ptr<ScopedDiagnosticHandler> handler;
  OwningOpRef<ModuleOp> module;

  Fixture() {
    DialectRegistry registry;
    loom::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    handler = std::make_unique<ScopedDiagnosticHandler>(
        &context, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(diagnostics);
          os << diag.getLocation() << ": " << diag << "\n";
          for (Diagnostic &note : diag.getNotes())
            os << "  note: " << note << "\n";
          return success();
        });
    module = parseSourceFile<ModuleOp>(kCasesPath, &context);
  }
};

TEST(GradCheck, EveryOpHasACase) {
  Fixture f;
  ASSERT_TRUE(f.module) << "cannot parse " << kCasesPath << ":\n"
                        << f.diagnostics;
  std::set<std::string> cases;
  for (auto func : f.module->getOps<func::FuncOp>())
    cases.insert(func.getName().str());
  auto hasCase = [&](const std::string &op) {
    std::string name = "case_" + op;
    auto it = cases.lower_bound(name);
    for (; it != cases.end() && it->compare(0, name.size(), name) == 0; ++it)
      if (*it == name || it->compare(name.size(), 2, "__") == 0)
        return true;
    return false;
  };

  std::set<std::string> seen;
  for (RegisteredOperationName op : f.context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "loom")
      continue;
    std::string name = op.getStringRef().drop_front(5).str(); // "loom."
    // Kernel structure, created by loom-fuse after autodiff has run: not
    // values with gradients.
    if (name == "fusion" || name == "yield")
      continue;
    seen.insert(name);
    EXPECT_TRUE(op.hasInterface<loom::DifferentiableOpInterface>())
        << "loom." << name << " has no gradient rule";
    if (nonDifferentiableOps().count(name))
      continue;
    EXPECT_TRUE(hasCase(name))
        << "loom." << name << " has no gradient check: add @case_" << name
        << " to gradcheck_cases.mlir, or list it in nonDifferentiableOps()";
  }
  for (const auto &[name, why] : nonDifferentiableOps())
    EXPECT_TRUE(seen.count(name))
        << "nonDifferentiableOps() lists loom." << name
        << ", which is not an op of the dialect";
}

class GradCheckCase : public ::testing::TestWithParam<std::string> {};

TEST_P(GradCheckCase, MatchesFiniteDifferences) {
  const std::string name = GetParam();
  Fixture f;
  ASSERT_TRUE(f.module) << "cannot parse " << kCasesPath << ":\n"
                        << f.diagnostics;

  PassManager pm(&f.context);
  loom::AutodiffPassOptions options;
  options.entry = name;
  pm.addPass(loom::createAutodiffPass(options));
  ASSERT_TRUE(succeeded(pm.run(*f.module)))
      << "loom-autodiff failed on @" << name << ":\n"
      << f.diagnostics;
  auto forward = f.module->lookupSymbol<func::FuncOp>(name);
  auto backward = f.module->lookupSymbol<func::FuncOp>(name + "_backward");
  ASSERT_TRUE(forward && backward);

  // Random arguments.
  Random random(hashName(name));
  std::vector<loom::interp::Tensor> args;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(forward.getArgumentTypes()[i]);
    ASSERT_TRUE(type.getElementType().isF64())
        << "@" << name << " argument " << i
        << " must be f64 (put integer operands in constants)";
    double lo = -1.0, hi = 1.0;
    if (auto range =
            forward.getArgAttrOfType<DenseF64ArrayAttr>(i, "gradcheck.range")) {
      ASSERT_EQ(range.size(), 2);
      lo = range[0];
      hi = range[1];
    }
    bool isSigned =
        static_cast<bool>(forward.getArgAttr(i, "gradcheck.signed"));
    loom::interp::Tensor t{type, {}};
    for (int64_t k = 0; k < type.getNumElements(); ++k) {
      double v = lo + (hi - lo) * random.next();
      if (isSigned && random.next() < 0.5)
        v = -v;
      t.data.push_back(v);
    }
    args.push_back(std::move(t));
  }

  loom::interp::Options interpOptions;
  interpOptions.f64 = true;
  auto evalLoss = [&](ArrayRef<loom::interp::Tensor> in) -> double {
    auto out = loom::interp::run(forward, in, interpOptions);
    if (failed(out) || out->empty() || out->front().data.size() != 1) {
      ADD_FAILURE() << "interpreting @" << name << " failed:\n"
                    << f.diagnostics;
      return std::nan("");
    }
    return out->front().data[0];
  };

  auto results = loom::interp::run(backward, args, interpOptions);
  ASSERT_TRUE(succeeded(results))
      << "interpreting @" << name << "_backward failed:\n"
      << f.diagnostics;
  ASSERT_EQ(results->size(), backward.getNumResults());
  double loss = evalLoss(args);
  EXPECT_NEAR((*results)[0].data[0], loss,
              1e-12 * std::max(1.0, std::abs(loss)))
      << "@" << name << "_backward computes another loss than @" << name;

  // One gradient per parameter, in argument order.
  unsigned result = 1;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto param = forward.getArgAttrOfType<StringAttr>(i, "loom.param");
    if (!param)
      continue;
    ASSERT_LT(result, results->size());
    auto gradName =
        backward.getResultAttrOfType<StringAttr>(result, "loom.grad");
    EXPECT_EQ(gradName ? gradName.getValue().str() : std::string("<none>"),
              param.getValue().str())
        << "gradient " << result << " of @" << name;
    const std::vector<double> &analytic = (*results)[result++].data;
    ASSERT_EQ(analytic.size(), args[i].data.size());

    std::vector<double> numeric(analytic.size());
    for (size_t k = 0; k < analytic.size(); ++k) {
      double x = args[i].data[k];
      double h = kRelativeStep * std::max(1.0, std::abs(x));
      args[i].data[k] = x + h;
      double plus = evalLoss(args);
      args[i].data[k] = x - h;
      double minus = evalLoss(args);
      args[i].data[k] = x;
      numeric[k] = (plus - minus) / (2.0 * h);
    }

    double diff = 0, normA = 0, normN = 0, worst = -1;
    size_t worstAt = 0;
    for (size_t k = 0; k < analytic.size(); ++k) {
      double d = analytic[k] - numeric[k];
      diff += d * d;
      normA += analytic[k] * analytic[k];
      normN += numeric[k] * numeric[k];
      if (std::abs(d) > worst) {
        worst = std::abs(d);
        worstAt = k;
      }
    }
    double error =
        std::sqrt(diff) / std::max(1e-8, std::sqrt(normA) + std::sqrt(normN));
    EXPECT_LT(error, kTolerance)
        << "@" << name << ": gradient of '" << param.getValue().str()
        << "' differs from finite differences (relative error " << error
        << "); worst element " << worstAt << ": analytic " << analytic[worstAt]
        << ", numeric " << numeric[worstAt];
  }
  EXPECT_EQ(result, results->size()) << "@" << name << "_backward returns "
                                     << "more results than its parameters";
}

/// Where finite differences say nothing (at ties and kinks), the rules
/// follow a documented convention: max/min split the cotangent equally
/// between tied elements, max pooling gives it to the first maximum of the
/// window, relu and abs give 0 at 0.
TEST(GradCheck, TiesAndKinksFollowTheConvention) {
  Fixture f;
  const char *source = R"mlir(
    func.func @forward(%x: tensor<4xf64> {loom.param = "x"},
                       %y: tensor<4xf64> {loom.param = "y"},
                       %p: tensor<1x1x2x2xf64> {loom.param = "p"})
        -> (tensor<f64> {loom.output = "loss"}) {
      %m = loom.reduce_max %x dims = [0] : tensor<4xf64> -> tensor<f64>
      %b = loom.max %x, %y : tensor<4xf64>
      %r = loom.relu %y : tensor<4xf64>
      %a = loom.abs %y : tensor<4xf64>
      %s1 = loom.reduce_sum %b dims = [0] : tensor<4xf64> -> tensor<f64>
      %s2 = loom.reduce_sum %r dims = [0] : tensor<4xf64> -> tensor<f64>
      %s3 = loom.reduce_sum %a dims = [0] : tensor<4xf64> -> tensor<f64>
      %q = loom.max_pool2d %p {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x1x2x2xf64> -> tensor<1x1x1x1xf64>
      %s4 = loom.reduce_sum %q dims = [0, 1, 2, 3] : tensor<1x1x1x1xf64> -> tensor<f64>
      %t1 = loom.add %m, %s1 : tensor<f64>
      %t2 = loom.add %t1, %s2 : tensor<f64>
      %t3 = loom.add %t2, %s3 : tensor<f64>
      %l = loom.add %t3, %s4 : tensor<f64>
      return %l : tensor<f64>
    }
  )mlir";
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, &f.context);
  ASSERT_TRUE(module) << f.diagnostics;
  PassManager pm(&f.context);
  pm.addPass(loom::createAutodiffPass());
  ASSERT_TRUE(succeeded(pm.run(*module))) << f.diagnostics;
  auto backward = module->lookupSymbol<func::FuncOp>("forward_backward");
  ASSERT_TRUE(backward);

  auto type = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Float64Type::get(&f.context));
  };
  // x has a three-way tie for its maximum; x and y tie at index 0 and 3;
  // y is 0 at index 1; p's window has two equal maxima.
  std::vector<loom::interp::Tensor> args = {
      {type({4}), {2.0, 2.0, -1.0, 2.0}},
      {type({4}), {2.0, 0.0, 1.0, 2.0}},
      {type({1, 1, 2, 2}), {0.5, 3.0, 3.0, 1.0}}};
  loom::interp::Options options;
  options.f64 = true;
  auto results = loom::interp::run(backward, args, options);
  ASSERT_TRUE(succeeded(results)) << f.diagnostics;
  ASSERT_EQ(results->size(), 4u);
  // dx: 1/3 from reduce_max at each tied maximum; from max(x, y): 1/2 at
  // the ties (0, 3), 1 where x wins (1), 0 where y wins (2).
  std::vector<double> dx = {1.0 / 3 + 0.5, 1.0 / 3 + 1.0, 0.0, 1.0 / 3 + 0.5};
  // dy: max gives 1/2, 0, 1, 1/2; relu gives 1, 0 (at 0), 1, 1; abs gives
  // 1, 0 (at 0), 1, 1.
  std::vector<double> dy = {0.5 + 2, 0.0, 1.0 + 2, 0.5 + 2};
  std::vector<double> dp = {0.0, 1.0, 0.0, 0.0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR((*results)[1].data[i], dx[i], 1e-12) << "dx[" << i << "]";
    EXPECT_NEAR((*results)[2].data[i], dy[i], 1e-12) << "dy[" << i << "]";
    EXPECT_NEAR((*results)[3].data[i], dp[i], 1e-12) << "dp[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Loom, GradCheckCase, ::testing::ValuesIn(caseNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
