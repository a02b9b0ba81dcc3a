//===- CpuCodegen.cpp - Kernels, plan and artifact for the CPU ------------===//
//
// Kernels: each loom.fusion region is outlined into a function of a separate
// module, lowered loom -> linalg (LoomToLinalg) -> fused elementwise generics
// -> one-shot bufferization (inputs read-only, results turned into
// caller-provided out-params) -> loops -> LLVM dialect -> LLVM IR, optimized
// at -O3 for the host CPU (the loop vectorizer does the vectorizing) and
// linked by ld.lld into one shared object. A thin exported wrapper per kernel
// gives the runtime's ABI, `void name(void **buffers)`.
//
// Plan: the host side is not generated code. Each entry function, after
// loom-fuse and loom-plan-memory, is a sequence of steps: a fusion is a
// `kernel` step, a matmul a `gemm` step (BLAS in the runtime), a reshape a
// view (a second buffer at the same offset, no step).
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/CpuCodegen.h"

#include "loom/Conversion/CpuParallelLoops/CpuParallelLoops.h"
#include "loom/Conversion/CpuReductionLoops/CpuReductionLoops.h"
#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/Support/Threading.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include <algorithm>
#include <thread>

#ifndef LOOM_LLVM_TOOLS_DIR
#define LOOM_LLVM_TOOLS_DIR ""
#endif

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// Outlining
//===----------------------------------------------------------------------===//

namespace {
/// Tensors without elements take no bytes and need no code: kernels neither
/// receive nor produce them (the bare-pointer calling convention has no
/// pointer for them either).
bool isEmptyTensor(Type type) {
  return cast<RankedTensorType>(type).getNumElements() == 0;
}
} // namespace

namespace {
/// Name of the kernel attribute listing its in-place results: the number
/// of arguments, then pairs (result index, argument index) of a result that
/// loom-plan-memory placed on the bytes of an argument (a param or
/// optimizer state updated in place).
constexpr llvm::StringLiteral kInPlaceAttr = "loom.in_place";

int64_t offsetOfArgument(func::FuncOp func, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &func.getBody().front())
    return -1;
  auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                   "loom.offset");
  return offset ? offset.getInt() : -1;
}

/// The results of `kernel` that share bytes with one of its arguments
/// (same offset and type: loom-plan-memory's in-place state update) are
/// made in that argument's buffer, and recorded for unifyInPlaceBuffers.
void markInPlaceResults(func::FuncOp func, FusionOp fusion,
                        func::FuncOp kernel) {
  auto offsets = fusion->getAttrOfType<DenseI64ArrayAttr>("loom.offsets");
  if (!offsets)
    return;
  SmallVector<int64_t> pairs;
  unsigned result = 0;
  for (auto [i, r] : llvm::enumerate(fusion.getResults())) {
    if (isEmptyTensor(r.getType()))
      continue;
    unsigned arg = 0;
    for (Value operand : fusion.getOperands()) {
      if (isEmptyTensor(operand.getType()))
        continue;
      if (i < offsets.size() && operand.getType() == r.getType() &&
          offsetOfArgument(func, operand) == offsets[i]) {
        pairs.append({result, arg});
        break;
      }
      ++arg;
    }
    ++result;
  }
  if (pairs.empty())
    return;
  // The result is made in its argument's buffer: the argument becomes
  // writable and the result is materialized in it (eliminate-empty-tensors
  // then lets the op that computes it write there directly). One-shot
  // bufferization's conflict analysis keeps that sound: were the argument
  // still read after the result is written, it would copy instead. A
  // result written straight into its out-param instead could be a
  // temporary's buffer reused early (bufferization may use a result's
  // buffer as scratch before the result's own op), overwriting the
  // argument while it is still to be read.
  auto ret = cast<func::ReturnOp>(kernel.getBody().front().getTerminator());
  OpBuilder rb(ret);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    unsigned r = pairs[i], a = pairs[i + 1];
    Value dest = kernel.getArgument(a);
    kernel.setArgAttr(a, bufferization::BufferizationDialect::kWritableAttrName,
                      rb.getBoolAttr(true));
    ret->setOperand(r, bufferization::MaterializeInDestinationOp::create(
                           rb, ret.getLoc(), ret->getOperand(r), dest)
                           .getResult());
  }
  pairs.insert(pairs.begin(), kernel.getNumArguments());
  kernel->setAttr(kInPlaceAttr,
                  DenseI64ArrayAttr::get(kernel.getContext(), pairs));
}

