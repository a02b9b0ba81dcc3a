//===- DataParallel.cpp - Data parallelism and ZeRO in the training step --===//

#include "DataParallel.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace loom;

LogicalResult DataParallel::setUp(ModuleOp module, StringRef optimizer) {
  if (ranks < 1)
    return module.emitError() << "dp must be at least 1, got " << ranks;
  if (zero < 0 || zero > 3)
    return module.emitError() << "zero must be 0, 1, 2 or 3, got " << zero;
  if (zero > 0 && ranks == 1)
    return module.emitError()
           << "zero=" << zero << " shards over the data-parallel ranks: it "
           << "needs dp > 1";
  if (shardsUpdate() && optimizer == "adafactor")
    return module.emitError()
           << "zero=" << zero << " does not shard adafactor's factored "
           << "state; use zero=0 or another optimizer";
  if (!enabled())
    return success();
  FailureOr<std::vector<MeshAxis>> mesh = getMesh(module);
  if (failed(mesh))
    return failure();
  for (const MeshAxis &a : *mesh)
    if (a.name == axis && a.size != ranks)
      return module.emitError()
             << "the module's mesh has axis '" << axis << "' of size "
             << a.size << ", not dp=" << ranks;
  if (llvm::none_of(*mesh, [&](const MeshAxis &a) { return a.name == axis; }))
    mesh->insert(mesh->begin(), MeshAxis{axis, ranks});
  setMesh(module, *mesh);
  return success();
}

RankedTensorType DataParallel::shardType(RankedTensorType full) const {
  int64_t numel = full.getNumElements();
  return RankedTensorType::get({(numel + ranks - 1) / ranks},
                               full.getElementType());
}

DictionaryAttr DataParallel::shardAttr(Builder &b,
                                       RankedTensorType full) const {
  return b.getDictionaryAttr(
      {b.getNamedAttr("axis", b.getStringAttr(axis)),
       b.getNamedAttr("shape", b.getDenseI64ArrayAttr(full.getShape()))});
}

Value DataParallel::mean(OpBuilder &b, Location loc, Value x) const {
  return AllReduceOp::create(b, loc, x.getType(), x, axis,
                             CollectiveReduce::Mean);
}

Value DataParallel::sum(OpBuilder &b, Location loc, Value x) const {
  return AllReduceOp::create(b, loc, x.getType(), x, axis,
                             CollectiveReduce::Sum);
}

Value DataParallel::flatten(OpBuilder &b, Location loc, Value x) const {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t numel = type.getNumElements();
  int64_t padded = shardType(type).getDimSize(0) * ranks;
  Value flat = ReshapeOp::create(
      b, loc, RankedTensorType::get({numel}, type.getElementType()), x);
  if (padded == numel)
    return flat;
  return PadOp::create(
      b, loc, RankedTensorType::get({padded}, type.getElementType()), flat,
      b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({padded - numel}),
      b.getDenseI64ArrayAttr({0}));
}

Value DataParallel::gradientMean(OpBuilder &b, Location loc, Value g,
                                 StringRef param) const {
  Value reduced = mean(b, loc, g);
  reduced.getDefiningOp()->setAttr(kGradientOfAttr, b.getStringAttr(param));
  return reduced;
}

Value DataParallel::gradientShard(OpBuilder &b, Location loc, Value g,
                                  StringRef param) const {
  auto type = cast<RankedTensorType>(g.getType());
  if (zero == 1)
    return RankSliceOp::create(b, loc, shardType(type),
                               flatten(b, loc, gradientMean(b, loc, g, param)),
                               axis);
  auto scatter = ReduceScatterOp::create(b, loc, shardType(type),
                                         flatten(b, loc, g), axis,
                                         CollectiveReduce::Mean);
  scatter->setAttr(kGradientOfAttr, b.getStringAttr(param));
  return scatter;
}

Value DataParallel::localShard(OpBuilder &b, Location loc, Value x) const {
  auto type = cast<RankedTensorType>(x.getType());
  return RankSliceOp::create(b, loc, shardType(type), flatten(b, loc, x),
                             axis);
}

Value DataParallel::gather(OpBuilder &b, Location loc, Value shard,
                           RankedTensorType full) const {
  auto st = cast<RankedTensorType>(shard.getType());
  int64_t padded = st.getDimSize(0) * ranks;
  int64_t numel = full.getNumElements();
  Value flat = AllGatherOp::create(
      b, loc, RankedTensorType::get({padded}, st.getElementType()), shard,
      axis);
  if (padded != numel)
    flat = SliceOp::create(
        b, loc, RankedTensorType::get({numel}, st.getElementType()), flat,
        b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({numel}),
        b.getDenseI64ArrayAttr({1}));
  return ReshapeOp::create(b, loc, full, flat);
}

LogicalResult DataParallel::shardEntryParams(ModuleOp module) const {
  SymbolTable symbols(module);
  SmallVector<func::FuncOp> entries;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate())
      continue;
    // Entries that take whole parameters (the step and the update take
    // their shards already).
    bool whole = false, sharded = false;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, kParamAttr)) {
        whole = true;
        sharded |= func.getArgAttr(i, kShardAttr) != nullptr;
      }
    if (whole && !sharded)
      entries.push_back(func);
  }
  for (func::FuncOp whole : entries) {
    std::string name = whole.getSymName().str();
    if (failed(symbols.rename(whole, name + ".whole")))
      return whole.emitError("cannot rename @") << name;
    whole.setPrivate();
    OpBuilder b(whole);
    b.setInsertionPointAfter(whole);
    Location loc = whole.getLoc();
    SmallVector<Type> argTypes(whole.getArgumentTypes());
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0; i < whole.getNumArguments(); ++i) {
      DictionaryAttr attrs = whole.getArgAttrDict(i);
      argAttrs.push_back(attrs ? attrs : b.getDictionaryAttr({}));
      if (!whole.getArgAttr(i, kParamAttr))
        continue;
      auto type = cast<RankedTensorType>(argTypes[i]);
      argTypes[i] = shardType(type);
      NamedAttrList list(argAttrs.back());
      list.set(kShardAttr, shardAttr(b, type));
      argAttrs.back() = list.getDictionary(b.getContext());
    }
    auto entry = func::FuncOp::create(
        b, loc, name, b.getFunctionType(argTypes, whole.getResultTypes()));
    entry.setAllArgAttrs(argAttrs);
    if (ArrayAttr results = whole.getAllResultAttrs())
      entry.setAllResultAttrs(results);
    symbols.insert(entry);
    Block *body = entry.addEntryBlock();
    b.setInsertionPointToStart(body);
    SmallVector<Value> args(body->getArguments());
    for (unsigned i = 0; i < whole.getNumArguments(); ++i)
      if (whole.getArgAttr(i, kParamAttr))
        args[i] = gather(b, loc, args[i],
                         cast<RankedTensorType>(whole.getArgumentTypes()[i]));
    auto call = func::CallOp::create(b, loc, whole, args);
    func::ReturnOp::create(b, loc, call.getResults());
  }
  return success();
}
