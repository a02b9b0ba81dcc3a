//===- EmulateGpuOnHost.cpp - GPU kernels as host code, for the tests -----===//
//
// Tests only (loomc-emu --cuda-emulator-lib): each gpu.func of the kernel
// module becomes a host function computing one GPU thread, whose thread and
// block ids, shuffles and barriers call the GPU emulator (test/lib/GpuEmulator).
//
//===----------------------------------------------------------------------===//

#include "EmulateGpuOnHost.h"

#include "loom/Codegen/Kernels.h"
#include "loom/Target/SharedObject.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace loom;

FailureOr<OwningOpRef<ModuleOp>>
loom::emulateGpuOnHost(ModuleOp gpuKernels, const KernelInfoMap &kernels,
                       std::vector<EmulatedLaunch> &launches) {
  MLIRContext *ctx = gpuKernels.getContext();
  OpBuilder b(ctx);
  Location loc = gpuKernels.getLoc();
  OwningOpRef<ModuleOp> host = ModuleOp::create(loc);
  b.setInsertionPointToEnd(host->getBody());
  Type indexType = b.getIndexType(), i32 = b.getI32Type(), f32 = b.getF32Type();
  auto declare = [&](StringRef name, TypeRange args, TypeRange results) {
    auto f = func::FuncOp::create(b, loc, name,
                                  b.getFunctionType(args, results));
    f.setPrivate();
  };
  for (StringRef name : {"loom_emu_block_id", "loom_emu_thread_id",
                         "loom_emu_block_dim", "loom_emu_grid_dim"})
    declare(name, {}, indexType);
  declare("loom_emu_shuffle_f32", {f32, i32, i32}, f32);
  declare("loom_emu_shuffle_i32", {i32, i32, i32}, i32);
  declare("loom_emu_barrier", {}, {});
  auto call = [&](OpBuilder &at, StringRef name, Type result,
                  ValueRange args) -> Value {
    auto c = func::CallOp::create(at, loc, name,
                                  result ? TypeRange{result} : TypeRange{},
                                  args);
    return c.getNumResults() ? c.getResult(0) : Value();
  };
  llvm::StringMap<bool> synchronizes;
  llvm::StringMap<unsigned> numParams;
  for (auto gpuModule : gpuKernels.getOps<gpu::GPUModuleOp>()) {
    for (auto global : gpuModule.getOps<memref::GlobalOp>())
      b.clone(*global);
    for (auto gfunc : llvm::make_early_inc_range(
             gpuModule.getOps<gpu::GPUFuncOp>())) {
      std::string name = (gfunc.getName() + "_thread").str();
      auto func = func::FuncOp::create(b, loc, name, gfunc.getFunctionType());
      Block &entry = gfunc.getBody().front();
      // Shared memory: a global (blocks run one at a time).
      unsigned numArgs = gfunc.getNumArguments();
      for (auto [i, attribution] :
           llvm::enumerate(gfunc.getWorkgroupAttributions())) {
        auto type = cast<MemRefType>(attribution.getType());
        auto plain = MemRefType::get(type.getShape(), type.getElementType());
        std::string symbol = name + "_shared" + std::to_string(i);
        OpBuilder gb(host->getBody(), host->getBody()->begin());
        memref::GlobalOp::create(gb, loc, symbol, gb.getStringAttr("private"),
                                 plain, Attribute(), false,
                                 gb.getI64IntegerAttr(64));
        OpBuilder eb(&entry, entry.begin());
        Value g = memref::GetGlobalOp::create(eb, loc, plain, symbol);
        BlockArgument(attribution).replaceAllUsesWith(g);
      }
      entry.eraseArguments(numArgs, entry.getNumArguments() - numArgs);
      func.getBody().takeBody(gfunc.getBody());
      SmallVector<Operation *> ops;
      func.walk([&](Operation *op) {
        if (isa_and_nonnull<gpu::GPUDialect>(op->getDialect()))
          ops.push_back(op);
      });
      // Threads that meet at shuffles or barriers run as coroutines.
      synchronizes[gfunc.getName()] =
          llvm::any_of(ops, llvm::IsaPred<gpu::ShuffleOp, gpu::BarrierOp>);
      numParams[gfunc.getName()] = numArgs;
      for (Operation *op : ops) {
        OpBuilder at(op);
        if (isa<gpu::BlockIdOp>(op))
          op->replaceAllUsesWith(ValueRange{
              call(at, "loom_emu_block_id", indexType, {})});
        else if (isa<gpu::ThreadIdOp>(op))
          op->replaceAllUsesWith(ValueRange{
              call(at, "loom_emu_thread_id", indexType, {})});
        else if (isa<gpu::BlockDimOp>(op))
          op->replaceAllUsesWith(ValueRange{
              call(at, "loom_emu_block_dim", indexType, {})});
        else if (isa<gpu::GridDimOp>(op))
          op->replaceAllUsesWith(ValueRange{
              call(at, "loom_emu_grid_dim", indexType, {})});
        else if (isa<gpu::BarrierOp>(op))
          call(at, "loom_emu_barrier", Type(), {});
        else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
          Type t = shuffle.getValue().getType();
          Value r = call(at, t.isF32() ? "loom_emu_shuffle_f32"
                                       : "loom_emu_shuffle_i32",
                         t, {shuffle.getValue(), shuffle.getOffset(),
                             shuffle.getWidth()});
          Value valid = arith::ConstantIntOp::create(at, loc, 1, 1);
          op->replaceAllUsesWith(ValueRange{r, valid});
        } else if (isa<gpu::ReturnOp>(op)) {
          func::ReturnOp::create(at, loc);
        } else {
          return op->emitError("gpu emulator: cannot emulate '")
                 << op->getName() << "'";
        }
        op->erase();
      }
    }
  }
  for (auto &[kernel, info] : kernels)
    for (const GpuLaunch &l : info.launches)
      launches.push_back(EmulatedLaunch{l.name, l.name + "_thread",
                                        l.grid[0], l.block[0],
                                        synchronizes.lookup(l.name),
                                        numParams.lookup(l.name)});
  return host;
}


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


FailureOr<std::string> loom::writeEmulatedKernels(
    ModuleOp kernels, const KernelInfoMap &info, const std::string &dir,
    int sm, const std::string &emulatorLibrary, std::string &error) {
  auto inDir = [&](StringRef name) {
    SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  std::vector<EmulatedLaunch> launches;
  FailureOr<OwningOpRef<ModuleOp>> host =
      emulateGpuOnHost(kernels, info, launches);
  std::string lib = inDir("kernels.emu.so");
  SharedObjectExtras extras;
  extras.addToModule = [&](llvm::Module &m) {
    addEmulatedLaunches(m, launches);
  };
  extras.libraries.push_back(emulatorLibrary);
  if (failed(host) || failed(lowerHostKernelsToLLVM(**host)) ||
      failed(emitSharedObject(**host, lib, error, extras))) {
    error = "emulating the GPU kernels failed" +
            (error.empty() ? std::string() : ": " + error);
    return failure();
  }
  SmallString<256> abs(lib);
  llvm::sys::fs::make_absolute(abs);
  auto out = openOutputFile(inDir("kernels.cubin"), &error);
  if (!out)
    return failure();
  out->os() << "FAKECUBIN sm=" << sm << " lib=" << abs << "\n";
  for (const EmulatedLaunch &l : launches)
    out->os() << "kernel " << l.name << " " << l.numParams << "\n";
  out->keep();
  return std::string("kernels.cubin");
}