/// After bufferization (results are out-params after the inputs): an
/// in-place result's out-param and its argument hold the same address, so
/// the kernel reads and writes through the argument alone. LLVM then sees
/// one pointer where it saw two that might overlap, and vectorizes the
/// update loop instead of falling back to scalar code at run time.
void unifyInPlaceBuffers(func::FuncOp kernel) {
  auto attr = kernel->getAttrOfType<DenseI64ArrayAttr>(kInPlaceAttr);
  if (!attr)
    return;
  ArrayRef<int64_t> p = attr.asArrayRef();
  int64_t inputs = p.front();
  for (size_t i = 1; i + 1 < p.size(); i += 2) {
    int64_t out = inputs + p[i], in = p[i + 1];
    if (out >= kernel.getNumArguments() ||
        kernel.getArgument(out).getType() != kernel.getArgument(in).getType())
      continue; // not the bufferized signature expected: leave it
    kernel.getArgument(out).replaceAllUsesWith(kernel.getArgument(in));
  }
  // The result was made in the argument's buffer: its copy into the
  // out-param is now a copy onto itself.
  SmallVector<memref::CopyOp> selfCopies;
  kernel.walk([&](memref::CopyOp c) {
    if (c.getSource() == c.getTarget())
      selfCopies.push_back(c);
  });
  for (memref::CopyOp c : selfCopies)
    c.erase();
  kernel->removeAttr(kInPlaceAttr);
}
} // namespace

OwningOpRef<ModuleOp> loom::outlineKernels(ModuleOp module) {
  OpBuilder b(module.getContext());
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(module.getLoc());
  b.setInsertionPointToEnd(kernels->getBody());
  // Kernels by their text (under one placeholder name): a region the same
  // as one already outlined (train_step repeats forward_backward's and
  // apply_optimizer's kernels, forward repeats predict's; a model repeats
  // its blocks) calls that kernel instead of compiling a copy.
  llvm::StringMap<std::string> byText;
  // train_step first: the entry a training run calls names the kernels it
  // shares with the others (profiles and plans read loom_train_step_k*).
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  std::stable_partition(funcs.begin(), funcs.end(), [](func::FuncOp f) {
    return f.getName() == "train_step";
  });
  for (func::FuncOp func : funcs) {
    unsigned index = 0;
    for (auto fusion : func.getBody().getOps<FusionOp>()) {
      if (llvm::all_of(fusion.getResultTypes(), isEmptyTensor))
        continue; // Nothing to compute: no kernel, no step.
      std::string name =
          ("loom_" + func.getName() + "_k" + Twine(index++)).str();
      fusion->setAttr("loom.kernel", b.getStringAttr(name));
      Block &body = fusion.getBody().front();
      SmallVector<Type> argTypes, resultTypes;
      for (Type t : body.getArgumentTypes())
        if (!isEmptyTensor(t))
          argTypes.push_back(t);
      for (Type t : fusion.getResultTypes())
        if (!isEmptyTensor(t))
          resultTypes.push_back(t);
      auto kernel = func::FuncOp::create(b, fusion.getLoc(), name,
                                         b.getFunctionType(argTypes,
                                                           resultTypes));
      Block *entry = kernel.addEntryBlock();
      OpBuilder kb = OpBuilder::atBlockEnd(entry);
      IRMapping map;
      unsigned next = 0;
      for (BlockArgument arg : body.getArguments()) {
        auto t = cast<RankedTensorType>(arg.getType());
        if (isEmptyTensor(t))
          map.map(arg, tensor::EmptyOp::create(kb, arg.getLoc(), t.getShape(),
                                               t.getElementType()));
        else
          map.map(arg, entry->getArgument(next++));
      }
      for (Operation &op : body.without_terminator())
        kb.clone(op, map);
      auto yield = cast<YieldOp>(body.getTerminator());
      SmallVector<Value> results;
      for (Value v : yield.getValues())
        if (!isEmptyTensor(v.getType()))
          results.push_back(map.lookupOrDefault(v));
      func::ReturnOp::create(kb, yield.getLoc(), results);
      // Inputs live in the arena beside other values: never written (but
      // where a result takes an input's place, below).
      for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
        kernel.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                          b.getBoolAttr(false));
      markInPlaceResults(func, fusion, kernel);
      std::string text;
      {
        llvm::raw_string_ostream os(text);
        kernel.setSymName("kernel");
        kernel->print(os);
        kernel.setSymName(name);
      }
      auto [it, added] = byText.try_emplace(text, name);
      if (!added) {
        fusion->setAttr("loom.kernel", b.getStringAttr(it->second));
        kernel.erase();
      }
    }
  }
  return kernels;
}

