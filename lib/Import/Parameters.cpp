//===- Parameters.cpp - Writing imported parameter values -----------------===//

#include "loom/Import/Import.h"

#include "loomrt/Safetensors.h"

using namespace mlir;

static std::optional<loomrt::DType> toDType(Type type) {
  if (type.isF32())
    return loomrt::DType::F32;
  if (type.isF64())
    return loomrt::DType::F64;
  if (type.isF16())
    return loomrt::DType::F16;
  if (type.isBF16())
    return loomrt::DType::BF16;
  if (type.isInteger(64))
    return loomrt::DType::I64;
  if (type.isInteger(32))
    return loomrt::DType::I32;
  if (type.isInteger(8))
    return loomrt::DType::I8;
  if (type.isInteger(1))
    return loomrt::DType::Bool;
  return std::nullopt;
}

int64_t loom::ParameterStore::getTotalBytes() const {
  int64_t total = 0;
  for (const ParameterTensor &t : tensors)
    total += t.zeros ? t.type.getNumElements() *
                           ((t.type.getElementTypeBitWidth() + 7) / 8)
                     : static_cast<int64_t>(t.data.size());
  return total;
}

bool loom::ParameterStore::writeSafetensors(llvm::StringRef path,
                                            std::string &error) const {
  loomrt::SafetensorsWriter writer;
  for (const ParameterTensor &t : tensors) {
    auto dtype = toDType(t.type.getElementType());
    if (!dtype) {
      error = "parameter '" + t.name + "' has an element type safetensors "
              "cannot store";
      return false;
    }
    std::vector<int64_t> shape(t.type.getShape().begin(),
                               t.type.getShape().end());
    if (t.zeros)
      writer.addZeros(t.name, *dtype, shape);
    else
      writer.addBorrowed(t.name, *dtype, shape, t.data.data(), t.data.size());
  }
  writer.setMetadata("format", "loom-params");
  return writer.write(path.str(), &error);
}
