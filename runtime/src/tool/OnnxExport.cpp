//===- OnnxExport.cpp - Trained weights into a copy of an ONNX model ------===//
//
// The model is parsed and written by protobuf (onnx_proto), never by hand.
// Only initializers are touched; the graph, its metadata and everything else
// round-trip unchanged.
//
//===----------------------------------------------------------------------===//

#include "loomrt/OnnxExport.h"

#include "../Support.h"

#include <onnx/onnx_pb.h>

#include <limits>
#include <set>

namespace loomrt {

namespace {

std::optional<int> onnxType(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return onnx::TensorProto_DataType_DOUBLE;
  case DType::F32:
    return onnx::TensorProto_DataType_FLOAT;
  case DType::F16:
    return onnx::TensorProto_DataType_FLOAT16;
  case DType::BF16:
    return onnx::TensorProto_DataType_BFLOAT16;
  case DType::I64:
    return onnx::TensorProto_DataType_INT64;
  case DType::I32:
    return onnx::TensorProto_DataType_INT32;
  case DType::I16:
    return onnx::TensorProto_DataType_INT16;
  case DType::I8:
    return onnx::TensorProto_DataType_INT8;
  case DType::U8:
    return onnx::TensorProto_DataType_UINT8;
  case DType::Bool:
    return onnx::TensorProto_DataType_BOOL;
  }
  return std::nullopt;
}

bool exportImpl(const std::string &src, const std::string &dst,
                const std::map<std::string, NpyArray> &weights,
                std::vector<std::string> *replaced, std::string &error) {
  std::vector<uint8_t> bytes;
  detail::ErrorSink sink{&error, nullptr};
  if (!detail::readWholeFile(src, bytes, sink))
    return false;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    error = src + ": larger than 2 GiB, which protobuf cannot parse (models "
                  "with external data are not supported)";
    return false;
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    error = src + ": not a valid ONNX model (protobuf parse failed)";
    return false;
  }
  bytes.clear();
  bytes.shrink_to_fit();
  std::set<std::string> done;
  onnx::GraphProto *graph = model.mutable_graph();
  for (int i = 0; i < graph->initializer_size(); ++i) {
    onnx::TensorProto *t = graph->mutable_initializer(i);
    auto it = weights.find(t->name());
    if (it == weights.end())
      continue;
    const NpyArray &w = it->second;
    std::vector<int64_t> dims(t->dims().begin(), t->dims().end());
    std::optional<int> type = onnxType(w.dtype);
    if (!type || *type != t->data_type() || dims != w.shape) {
      error = src + ": initializer " + detail::quoteName(t->name()) +
              " has ONNX type " + std::to_string(t->data_type()) + " " +
              detail::formatShape(dims) + ", the trained tensor is " +
              std::string(dtypeToShortName(w.dtype)) + " " +
              detail::formatShape(w.shape);
      return false;
    }
    // raw_data is little-endian, as NpyArray is; the typed fields go.
    t->clear_float_data();
    t->clear_double_data();
    t->clear_int32_data();
    t->clear_int64_data();
    t->clear_uint64_data();
    t->clear_string_data();
    t->clear_external_data();
    t->set_data_location(onnx::TensorProto_DataLocation_DEFAULT);
    t->set_raw_data(w.data.data(), w.data.size());
    done.insert(t->name());
  }
  for (const auto &[name, w] : weights)
    if (!done.count(name)) {
      error = src + ": no initializer " + detail::quoteName(name) +
              " to receive the trained tensor (was the artifact compiled "
              "from this model?)";
      return false;
    }
  std::string out;
  if (!model.SerializeToString(&out)) {
    error = dst + ": cannot serialize the model (over 2 GiB?)";
    return false;
  }
  detail::ByteSpan span{reinterpret_cast<const uint8_t *>(out.data()),
                        out.size()};
  if (!detail::writeFileAtomically(dst, {span}, sink))
    return false;
  if (replaced)
    replaced->assign(done.begin(), done.end());
  return true;
}

} // namespace

bool onnxExportSupported() noexcept { return true; }

bool exportOnnx(const std::string &sourcePath, const std::string &outPath,
                const std::map<std::string, NpyArray> &weights,
                std::vector<std::string> *replaced,
                std::string *error) noexcept {
  std::string message;
  bool ok = false;
  try {
    ok = exportImpl(sourcePath, outPath, weights, replaced, message);
  } catch (...) {
    message = outPath + ": ONNX export failed (out of memory?)";
  }
  if (!ok && error) {
    try {
      *error = message;
    } catch (...) {
    }
  }
  return ok;
}

} // namespace loomrt