//===----------------------------------------------------------------------===//
// Lowering to the LLVM dialect
//===----------------------------------------------------------------------===//

namespace {
/// The upstream passes of the kernel pipeline, registered once so that the
/// pipeline can be spelled as text (the same text `loom-opt` accepts, inside
/// `builtin.module(...)`).
void registerKernelPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTransformsPasses();
    bufferization::registerBufferizationPasses();
    bufferization::registerBufferizationPipelines();
    registerLinalgPasses();
    memref::registerMemRefPasses();
    registerSCFPasses();
    registerConversionPasses();
    registerLoomCpuParallelLoopsPass();
    registerLoomCpuReductionLoopsPass();
    registerGPUPasses();
  });
}

} // namespace

LogicalResult loom::runCodegenPipeline(ModuleOp module, StringRef pipeline) {
  registerKernelPasses();
  PassManager pm(module.getContext());
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (failed(parsePassPipeline(pipeline, pm, os))) {
    return module.emitError("loom codegen: bad pipeline: ") << errors;
  }
  return pm.run(module);
}

LogicalResult loom::bufferizeKernels(ModuleOp kernels, bool deallocate) {
  for (auto func : kernels.getOps<func::FuncOp>())
    if (failed(lowerLoomToLinalg(func)))
      return failure();
  std::string pipeline =
      "func.func(linalg-fuse-elementwise-ops),"
      "canonicalize,cse,eliminate-empty-tensors,"
      "one-shot-bufferize{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map},"
      "buffer-results-to-out-params{hoist-static-allocs "
      "modify-public-functions},"
      // cse first: the copy that closes an scf.forall's line (see
      // lowerScatterAdd) copies a subview onto an identical one, which
      // canonicalize then erases.
      "cse,canonicalize";
  if (deallocate)
    pipeline += ",buffer-deallocation-pipeline";
  if (failed(runCodegenPipeline(kernels, pipeline)))
    return failure();
  for (auto kernel : kernels.getOps<func::FuncOp>())
    unifyInPlaceBuffers(kernel);
  // Strided copies (insert_slice with strides) would call the MLIR runner's
  // memrefCopy; as linalg.copy they become plain loops.
  SmallVector<memref::CopyOp> copies;
  kernels.walk([&](memref::CopyOp c) { copies.push_back(c); });
  for (memref::CopyOp c : copies) {
    OpBuilder b(c);
    linalg::CopyOp::create(b, c.getLoc(), c.getSource(), c.getTarget());
    c.erase();
  }
  return success();
}

namespace {
/// From loops on buffers (and OpenMP) to the LLVM dialect: the end of both
/// host pipelines.
constexpr const char *kLoopsToLLVM =
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-vector-to-llvm,convert-math-to-llvm,convert-math-to-libm,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
    "convert-ub-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv},"
    // After func: this pass converts function signatures too, without the
    // bare-pointer convention the kernel ABI needs.
    "convert-openmp-to-llvm,reconcile-unrealized-casts";

/// The static temporaries at the top level of each kernel become trailing
/// arguments (scratch the plan places in the arena), recorded in `info`:
/// a malloc and its page faults per call cost more than the kernel itself
/// for large buffers. Temporaries inside loops or of dynamic shape stay
/// allocations (freed by the deallocation pipeline).
void hoistScratch(ModuleOp kernels, KernelInfoMap &info) {
  for (auto func : kernels.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    KernelInfo &kernel = info[func.getName().str()];
    Block &entry = func.getBody().front();
    SmallVector<memref::AllocOp> allocs;
    for (auto alloc : entry.getOps<memref::AllocOp>()) {
      MemRefType type = alloc.getType();
      if (type.hasStaticShape() && type.getLayout().isIdentity() &&
          type.getMemorySpace() == nullptr)
        allocs.push_back(alloc);
    }
    for (memref::AllocOp alloc : allocs) {
      if (failed(func.insertArgument(func.getNumArguments(), alloc.getType(),
                                     {}, alloc.getLoc())))
        continue; // stays an allocation
      kernel.addScratch(alloc.getType(), 64);
      alloc.replaceAllUsesWith(entry.getArguments().back());
      alloc.erase();
    }
  }
}
} // namespace

