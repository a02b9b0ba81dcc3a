//===- OnnxExportTest.cpp - Trained weights written back into ONNX models -===//

#include "Fixtures.h"

#include "loomrt/OnnxExport.h"

#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <sys/wait.h>

namespace loomrt::test {
namespace {

/// A model with float initializers w [4, 1] and b [1], an int64 initializer
/// that is not a parameter, and one node.
void writeModel(const std::string &path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("loomrt-test");
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("regression");
  onnx::TensorProto *w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  w->add_dims(4);
  w->add_dims(1);
  for (int i = 0; i < 4; ++i)
    w->add_float_data(0.0f);
  onnx::TensorProto *b = graph->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto_DataType_FLOAT);
  b->add_dims(1);
  b->add_float_data(0.0f);
  onnx::TensorProto *shape = graph->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto_DataType_INT64);
  shape->add_dims(2);
  shape->add_int64_data(-1);
  shape->add_int64_data(4);
  onnx::NodeProto *node = graph->add_node();
  node->set_op_type("MatMul");
  node->set_name("/fc/MatMul");
  node->add_input("x");
  node->add_input("w");
  node->add_output("y");
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  writeBytes(path, bytes);
}

onnx::ModelProto readModel(const std::string &path) {
  onnx::ModelProto model;
  std::string bytes = readBytes(path);
  EXPECT_TRUE(model.ParseFromString(bytes));
  return model;
}

TEST(OnnxExport, ReplacesInitializersByName) {
  ASSERT_TRUE(onnxExportSupported());
  TempDir dir;
  std::string src = dir.file("model.onnx"), dst = dir.file("trained.onnx");
  writeModel(src);
  std::map<std::string, NpyArray> weights;
  weights["w"] = f32Array({4, 1}, {1.5f, -2, 3, 0.25f});
  weights["b"] = f32Array({1}, {0.75f});
  std::vector<std::string> replaced;
  std::string error;
  ASSERT_TRUE(exportOnnx(src, dst, weights, &replaced, &error)) << error;
  EXPECT_EQ(replaced, (std::vector<std::string>{"b", "w"}));
  onnx::ModelProto model = readModel(dst);
  EXPECT_EQ(model.producer_name(), "loomrt-test");
  ASSERT_EQ(model.graph().initializer_size(), 3);
  const onnx::TensorProto &w = model.graph().initializer(0);
  EXPECT_EQ(w.float_data_size(), 0);
  EXPECT_EQ(w.raw_data(),
            std::string(weights["w"].data.begin(), weights["w"].data.end()));
  EXPECT_EQ(model.graph().initializer(2).int64_data_size(), 2);
  EXPECT_EQ(model.graph().node(0).name(), "/fc/MatMul");

  // A weight of another shape, or one the model lacks, is refused.
  weights["w"] = f32Array({1, 4}, {0, 0, 0, 0});
  EXPECT_FALSE(exportOnnx(src, dst, weights, nullptr, &error));
  EXPECT_NE(error.find("initializer 'w' has ONNX type 1 [4, 1], the trained "
                       "tensor is f32 [1, 4]"),
            std::string::npos)
      << error;
  weights["w"] = f32Array({4, 1}, {0, 0, 0, 0});
  weights["fc2.weight"] = f32Array({1}, {0});
  EXPECT_FALSE(exportOnnx(src, dst, weights, nullptr, &error));
  EXPECT_NE(error.find("no initializer 'fc2.weight'"), std::string::npos)
      << error;
  writeBytes(src, "not a protobuf \xff\xff\xff");
  EXPECT_FALSE(exportOnnx(src, dst, weights, nullptr, &error));
  EXPECT_NE(error.find("not a valid ONNX model"), std::string::npos) << error;
}

TEST(OnnxExport, LoomRunExportsTrainedWeights) {
  TempDir dir;
  std::string model = dir.file("model.loom");
  std::filesystem::create_directories(model);
  ASSERT_TRUE(writeRegressionArtifact(model));
  std::string data = dir.file("data.npz");
  ASSERT_TRUE(writeRegressionData(data, 16));
  std::string src = dir.file("model.onnx"), dst = dir.file("trained.onnx");
  std::string params = dir.file("params.safetensors");
  writeModel(src);
  std::string command = std::string(LOOMRT_LOOM_RUN_PATH) + " '" + model +
                        "' --train --data '" + data +
                        "' --steps 5 --quiet --save-params '" + params +
                        "' --export-onnx '" + dst + "' --onnx '" + src + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::string error;
  auto trained = SafetensorsFile::open(params, &error);
  ASSERT_TRUE(trained) << error;
  onnx::ModelProto out = readModel(dst);
  const TensorView *w = trained->find("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(out.graph().initializer(0).raw_data(),
            std::string(reinterpret_cast<const char *>(w->data), w->nbytes));

  // Alone, from the params file; and without a source model it says so.
  std::string again = dir.file("again.onnx");
  command = std::string(LOOMRT_LOOM_RUN_PATH) + " '" + model +
            "' --export-onnx='" + again + "' --onnx '" + src + "' --params '" +
            params + "' --quiet";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_EQ(readBytes(again), readBytes(dst));
  command = std::string(LOOMRT_LOOM_RUN_PATH) + " '" + model +
            "' --export-onnx='" + again + "' 2>/dev/null";
  int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

} // namespace
} // namespace loomrt::test
