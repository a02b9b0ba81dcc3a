//===- KernelInfo.cpp - KernelInfo as an attribute of the kernel module ---===//
//
// Encoding, one entry per kernel:
//   loom.kernel_info = {loom_forward_k0 = {
//       scratch = [memref<...>, ...], scratch_offsets = array<i64: ...>,
//       scratch_bytes = N : i64,
//       launches = [{name = "...", strategy = "...", grid = array<i64: x, y, z>,
//                    block = array<i64: x, y, z>, shared = N : i64}, ...]}}
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/KernelInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace loom;

ModuleOp loom::getKernelModule(ModuleOp module) {
  for (auto nested : module.getBody()->getOps<ModuleOp>())
    if (nested->hasAttr(kKernelModuleAttr))
      return nested;
  return nullptr;
}

OwningOpRef<ModuleOp> loom::takeKernelModule(ModuleOp module) {
  ModuleOp kernels = getKernelModule(module);
  if (kernels)
    kernels->remove();
  return OwningOpRef<ModuleOp>(kernels);
}

namespace {
std::array<int64_t, 3> triple(DictionaryAttr d, StringRef name) {
  std::array<int64_t, 3> v{1, 1, 1};
  if (auto a = d.getAs<DenseI64ArrayAttr>(name))
    for (int64_t i = 0; i < 3 && i < a.size(); ++i)
      v[i] = a[i];
  return v;
}

int64_t integer(DictionaryAttr d, StringRef name) {
  auto a = d.getAs<IntegerAttr>(name);
  return a ? a.getInt() : 0;
}
} // namespace

KernelInfoMap loom::readKernelInfo(ModuleOp kernels) {
  KernelInfoMap map;
  auto all = kernels->getAttrOfType<DictionaryAttr>(kKernelInfoAttr);
  if (!all)
    return map;
  for (NamedAttribute entry : all) {
    auto d = dyn_cast<DictionaryAttr>(entry.getValue());
    if (!d)
      continue;
    KernelInfo &info = map[entry.getName().str()];
    info.scratchBytes = integer(d, "scratch_bytes");
    auto types = d.getAs<ArrayAttr>("scratch");
    auto offsets = d.getAs<DenseI64ArrayAttr>("scratch_offsets");
    if (types && offsets)
      for (auto [t, offset] : llvm::zip(types, offsets.asArrayRef()))
        info.scratch.push_back(
            KernelScratch{cast<TypeAttr>(t).getValue(), offset});
    if (auto launches = d.getAs<ArrayAttr>("launches"))
      for (Attribute a : launches) {
        auto l = cast<DictionaryAttr>(a);
        GpuLaunch launch;
        if (auto s = l.getAs<StringAttr>("name"))
          launch.name = s.str();
        if (auto s = l.getAs<StringAttr>("strategy"))
          launch.strategy = s.str();
        launch.grid = triple(l, "grid");
        launch.block = triple(l, "block");
        launch.sharedBytes = integer(l, "shared");
        info.launches.push_back(std::move(launch));
      }
  }
  return map;
}

void loom::writeKernelInfo(ModuleOp kernels, const KernelInfoMap &map) {
  Builder b(kernels.getContext());
  SmallVector<NamedAttribute> entries;
  for (const auto &[name, info] : map) {
    SmallVector<Attribute> types;
    SmallVector<int64_t> offsets;
    for (const KernelScratch &s : info.scratch) {
      types.push_back(TypeAttr::get(s.type));
      offsets.push_back(s.offset);
    }
    SmallVector<Attribute> launches;
    for (const GpuLaunch &l : info.launches)
      launches.push_back(b.getDictionaryAttr({
          b.getNamedAttr("name", b.getStringAttr(l.name)),
          b.getNamedAttr("strategy", b.getStringAttr(l.strategy)),
          b.getNamedAttr("grid", b.getDenseI64ArrayAttr(l.grid)),
          b.getNamedAttr("block", b.getDenseI64ArrayAttr(l.block)),
          b.getNamedAttr("shared", b.getI64IntegerAttr(l.sharedBytes)),
      }));
    SmallVector<NamedAttribute> fields{
        b.getNamedAttr("scratch", b.getArrayAttr(types)),
        b.getNamedAttr("scratch_offsets", b.getDenseI64ArrayAttr(offsets)),
        b.getNamedAttr("scratch_bytes", b.getI64IntegerAttr(info.scratchBytes)),
    };
    if (!launches.empty())
      fields.push_back(b.getNamedAttr("launches", b.getArrayAttr(launches)));
    entries.push_back(b.getNamedAttr(name, b.getDictionaryAttr(fields)));
  }
  kernels->setAttr(kKernelInfoAttr, b.getDictionaryAttr(entries));
}