LogicalResult loom::lowerKernelsToLLVM(ModuleOp kernels, KernelInfoMap &info,
                                       int64_t minParallelWork) {
  if (failed(bufferizeKernels(kernels, /*deallocate=*/false)))
    return failure();
  hoistScratch(kernels, info);
  // The parallel dimensions of every linalg op (and every scf.forall) become
  // scf.parallel; loom-cpu-parallel-loops keeps those worth a thread team,
  // which convert-scf-to-openmp hands to OpenMP (libomp, all cores unless
  // OMP_NUM_THREADS or loom-run --threads says otherwise).
  std::string pipeline =
      "buffer-deallocation-pipeline,"
      "scf-forall-to-parallel,func.func(loom-cpu-reduction-loops),"
      "convert-linalg-to-parallel-loops,"
      "loom-cpu-parallel-loops{min-work=" +
      std::to_string(minParallelWork > 0 ? minParallelWork : INT64_MAX) +
      "},";
  // canonicalize inlines the memref.alloca_scope convert-scf-to-openmp
  // wraps each loop body in, which convert-scf-to-cf could not lower (a
  // scope holds one block).
  if (minParallelWork > 0)
    pipeline += "convert-scf-to-openmp,canonicalize,";
  return runCodegenPipeline(kernels, pipeline + kLoopsToLLVM);
}

LogicalResult loom::lowerHostKernelsToLLVM(ModuleOp kernels) {
  return runCodegenPipeline(kernels,
                            std::string("scf-forall-to-for,"
                                        "convert-linalg-to-loops,") +
                                kLoopsToLLVM);
}

//===----------------------------------------------------------------------===//
// Native code
//===----------------------------------------------------------------------===//

namespace {
/// Renames each kernel `k` to an internal `k.impl` and exports `void k(void
/// **buffers)`, which loads the pointers and calls it.
void addAbiWrappers(llvm::Module &m, ArrayRef<std::string> names) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  for (const std::string &name : names) {
    llvm::Function *impl = m.getFunction(name);
    if (!impl)
      continue;
    impl->setName(name + ".impl");
    impl->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto *type =
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
    auto *wrapper = llvm::Function::Create(
        type, llvm::GlobalValue::ExternalLinkage, name, m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0; i < impl->arg_size(); ++i) {
      llvm::Value *slot = b.CreateConstGEP1_64(ptr, wrapper->getArg(0), i);
      args.push_back(b.CreateLoad(ptr, slot));
    }
    b.CreateCall(impl, args);
    b.CreateRetVoid();
  }
}

/// LLVM's OpenMP runtime of the same release as the compiler.
std::string findOpenMPRuntime() {
  SmallVector<std::string> candidates;
  if (StringRef(LOOM_LLVM_TOOLS_DIR).size())
    candidates.push_back(
        (llvm::sys::path::parent_path(LOOM_LLVM_TOOLS_DIR) + "/lib/libomp.so.5")
            .str());
  candidates.push_back("/usr/lib/llvm-22/lib/libomp.so.5");
  for (const std::string &c : candidates)
    if (llvm::sys::fs::exists(c))
      return c;
  return "";
}

std::string findLinker() {
  for (const char *name : {"ld.lld-22", "ld.lld"}) {
    SmallVector<StringRef> dirs;
    if (StringRef(LOOM_LLVM_TOOLS_DIR).size())
      dirs.push_back(LOOM_LLVM_TOOLS_DIR);
    if (auto p = llvm::sys::findProgramByName(name, dirs))
      return *p;
    if (auto p = llvm::sys::findProgramByName(name))
      return *p;
  }
  return "";
}
} // namespace

namespace {
/// `void name(void **buffers)` calling `loom_emu_launch(thread, buffers,
/// grid, block, synchronizes)`: the emulator runs the per-thread function `thread` for
/// every thread of the grid.
void addEmulatedLaunches(llvm::Module &m, ArrayRef<EmulatedLaunch> launches) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type *voidTy = llvm::Type::getVoidTy(ctx);
  llvm::FunctionCallee launch = m.getOrInsertFunction(
      "loom_emu_launch", voidTy, ptr, ptr, i64, i64, i64);
  for (const EmulatedLaunch &l : launches) {
    llvm::Function *thread = m.getFunction(l.threadFunction);
    if (!thread)
      continue;
    auto *wrapper = llvm::Function::Create(
        llvm::FunctionType::get(voidTy, {ptr}, false),
        llvm::GlobalValue::ExternalLinkage, l.name, m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
    b.CreateCall(launch, {thread, wrapper->getArg(0),
                          b.getInt64(l.grid), b.getInt64(l.block),
                          b.getInt64(l.synchronizes)});
    b.CreateRetVoid();
  }
}
} // namespace

