//===- SharedObject.cpp - Kernels in the LLVM dialect to a .so ------------===//
//
// The kernel module in the LLVM dialect becomes LLVM IR, optimized at -O3
// for the host CPU (clang's pipeline; the loop vectorizer does the
// vectorizing, libmvec supplies vector math), compiled on all cores (the
// module split per kernel) and linked by ld.lld into one shared object. A
// thin exported wrapper per kernel gives the runtime's ABI,
// `void name(void **buffers)`.
//
//===----------------------------------------------------------------------===//

#include "loom/Target/SharedObject.h"

#include "loom/Codegen/Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include <algorithm>
#include <thread>

#ifndef LOOM_LLVM_TOOLS_DIR
#define LOOM_LLVM_TOOLS_DIR ""
#endif

using namespace mlir;
using namespace loom;


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

/// compiler-rt's builtins archive (libclang-rt-22-dev): the conversions
/// LLVM calls where the CPU has no instruction for them (f32 -> bf16,
/// `__truncsfbf2`, on CPUs without AVX512-BF16), which Debian's libgcc
/// (GCC 12) lacks. Linked as an archive: only what the kernels call.
std::string findBuiltins() {
  SmallVector<std::string> candidates;
  std::string version = std::to_string(LLVM_VERSION_MAJOR);
  if (StringRef(LOOM_LLVM_TOOLS_DIR).size())
    candidates.push_back((llvm::sys::path::parent_path(LOOM_LLVM_TOOLS_DIR) +
                          "/lib/clang/" + version +
                          "/lib/linux/libclang_rt.builtins-x86_64.a")
                             .str());
  candidates.push_back("/usr/lib/llvm-" + version + "/lib/clang/" + version +
                       "/lib/linux/libclang_rt.builtins-x86_64.a");
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
                                     const SharedObjectExtras &extras) {
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
  if (extras.addToModule)
    extras.addToModule(*m);

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
  std::string builtins = findBuiltins();
  if (!builtins.empty())
    args.push_back(builtins);
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
  std::vector<std::string> rpaths;
  for (const std::string &lib : extras.libraries)
    rpaths.push_back("-rpath=" + llvm::sys::path::parent_path(lib).str());
  for (auto [lib, rpath] : llvm::zip(extras.libraries, rpaths)) {
    args.push_back(lib);
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