namespace {
/// A target machine for the host CPU and its features, at -O3.
std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string features;
  for (auto &f : llvm::sys::getHostCPUFeatures())
    features += (f.second ? "+" : "-") + f.first().str() + ",";
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features, llvm::TargetOptions(),
      llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    error = "cannot create a target machine for " + triple.str();
  return tm;
}

/// glibc's vector math library (libmvec: expf, logf, tanhf, erff, ... on
/// 4, 8 and 16 lanes), or "" where there is none.
std::string findVectorMathLibrary() {
  for (const char *lib : {"/lib/x86_64-linux-gnu/libmvec.so.1",
                          "/usr/lib/x86_64-linux-gnu/libmvec.so.1",
                          "/lib64/libmvec.so.1", "/usr/lib64/libmvec.so.1"})
    if (llvm::sys::fs::exists(lib))
      return lib;
  return "";
}

/// Optimizes `m` at -O3 (clang's pipeline, with loop and SLP
/// vectorization) and writes it to `object`. With `vectorMath`, the loop
/// vectorizer may call libmvec's vector variants of the math functions
/// (a loop of exp then vectorizes like one of adds).
bool optimizeAndEmit(llvm::Module &m, llvm::TargetMachine &tm,
                     const std::string &object, bool vectorMath,
                     std::string &error) {
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions tuning;
    tuning.LoopUnrolling = true;
    tuning.LoopInterleaving = true;
    tuning.LoopVectorization = true;
    tuning.SLPVectorization = true;
    llvm::PassBuilder pb(&tm, tuning);
    llvm::TargetLibraryInfoImpl tlii(
        m.getTargetTriple(), vectorMath ? llvm::VectorLibrary::LIBMVEC
                                        : llvm::VectorLibrary::NoLibrary);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3)
        .run(m, mam);
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(object, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + object + ": " + ec.message();
    return false;
  }
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  pm.run(m);
  return true;
}

/// Optimizes and compiles `m` into object files `<base>.<i>.o`, on all
/// cores (`tm` serves a single partition; each thread makes its own): the module is split into one partition per thread (a kernel's
/// wrapper and its internal implementation stay together), each carried as
/// bitcode into an LLVM context of its own, where it is optimized and
/// compiled. The kernels are independent functions, so the partitions'
/// code is what the whole module's would be.
LogicalResult emitObjects(llvm::Module &m, llvm::TargetMachine &tm,
                          const std::string &base, bool vectorMath,
                          SmallVectorImpl<std::string> &objects,
                          std::string &error) {
  unsigned functions = llvm::count_if(
      m.functions(), [](llvm::Function &f) { return !f.isDeclaration(); });
  unsigned parts = std::clamp(
      llvm::hardware_concurrency().compute_thread_count(), 1u,
      std::max(1u, functions / 2));
  if (parts == 1) {
    objects.push_back(base + ".o");
    return success(
        optimizeAndEmit(m, tm, objects.back(), vectorMath, error));
  }
  SmallVector<SmallString<0>> bitcode;
  llvm::SplitModule(
      m, parts,
      [&](std::unique_ptr<llvm::Module> part) {
        bitcode.emplace_back();
        llvm::raw_svector_ostream os(bitcode.back());
        llvm::WriteBitcodeToFile(*part, os);
      },
      /*PreserveLocals=*/true);
  // All names first: the threads read `objects` while this one would grow it.
  for (size_t i = 0; i < bitcode.size(); ++i)
    objects.push_back(base + "." + std::to_string(i) + ".o");
  SmallVector<std::string> errors(bitcode.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bitcode.size(); ++i) {
    threads.emplace_back([&, i] {
      llvm::LLVMContext context;
      llvm::Expected<std::unique_ptr<llvm::Module>> part =
          llvm::parseBitcodeFile(
              llvm::MemoryBufferRef(bitcode[i].str(), "kernels"), context);
      if (!part) {
        errors[i] = llvm::toString(part.takeError());
        return;
      }
      std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(errors[i]);
      if (tm)
        optimizeAndEmit(**part, *tm, objects[i], vectorMath, errors[i]);
    });
  }
  for (std::thread &t : threads)
    t.join();
  for (const std::string &e : errors)
    if (!e.empty()) {
      error = e;
      for (const std::string &object : objects)
        llvm::sys::fs::remove(object);
      return failure();
    }
  return success();
}
} // namespace

LogicalResult loom::emitSharedObject(ModuleOp kernels, const std::string &path,
                                     std::string &error,
                                     ArrayRef<EmulatedLaunch> emulated,
                                     const std::string &emulatorLibrary) {
  SmallVector<std::string> names;
  for (auto f : kernels.getOps<LLVM::LLVMFuncOp>())
    if (!f.isExternal())
      names.push_back(f.getName().str());

  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  kernels.getContext()->appendDialectRegistry(registry);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> m =
      translateModuleToLLVMIR(kernels, llvmContext, "loom_kernels");
  if (!m) {
    error = "cannot translate the kernels to LLVM IR";
    return failure();
  }
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(error);
  if (!tm)
    return failure();
  m->setTargetTriple(tm->getTargetTriple());
  m->setDataLayout(tm->createDataLayout());
  addAbiWrappers(*m, names);
  addEmulatedLaunches(*m, emulated);

  std::string vectorMath = findVectorMathLibrary();
  SmallVector<std::string> objects;
  if (failed(emitObjects(*m, *tm, path, !vectorMath.empty(), objects, error)))
    return failure();
  std::string linker = findLinker();
  if (linker.empty()) {
    error = "cannot find ld.lld (install lld-22)";
    return failure();
  }
  SmallVector<StringRef> args{linker, "-shared", "-O2", "--as-needed",
                              "-o", path};
  args.append(objects.begin(), objects.end());
  // libm resolves the math the kernels call (expf, tanhf, erff, ...).
  for (const char *libm : {"/lib/x86_64-linux-gnu/libm.so.6",
                           "/usr/lib/x86_64-linux-gnu/libm.so.6",
                           "/lib64/libm.so.6", "/usr/lib64/libm.so.6"})
    if (llvm::sys::fs::exists(libm)) {
      args.push_back(libm);
      break;
    }
  // libmvec, for the vector math calls (--as-needed drops it if none).
  if (!vectorMath.empty())
    args.push_back(vectorMath);
  // OpenMP's runtime (libomp, next to LLVM) where kernels fork teams.
  // (args holds StringRefs: the strings live as long as the call.)
  std::string omp, ompRpath;
  if (llvm::any_of(m->functions(), [](const llvm::Function &f) {
        return f.isDeclaration() && f.getName().starts_with("__kmpc_");
      })) {
    omp = findOpenMPRuntime();
    if (omp.empty()) {
      error = "the kernels use OpenMP but libomp.so.5 was not found "
              "(install libomp-22-dev)";
      return failure();
    }
    args.push_back(omp);
    ompRpath = "-rpath=" + llvm::sys::path::parent_path(omp).str();
    args.push_back(ompRpath);
  }
  std::string rpath;
  if (!emulatorLibrary.empty()) {
    args.push_back(emulatorLibrary);
    rpath = "-rpath=" + llvm::sys::path::parent_path(emulatorLibrary).str();
    args.push_back(rpath);
  }
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 0, 0,
                                     &message);
  for (const std::string &object : objects)
    llvm::sys::fs::remove(object);
  if (rc != 0) {
    error = "linking " + path + " failed" +
            (message.empty() ? "" : ": " + message);
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// plan.json
//===----------------------------------------------------------------------===//

namespace {
std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(8))
    return "i8";
  if (t.isInteger(1))
    return "bool";
  return "";
}

struct EntryWriter {
  func::FuncOp func;
  const PlanTarget *target;
  llvm::json::Array buffers;
  int64_t scratchBase = 0, scratchBytes = 0;
  llvm::DenseMap<Value, int64_t> ids;
  std::string error;

  int64_t add(Value v, int64_t offset) {
    auto t = cast<RankedTensorType>(v.getType());
    llvm::json::Array shape;
    for (int64_t d : t.getShape())
      shape.push_back(d);
    buffers.push_back(llvm::json::Object{{"offset", offset},
                                         {"dtype", dtypeName(t.getElementType())},
                                         {"shape", std::move(shape)}});
    ids[v] = buffers.size() - 1;
    return ids[v];
  }

  /// A kernel's temporary, in the scratch space after the arena.
  int64_t addScratch(const KernelScratch &scratch) {
    auto t = cast<MemRefType>(scratch.type);
    llvm::json::Array shape;
    for (int64_t d : t.getShape())
      shape.push_back(d);
    buffers.push_back(
        llvm::json::Object{{"offset", scratchBase + scratch.offset},
                           {"dtype", dtypeName(t.getElementType())},
                           {"shape", std::move(shape)}});
    return buffers.size() - 1;
  }

  FailureOr<llvm::json::Object> write() {
    llvm::json::Array inputs, outputs, steps;
    auto arena = func->getAttrOfType<IntegerAttr>("loom.arena_bytes");
    scratchBase = llvm::alignTo(arena ? arena.getInt() : 0, 256);
    for (BlockArgument arg : func.getArguments()) {
      auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                        "loom.offset");
      if (!offset)
        return func.emitError("plan: argument ")
               << arg.getArgNumber() << " has no loom.offset (run "
               << "loom-plan-memory)";
      if (dtypeName(getElementTypeOrSelf(arg.getType())).empty())
        return func.emitError("plan: argument ")
               << arg.getArgNumber() << " has an unsupported element type";
      int64_t id = add(arg, offset.getInt());
      std::string kind, name;
      unsigned i = arg.getArgNumber();
      if (auto n = func.getArgAttrOfType<StringAttr>(i, kParamAttr))
        kind = "param", name = n.str();
      else if (auto n = func.getArgAttrOfType<StringAttr>(i, kBufferAttr))
        kind = "buffer", name = n.str();
      else if (auto n = func.getArgAttrOfType<StringAttr>(i, kOptStateAttr))
        kind = "state", name = n.str();
      else if (auto n = func.getArgAttrOfType<StringAttr>(i, kInputAttr))
        kind = "input", name = n.str();
      else if (func.getArgAttr(i, kRngSeedAttr))
        kind = "input", name = "seed"; // the dropout seed; loom-run feeds it
      else
        return func.emitError("plan: argument ")
               << i << " is not named (loom.param, loom.buffer, "
               << "loom.opt_state, loom.input or loom.rng_seed)";
      inputs.push_back(llvm::json::Object{
          {"name", name}, {"kind", kind}, {"buffer", id}});
    }
    for (Operation &op : func.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          std::string kind, name;
          if (auto n = func.getResultAttrOfType<StringAttr>(i, kOutputAttr))
            kind = "output", name = n.str();
          else if (auto n = func.getResultAttrOfType<StringAttr>(i, kGradAttr))
            kind = "grad", name = n.str();
          else if (auto n =
                       func.getResultAttrOfType<StringAttr>(i, kBufferAttr))
            kind = "output", name = n.str(); // the buffer's new value
          else
            return func.emitError("plan: result ")
                   << i << " is not named (loom.output, loom.grad or "
                   << "loom.buffer)";
          outputs.push_back(llvm::json::Object{
              {"name", name}, {"kind", kind}, {"buffer", ids.lookup(v)}});
        }
        continue;
      }
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("loom.offsets");
      if (!offsets)
        return op.emitError("plan: op has no loom.offsets (run "
                            "loom-plan-memory)");
      for (auto [r, off] : llvm::zip(op.getResults(), offsets.asArrayRef())) {
        if (dtypeName(getElementTypeOrSelf(r.getType())).empty())
          return op.emitError("plan: result has an unsupported element type");
        add(r, off);
      }
      if (auto fusion = dyn_cast<FusionOp>(op)) {
        if (!fusion->hasAttr("loom.kernel"))
          continue; // Only empty results: nothing to run.
        llvm::json::Array bufs;
        for (Value v : fusion.getInputs())
          if (!isEmptyTensor(v.getType()))
            bufs.push_back(ids.lookup(v));
        for (Value v : fusion.getResults())
          if (!isEmptyTensor(v.getType()))
            bufs.push_back(ids.lookup(v));
        std::string name =
            fusion->getAttrOfType<StringAttr>("loom.kernel").str();
        const KernelInfo *kernel = nullptr;
        if (target->kernelInfo) {
          auto it = target->kernelInfo->find(name);
          if (it != target->kernelInfo->end())
            kernel = &it->second;
        }
        if (kernel) {
          for (const KernelScratch &s : kernel->scratch)
            bufs.push_back(addScratch(s));
          scratchBytes = std::max(scratchBytes, kernel->scratchBytes);
        }
        if (target->target != "cuda") {
          steps.push_back(llvm::json::Object{{"kind", "kernel"},
                                             {"name", name},
                                             {"buffers", std::move(bufs)}});
          continue;
        }
        if (!kernel)
          return op.emitError("plan: no GPU launches for kernel ") << name;
        auto dims = [](const std::array<int64_t, 3> &d) {
          return llvm::json::Array{d[0], d[1], d[2]};
        };
        for (const GpuLaunch &launch : kernel->launches)
          steps.push_back(llvm::json::Object{
              {"kind", "kernel"},
              {"name", launch.name},
              {"buffers", llvm::json::Array(bufs)},
              {"grid", dims(launch.grid)},
              {"block", dims(launch.block)},
              {"shared_bytes", launch.sharedBytes}});
      } else if (auto mm = dyn_cast<MatmulOp>(op)) {
        auto lt = cast<RankedTensorType>(mm.getLhs().getType());
        auto rt = cast<RankedTensorType>(mm.getRhs().getType());
        Type et = lt.getElementType();
        if (!et.isF32() && !et.isF64())
          return op.emitError("plan: GEMM steps multiply f32 and f64 "
                              "matrices only, not ")
                 << et;
        bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
        int64_t rank = lt.getRank(), rr = rt.getRank();
        int64_t M = lt.getDimSize(rank - (ta ? 1 : 2));
        int64_t K = lt.getDimSize(rank - (ta ? 2 : 1));
        int64_t N = rt.getDimSize(rr - (tb ? 2 : 1));
        int64_t batch = 1;
        for (int64_t d : lt.getShape().drop_back(2))
          batch *= d;
        bool sharedRhs = rr == 2 && rank != 2;
        // [B, M, K] x [K, N] is one [B*M, K] x [K, N] GEMM: A and C are
        // contiguous row-major, so their batches stack into rows (a larger
        // GEMM runs nearer the machine's peak than B small ones).
        if (sharedRhs && !ta) {
          M *= batch;
          batch = 1;
        }
        steps.push_back(llvm::json::Object{
            {"kind", "gemm"},
            {"a", ids.lookup(mm.getLhs())},
            {"b", ids.lookup(mm.getRhs())},
            {"c", ids.lookup(mm.getResult())},
            {"batch", batch},
            {"m", M},
            {"n", N},
            {"k", K},
            {"trans_a", ta},
            {"trans_b", tb},
            {"stride_a", M * K},
            {"stride_b", sharedRhs ? 0 : K * N},
            {"stride_c", M * N}});
      } else if (!isa<ReshapeOp>(op)) {
        return op.emitError("plan: '")
               << op.getName() << "' is not a step the plan can hold";
      }
    }
    int64_t arenaBytes = arena ? arena.getInt() : 0;
    if (scratchBytes)
      arenaBytes = scratchBase + scratchBytes;
    return llvm::json::Object{{"name", func.getName().str()},
                              {"arena_bytes", arenaBytes},
                              {"buffers", std::move(buffers)},
                              {"inputs", std::move(inputs)},
                              {"outputs", std::move(outputs)},
                              {"steps", std::move(steps)}};
  }
};
} // namespace

LogicalResult loom::writePlan(ModuleOp module, const std::string &path,
                              const PlanTarget &target,
                              const std::string &sourceModel,
                              std::string &error) {
  llvm::json::Array entries;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    EntryWriter w;
    w.func = func;
    w.target = &target;
    FailureOr<llvm::json::Object> entry = w.write();
    if (failed(entry)) {
      error = "cannot write the plan of @" + func.getName().str();
      return failure();
    }
    entries.push_back(std::move(*entry));
  }
  llvm::json::Object plan{{"format", "loom-plan"},
                          {"version", 1},
                          {"target", target.target},
                          {"kernel_abi", 1},
                          {"entries", std::move(entries)}};
  auto fileOrNull = [](const std::string &f) {
    return f.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(f);
  };
  plan["kernels"] = fileOrNull(target.kernels);
  if (target.target == "cuda") {
    plan["sm"] = target.sm;
    plan["ptx"] = fileOrNull(target.ptx);
  }
  plan["params"] = "params.safetensors";
  if (!sourceModel.empty())
    plan["source_model"] = sourceModel;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return failure();
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(plan))) << "\n";
  return success();
}
