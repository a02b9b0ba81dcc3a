#!/usr/bin/python3
"""Writes the seed corpora of Loom's fuzz harnesses: test/fuzz/corpus/<harness>/.

Usage:
  test/fuzz/make_seeds.py [--out-dir DIR]      (default: test/fuzz/corpus)

The seeds are the repository's own small files (examples/onnx/*.onnx below
100 KB, test/Import/ONNX/Inputs/*.onnx, examples/json/*.json,
test/Import/JSON/Inputs/**/*.json, the safetensors files beside them) plus
small files made here:
  fuzz_onnx_import  one tiny model per operator family the importer maps
                    (opset 17, and a few at opset 11 for the version converter)
  fuzz_json_import  one tiny graph per JSON op (docs/json-format.md)
  fuzz_plan         small plan.json files (docs/plan-format.md): CPU and CUDA,
                    every step kind and GEMM epilogue, the training names
  fuzz_safetensors  every dtype, scalars, empty tensors, metadata, padding
  fuzz_npy          every dtype, both byte orders, Fortran order, versions
                    1.0/2.0/3.0, scalars and empty arrays
  fuzz_npz          stored, deflated and zip64 archives, nested member names

Requirements: Debian's python3-onnx and python3-numpy (what
utils/gen_onnx_models.py needs). Output is deterministic: fixed seeds, fixed
zip timestamps, sorted keys. Every generated seed that should be valid is
checked to be (onnx.checker, numpy.load, json.loads); the harnesses
themselves tell what Loom thinks of them. The whole corpus stays well under
2 MB.
"""

import argparse
import glob
import io
import json
import os
import shutil
import struct
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_REPO_SEED = 100 * 1024


def write(out_dir, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(data)


def copy_repo_files(patterns, out_dir, prefix):
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(REPO, pattern), recursive=True)):
            if os.path.islink(path) or os.path.getsize(path) > MAX_REPO_SEED:
                continue
            rel = os.path.relpath(path, REPO).replace("/", "_")
            shutil.copyfile(path, os.path.join(out_dir, prefix + rel))


# --------------------------------------------------------------------------
# ONNX
# --------------------------------------------------------------------------

F = TensorProto.FLOAT
I64 = TensorProto.INT64
BOOL = TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const_init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def onnx_model(op, inputs, outputs, attrs=None, inits=(), opset=17,
               extra_nodes=(), node_inputs=None):
    node = helper.make_node(op, node_inputs or [i.name for i in inputs] +
                            [t.name for t in inits if t.name not in
                             [i.name for i in inputs]],
                            [o.name for o in outputs], name="/" + op,
                            **(attrs or {}))
    graph = helper.make_graph(list(extra_nodes) + [node], op.lower(), inputs,
                              outputs, initializer=list(inits))
    model = helper.make_model(graph, producer_name="loom-make_seeds",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9 if opset >= 19 else 8 if opset >= 15 else 6
    # An older onnx package (Debian's 1.12 knows opsets up to 17) cannot check
    # a newer opset; Loom's own ONNX library (1.23) then tells.
    if opset <= onnx.defs.onnx_opset_version():
        onnx.checker.check_model(model)
    return model.SerializeToString()


def onnx_seeds(out_dir):
    copy_repo_files(["examples/onnx/*.onnx", "test/Import/ONNX/Inputs/*.onnx"],
                    out_dir, "")
    rng = np.random.default_rng(7)
    w = lambda *s: rng.standard_normal(s).astype(np.float32)
    x4 = vi("x", F, [2, 3, 4, 4])
    x2 = vi("x", F, [2, 3])
    y2 = vi("y", F, [2, 3])
    out2 = vi("out", F, [2, 3])
    seeds = {}
    unary = ["Abs", "Ceil", "Cos", "Erf", "Exp", "Floor", "Identity", "Log",
             "Neg", "Reciprocal", "Relu", "Sigmoid", "Sin", "Softplus", "Sqrt",
             "Tanh", "Elu", "Selu", "HardSigmoid", "HardSwish", "LeakyRelu"]
    for op in unary:
        seeds["unary_" + op] = onnx_model(op, [x2], [out2])
    for op in ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean"]:
        seeds["binary_" + op] = onnx_model(op, [x2, vi("y", F, [3])], [out2])
    for op in ["Equal", "Greater", "Less"]:
        seeds["compare_" + op] = onnx_model(op, [x2, y2], [vi("out", BOOL, [2, 3])])
    seeds["not"] = onnx_model("Not", [vi("x", BOOL, [2, 3])], [vi("out", BOOL, [2, 3])])
    seeds["isnan"] = onnx_model("IsNaN", [x2], [vi("out", BOOL, [2, 3])], opset=17)
    seeds["where"] = onnx_model("Where", [vi("c", BOOL, [2, 3]), x2, y2], [out2])
    seeds["cast"] = onnx_model("Cast", [x2], [vi("out", TensorProto.DOUBLE, [2, 3])],
                               {"to": TensorProto.DOUBLE})
    seeds["castlike"] = onnx_model(
        "CastLike", [x2], [vi("out", TensorProto.FLOAT16, [2, 3])],
        inits=[const_init("t", np.zeros([1], np.float16))])
    seeds["clip"] = onnx_model("Clip", [x2], [out2], inits=[
        const_init("lo", np.float32(-1)), const_init("hi", np.float32(1))])
    seeds["prelu"] = onnx_model("PRelu", [x2], [out2],
                                inits=[const_init("slope", w(3))])
    seeds["gelu"] = onnx_model("Gelu", [x2], [out2], opset=20)
    seeds["matmul"] = onnx_model("MatMul", [x2], [vi("out", F, [2, 5])],
                                 inits=[const_init("w", w(3, 5))])
    seeds["gemm"] = onnx_model("Gemm", [x2], [vi("out", F, [2, 5])],
                               {"transB": 1, "alpha": 0.5},
                               inits=[const_init("w", w(5, 3)), const_init("b", w(5))])
    seeds["conv"] = onnx_model("Conv", [x4], [vi("out", F, [2, 6, 4, 4])],
                               {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3]},
                               inits=[const_init("w", w(6, 3, 3, 3)), const_init("b", w(6))])
    seeds["conv_group"] = onnx_model("Conv", [x4], [vi("out", F, [2, 3, 2, 2])],
                                     {"group": 3, "strides": [2, 2]},
                                     inits=[const_init("w", w(3, 1, 1, 1))])
    seeds["maxpool"] = onnx_model("MaxPool", [x4], [vi("out", F, [2, 3, 2, 2])],
                                  {"kernel_shape": [2, 2], "strides": [2, 2]})
    seeds["avgpool"] = onnx_model("AveragePool", [x4], [vi("out", F, [2, 3, 4, 4])],
                                  {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                   "count_include_pad": 1})
    for op in ["GlobalAveragePool", "GlobalMaxPool"]:
        seeds[op] = onnx_model(op, [x4], [vi("out", F, [2, 3, 1, 1])])
    seeds["batchnorm"] = onnx_model(
        "BatchNormalization", [x4], [vi("out", F, [2, 3, 4, 4])],
        inits=[const_init(n, np.abs(w(3)) + 0.1) for n in ["s", "b", "m", "v"]])
    seeds["layernorm"] = onnx_model("LayerNormalization", [x2], [out2], {"axis": -1},
                                    inits=[const_init("s", w(3)), const_init("b", w(3))])
    for op in ["Softmax", "LogSoftmax"]:
        seeds[op] = onnx_model(op, [x2], [out2], {"axis": 1})
    for op in ["ReduceMax", "ReduceMean", "ReduceMin", "ReduceLogSum",
               "ReduceLogSumExp", "ReduceSumSquare"]:
        seeds[op] = onnx_model(op, [x2], [vi("out", F, [2, 1])], {"axes": [1]})
    seeds["ReduceSum"] = onnx_model("ReduceSum", [x2], [vi("out", F, [2])],
                                    {"keepdims": 0},
                                    inits=[const_init("axes", np.array([1], np.int64))])
    seeds["flatten"] = onnx_model("Flatten", [x4], [vi("out", F, [2, 48])])
    seeds["reshape"] = onnx_model("Reshape", [x4], [vi("out", F, [6, 16])],
                                  inits=[const_init("s", np.array([6, -1], np.int64))])
    seeds["transpose"] = onnx_model("Transpose", [x4], [vi("out", F, [4, 4, 3, 2])],
                                    {"perm": [3, 2, 1, 0]})
    seeds["squeeze"] = onnx_model("Squeeze", [vi("x", F, [2, 1, 3])], [out2],
                                  inits=[const_init("a", np.array([1], np.int64))])
    seeds["unsqueeze"] = onnx_model("Unsqueeze", [x2], [vi("out", F, [2, 1, 3])],
                                    inits=[const_init("a", np.array([1], np.int64))])
    seeds["expand"] = onnx_model("Expand", [vi("x", F, [1, 3])], [out2],
                                 inits=[const_init("s", np.array([2, 3], np.int64))])
    seeds["tile"] = onnx_model("Tile", [x2], [vi("out", F, [4, 3])],
                               inits=[const_init("r", np.array([2, 1], np.int64))])
    seeds["concat"] = onnx_model("Concat", [x2, y2], [vi("out", F, [4, 3])], {"axis": 0})
    seeds["split"] = onnx_model("Split", [vi("x", F, [4, 3])],
                                [vi("a", F, [2, 3]), vi("b", F, [2, 3])], {"axis": 0},
                                inits=[const_init("s", np.array([2, 2], np.int64))])
    seeds["slice"] = onnx_model("Slice", [x4], [vi("out", F, [2, 3, 2, 4])],
                                inits=[const_init(n, np.array(v, np.int64)) for n, v in
                                       [("st", [3]), ("en", [1]), ("ax", [2]), ("sp", [-1])]])
    seeds["gather"] = onnx_model("Gather", [x2], [vi("out", F, [2, 2])], {"axis": 1},
                                 inits=[const_init("i", np.array([0, 2], np.int64))])
    # Loom folds GatherElements of constants only.
    seeds["gather_elements"] = onnx_model(
        "GatherElements", [], [vi("out", F, [2, 1])], {"axis": 1}, node_inputs=["d", "i"],
        extra_nodes=[helper.make_node("Constant", [], ["d"], name="/d",
                                      value=const_init("dv", w(2, 3))),
                     helper.make_node("Constant", [], ["i"], name="/i",
                                      value=const_init("iv", np.array([[1], [0]], np.int64)))])
    seeds["dropout"] = onnx_model("Dropout", [x2], [out2], inits=[
        const_init("r", np.float32(0.25)), const_init("t", np.array(True))])
    seeds["sce_loss"] = onnx_model(
        "SoftmaxCrossEntropyLoss", [vi("x", F, [2, 5]), vi("l", I64, [2])],
        [vi("out", F, [])], {"reduction": "mean"})
    seeds["constant"] = onnx_model(
        "Add", [x2], [out2], node_inputs=["x", "c"],
        extra_nodes=[helper.make_node("Constant", [], ["c"], name="/c",
                                      value=const_init("v", w(2, 3)))])
    shape_chain = [
        helper.make_node("Shape", ["x"], ["s"], name="/shape"),
        helper.make_node("ConstantOfShape", ["s"], ["z"], name="/cos",
                         value=const_init("v", np.array([1.0], np.float32))),
        helper.make_node("Size", ["x"], ["n"], name="/size"),
        helper.make_node("Range", ["r0", "n", "r1"], ["r"], name="/range"),
    ]
    graph = helper.make_graph(
        shape_chain + [helper.make_node("Add", ["x", "z"], ["out"], name="/add")],
        "shapes", [x2], [out2, vi("r", I64, [6])],
        initializer=[const_init("r0", np.int64(0)), const_init("r1", np.int64(1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    seeds["shape_chain"] = model.SerializeToString()
    seq = [helper.make_node("SplitToSequence", ["x"], ["s"], name="/sts", axis=0),
           helper.make_node("SequenceAt", ["s", "i"], ["out"], name="/at")]
    graph = helper.make_graph(seq, "seq", [x2], [vi("out", F, [1, 3])],
                              initializer=[const_init("i", np.int64(1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    seeds["sequence"] = model.SerializeToString()
    # Old opsets go through ONNX's version converter first.
    seeds["opset11_reducesum"] = onnx_model("ReduceSum", [x2], [vi("out", F, [2, 1])],
                                            {"axes": [1]}, opset=11)
    seeds["opset11_split"] = onnx_model("Split", [vi("x", F, [4, 3])],
                                        [vi("a", F, [1, 3]), vi("b", F, [3, 3])],
                                        {"axis": 0, "split": [1, 3]}, opset=11)
    seeds["opset9_upsample_free"] = onnx_model("Relu", [x2], [out2], opset=9)
    seeds["opset11_clip"] = onnx_model("Clip", [x2], [out2], opset=11, inits=[
        const_init("lo", np.float32(0)), const_init("hi", np.float32(6))])
    for name, data in sorted(seeds.items()):
        write(out_dir, "gen_" + name + ".onnx", data)


# --------------------------------------------------------------------------
# JSON graphs
# --------------------------------------------------------------------------

def graph(inputs, nodes, outputs, parameters=(), **extra):
    g = {"format": "loom-graph", "version": 1}
    g.update(extra)
    g["inputs"] = [{"name": n, "shape": s, "dtype": d} for n, s, d in inputs]
    if parameters:
        g["parameters"] = list(parameters)
    g["nodes"] = nodes
    g["outputs"] = outputs
    return json.dumps(g, sort_keys=False, separators=(",", ":")) + "\n"


def node(id, op, inputs, attrs=None, outputs=None):
    n = {"id": id, "op": op, "inputs": inputs}
    if attrs:
        n["attrs"] = attrs
    if outputs:
        n["outputs"] = outputs
    return n


def json_seeds(out_dir):
    copy_repo_files(["examples/json/*.json", "test/Import/JSON/Inputs/**/*.json"],
                    out_dir, "")
    x = ("x", [2, 3], "f32")
    y = ("y", [2, 3], "f32")
    seeds = {}
    for op in ["add", "sub", "mul", "div", "max", "min", "pow"]:
        seeds[op] = graph([x, y], [node("n", op, ["x", "y"])], ["n"])
    for op in ["neg", "abs", "exp", "log", "tanh", "sigmoid", "relu", "erf", "sqrt",
               "rsqrt", "floor", "cos", "sin", "stop_gradient", "softmax",
               "log_softmax"]:
        seeds[op] = graph([x], [node("n", op, ["x"])], ["n"])
    seeds["gelu_tanh"] = graph([x], [node("n", "gelu", ["x"], {"approximate": "tanh"})], ["n"])
    seeds["compare_select"] = graph(
        [x, y], [node("c", "compare", ["x", "y"], {"predicate": "le"}),
                 node("s", "select", ["c", "x", "y"])], ["s"])
    seeds["cast"] = graph([("x", [4], "i64")], [node("n", "cast", ["x"], {"to": "bf16"})], ["n"])
    seeds["matmul_batched"] = graph(
        [("a", [2, 3, 4], "f16"), ("b", [5, 4], "f16")],
        [node("n", "matmul", ["a", "b"], {"transpose_b": True})], ["n"])
    seeds["conv2d"] = graph(
        [("x", [1, 4, 5, 5], "f32")],
        [node("n", "conv2d", ["x", "w", "b"],
              {"strides": [2, 1], "padding": [1, 0, 1, 2], "dilations": [1, 2], "groups": 2})],
        ["n"], parameters=[
            {"name": "w", "shape": [4, 2, 3, 3], "dtype": "f32", "init": {"normal": {"std": 0.1}}},
            {"name": "b", "shape": [4], "dtype": "f32", "init": {"constant": 0.5}}])
    seeds["reduce"] = graph(
        [("x", [2, 3, 4], "f64")],
        [node("a", "reduce_sum", ["x"], {"dims": [2, 0]}),
         node("b", "reduce_max", ["x"], {"dims": [1], "keep_dims": True}),
         node("c", "reduce_min", ["x"]), node("d", "reduce_mean", ["x"], {"dims": [0]})],
        ["a", "b", "c", "d"])
    seeds["shape_ops"] = graph(
        [("x", [2, 3, 4], "f32")],
        [node("r", "reshape", ["x"], {"shape": [6, -1]}),
         node("t", "transpose", ["r"], {"perm": [1, 0]}),
         node("b", "broadcast_in_dim", ["t"], {"shape": [5, 4, 6], "dims": [1, 2]}),
         node("s", "slice", ["x"], {"start": [-1, 0], "limit": [3, 2], "stride": [1, 2],
                                    "axes": [1, 2]}),
         node("c", "concat", ["x", "x"], {"dim": 0})],
        ["b", "s", "c"])
    seeds["gather"] = graph(
        [("t", [10, 4], "f32"), ("i", [2, 3], "i32")],
        [node("g", "gather", ["t", "i"], {"axis": 0})], ["g"])
    seeds["norms"] = graph(
        [("x", [2, 3, 4], "f32")],
        [node("l", "layer_norm", ["x", "s", "b"], {"axis": -1, "epsilon": 1e-3}),
         node("r", "rms_norm", ["x", "s"])], ["l", "r"],
        parameters=[{"name": "s", "shape": [4], "dtype": "f32", "init": "ones"},
                    {"name": "b", "shape": [4], "dtype": "f32", "init": "zeros"}])
    seeds["batch_norm"] = graph(
        [("x", [2, 3, 4, 4], "f32")],
        [node("st", "batch_norm_stats", ["x"], outputs=["m", "v"]),
         node("bn", "batch_norm", ["x", "s", "b", "m", "v"], {"epsilon": 1e-5})], ["bn"],
        parameters=[{"name": "s", "shape": [3], "dtype": "f32",
                     "init": {"uniform": {"low": 0.5, "high": 1.5}}},
                    {"name": "b", "shape": [3], "dtype": "f32", "init": "zeros"}])
    seeds["pools"] = graph(
        [("x", [1, 2, 6, 6], "f32")],
        [node("m", "max_pool2d", ["x"], {"kernel": [3, 3], "strides": [2, 2], "padding": [1, 1]}),
         node("a", "avg_pool2d", ["x"], {"kernel": [2, 2], "count_include_pad": True})],
        ["m", "a"])
    seeds["dropout"] = graph([x], [node("d", "dropout", ["x"], {"ratio": 0.25}),
                                   node("e", "dropout", ["d"])], ["e"], seed=3)
    seeds["losses"] = graph(
        [("logits", [4, 5], "f32"), ("labels", [4], "i64"), ("t", [4, 5], "f32")],
        [node("ce", "cross_entropy", ["logits", "labels"],
              {"reduction": "sum", "ignore_index": -100}),
         node("mse", "mse", ["logits", "t"], {"reduction": "none"})], ["ce", "mse"])
    seeds["constants"] = graph(
        [], [node("a", "constant", [], {"value": [[1, 2], [3, 4]], "dtype": "i32"}),
             node("b", "constant", [], {"value": 0.5, "shape": [2, 2], "dtype": "bf16"}),
             node("c", "constant", [], {"value": True, "dtype": "i1"}),
             node("d", "constant", [], {"value": [1.0, 2.0, 3.0, 4.0], "shape": [2, 2],
                                        "dtype": "f64"})],
        ["a", "b", "c", "d"])
    seeds["init_file"] = graph(
        [], [node("n", "add", ["w", "d2"])], ["n", "h"],
        parameters=[{"name": "w", "shape": [2], "dtype": "f64",
                     "init": {"file": "weights.safetensors", "tensor": "d"}},
                    {"name": "d2", "shape": [2], "dtype": "f64", "init": "ones"},
                    {"name": "h", "shape": [4], "dtype": "f16",
                     "init": {"file": "weights.safetensors", "tensor": "h"}}])
    seeds["comments"] = ('// a comment\n{"format": "loom-graph", /* inline */ "version": 1,\n'
                         ' "nodes": [{"id": "n", "op": "relu", "inputs": ["x"]}],\n'
                         ' "inputs": [{"name": "x", "shape": [], "dtype": "f32"}],\n'
                         ' "outputs": ["n"]}\n')
    for name, text in sorted(seeds.items()):
        json.loads(text.split("\n", 1)[1] if text.startswith("//") else text) \
            if not text.startswith("//") else None
        write(out_dir, "gen_" + name + ".json", text)


# --------------------------------------------------------------------------
# plan.json
# --------------------------------------------------------------------------

def plan_json(entries, target="cpu", **top):
    p = {"format": "loom-plan", "version": 1, "target": target, "kernel_abi": 1,
         "kernels": None, "params": None}
    p.update(top)
    p["entries"] = entries
    return json.dumps(p, separators=(",", ":")) + "\n"


def buf(offset, shape, dtype="f32"):
    return {"offset": offset, "dtype": dtype, "shape": shape}


def gemm(a, b, c, m, n, k, batch=1, ta=False, tb=False, sa=None, sb=None, sc=None, **kw):
    s = {"kind": "gemm", "a": a, "b": b, "c": c, "batch": batch, "m": m, "n": n, "k": k,
         "trans_a": ta, "trans_b": tb,
         "stride_a": m * k if sa is None else sa, "stride_b": k * n if sb is None else sb,
         "stride_c": m * n if sc is None else sc}
    s.update(kw)
    return s


def plan_seeds(out_dir):
    seeds = {}
    # One GEMM and a copy: loads and runs (no kernels file needed).
    seeds["gemm_copy"] = plan_json([{
        "name": "forward", "arena_bytes": 512,
        "buffers": [buf(0, [2, 3]), buf(64, [3, 4]), buf(128, [2, 4]), buf(192, [8])],
        "inputs": [{"name": "x", "kind": "input", "buffer": 0},
                   {"name": "w", "kind": "input", "buffer": 1}],
        "outputs": [{"name": "y", "kind": "output", "buffer": 3}],
        "steps": [gemm(0, 1, 2, 2, 4, 3), {"kind": "copy", "src": 2, "dst": 3}]}])
    # Batched GEMMs with every epilogue, f64, transposes, a shared operand.
    epilogues = ["none", "bias", "relu", "gelu", "bias_relu", "bias_gelu"]
    steps = []
    for i, e in enumerate(epilogues):
        s = gemm(0, 1, 2 + i, 2, 3, 4, batch=2, ta=i % 2 == 1, tb=i % 3 == 0, sb=0,
                 epilogue=e)
        if "bias" in e:
            s["bias"] = 8
        steps.append(s)
    buffers = [buf(0, [2, 2, 4], "f64"), buf(128, [4, 3], "f64")]
    buffers += [buf(256 + 128 * i, [2, 2, 3], "f64") for i in range(6)]
    buffers += [buf(1024, [3], "f64")]
    seeds["gemm_epilogues"] = plan_json([{
        "name": "forward", "arena_bytes": 1088, "buffers": buffers,
        "inputs": [{"name": "a", "kind": "input", "buffer": 0},
                   {"name": "b", "kind": "param", "buffer": 1},
                   {"name": "bias", "kind": "input", "buffer": 8}],
        "outputs": [{"name": "y%d" % i, "kind": "output", "buffer": 2 + i} for i in range(6)],
        "steps": steps}])
    # A training-shaped plan: kernels, params, state, step, grads, every entry.
    train_buffers = [buf(0, [4, 3]), buf(64, [3, 2]), buf(128, [4, 2]), buf(192, [], "f32"),
                     buf(256, [], "i64"), buf(320, [3, 2]), buf(384, [4], "i64"),
                     buf(448, [3, 2]), buf(512, [], "i64")]
    train = {"name": "train_step", "arena_bytes": 576, "buffers": train_buffers,
             "inputs": [{"name": "x", "kind": "input", "buffer": 0},
                        {"name": "labels", "kind": "input", "buffer": 6},
                        {"name": "w", "kind": "param", "buffer": 1},
                        {"name": "w.m", "kind": "state", "buffer": 5},
                        {"name": "step", "kind": "input", "buffer": 4}],
             "outputs": [{"name": "loss", "kind": "output", "buffer": 3},
                         {"name": "w", "kind": "output", "buffer": 7},
                         {"name": "w.m", "kind": "output", "buffer": 5},
                         {"name": "step", "kind": "output", "buffer": 8}],
             "steps": [gemm(0, 1, 2, 4, 2, 3),
                       {"kind": "kernel", "name": "loom_train_step_k0",
                        "buffers": [2, 6, 3, 1, 5, 4, 7, 8]}]}
    fb = {"name": "forward_backward", "arena_bytes": 256,
          "buffers": [buf(0, [4, 3]), buf(64, [3, 2]), buf(128, [], "f32"), buf(192, [3, 2])],
          "inputs": [{"name": "x", "kind": "input", "buffer": 0},
                     {"name": "w", "kind": "param", "buffer": 1}],
          "outputs": [{"name": "loss", "kind": "output", "buffer": 2},
                      {"name": "w", "kind": "grad", "buffer": 3}],
          "steps": [{"kind": "kernel", "name": "loom_fb_k0", "buffers": [0, 1, 2, 3]}]}
    seeds["train_cpu"] = plan_json([train, fb], kernels="kernels.so",
                                   params="params.safetensors",
                                   source_model="model.onnx")
    cuda_train = json.loads(json.dumps(train))
    cuda_train["steps"][1].update({"grid": [4, 1, 1], "block": [128, 1, 1],
                                   "shared_bytes": 1024})
    seeds["train_cuda"] = plan_json([cuda_train], target="cuda", sm=90,
                                    kernels="kernels.cubin", ptx="kernels.ptx",
                                    params="params.safetensors")
    seeds["cuda_ptx_only"] = plan_json([{
        "name": "forward", "arena_bytes": 128, "buffers": [buf(0, [4]), buf(64, [4])],
        "inputs": [{"name": "x", "kind": "input", "buffer": 0}],
        "outputs": [{"name": "y", "kind": "output", "buffer": 1}],
        "steps": [{"kind": "kernel", "name": "k", "buffers": [0, 1],
                   "grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 0}]}],
        target="cuda", sm=80, kernels=None, ptx="kernels.ptx")
    # Every dtype as a buffer, scalars and empty shapes, same-buffer outputs.
    dtypes = ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "ui8", "bool",
              "u8", "i1"]
    seeds["dtypes"] = plan_json([{
        "name": "forward", "arena_bytes": 64 * len(dtypes) + 64,
        "buffers": [buf(64 * i, [2] if i % 3 else [], d) for i, d in enumerate(dtypes)]
        + [buf(64 * len(dtypes), [0, 5])],
        "inputs": [{"name": "in%d" % i, "kind": "input", "buffer": i}
                   for i in range(len(dtypes))],
        "outputs": [{"name": "o", "kind": "output", "buffer": 0},
                    {"name": "o2", "kind": "output", "buffer": 0},
                    {"name": "empty", "kind": "output", "buffer": len(dtypes)}],
        "steps": []}])
    # The fused steps: attention forward and backward (grouped-query,
    # causal) and a language-model head forward and backward.
    shapes = [("q", [1, 2, 4, 8], "f32"), ("k", [1, 1, 4, 8], "f32"),
              ("v", [1, 1, 4, 8], "f32"), ("out", [1, 2, 4, 8], "f32"),
              ("lse", [1, 2, 4], "f32"), ("dout", [1, 2, 4, 8], "f32"),
              ("dq", [1, 2, 4, 8], "f32"), ("dk", [1, 1, 4, 8], "f32"),
              ("dv", [1, 1, 4, 8], "f32"), ("x", [4, 8], "f32"),
              ("w", [10, 8], "f32"), ("labels", [4], "i64"),
              ("loss", [], "f32"), ("hlse", [4], "f32"), ("dloss", [], "f32"),
              ("dx", [4, 8], "f32"), ("dw", [10, 8], "f32")]
    ids, fused_buffers, offset = {}, [], 0
    for name, shape, dtype in shapes:
        ids[name] = len(fused_buffers)
        fused_buffers.append(buf(offset, shape, dtype))
        size = 8 if dtype == "i64" else 4
        for d in shape:
            size *= d
        offset += (size + 63) // 64 * 64
    attention = {"kind": "attention", "node": "/attn", "q": ids["q"],
                 "k": ids["k"], "v": ids["v"], "out": ids["out"],
                 "lse": ids["lse"], "scale": 0.35, "causal": True, "window": 0}
    head = {"kind": "linear_cross_entropy", "node": "/head", "x": ids["x"],
            "w": ids["w"], "labels": ids["labels"], "transpose_w": True,
            "reduction": "mean", "ignore_index": -100, "lse": ids["hlse"]}
    seeds["fused_steps"] = plan_json([{
        "name": "forward_backward", "arena_bytes": offset,
        "buffers": fused_buffers,
        "inputs": [{"name": n, "kind": "input", "buffer": ids[n]}
                   for n in ("q", "k", "v", "dout", "x", "w", "labels", "dloss")],
        "outputs": [{"name": n, "kind": "output", "buffer": ids[n]}
                    for n in ("out", "dq", "dk", "dv", "loss", "dx", "dw")],
        "steps": [dict(attention, direction="forward"),
                  dict(attention, direction="backward", dout=ids["dout"],
                       dq=ids["dq"], dk=ids["dk"], dv=ids["dv"]),
                  dict(head, direction="forward", loss=ids["loss"]),
                  dict(head, direction="backward", dloss=ids["dloss"],
                       dx=ids["dx"], dw=ids["dw"])]}])
    seeds["minimal"] = plan_json([{"name": "f", "arena_bytes": 0, "buffers": [],
                                   "inputs": [], "outputs": [], "steps": []}])
    seeds["pretty"] = json.dumps(json.loads(seeds["gemm_copy"]), indent=2) + "\n"
    for name, text in sorted(seeds.items()):
        json.loads(text)
        write(out_dir, name + ".json", text)


# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

ST_DTYPES = [("F64", 8), ("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("I32", 4),
             ("I16", 2), ("I8", 1), ("U8", 1), ("BOOL", 1)]


def safetensors(tensors, metadata=None, align=8):
    """tensors: list of (name, dtype, shape, bytes); data laid out in order."""
    header = {}
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if align:
        text += b" " * (-len(text) % align)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds(out_dir):
    copy_repo_files(["examples/json/*.safetensors",
                     "test/Import/JSON/Inputs/**/*.safetensors"], out_dir, "")
    seeds = {}
    tensors = []
    for i, (dtype, size) in enumerate(ST_DTYPES):
        shape = [2, 3] if i % 2 else [3]
        n = int(np.prod(shape))
        tensors.append(("t_" + dtype.lower(), dtype, shape,
                        bytes((j * 7 + i) % 2 if dtype == "BOOL" else (j * 7 + i) % 251
                              for j in range(n * size))))
    seeds["all_dtypes"] = safetensors(tensors, {"format": "pt", "note": "loom"})
    seeds["scalar_and_empty"] = safetensors([
        ("s", "F32", [], struct.pack("<f", 1.5)),
        ("e", "F32", [0, 4], b""),
        ("z", "I64", [3, 0], b""),
        ("v", "F16", [2], b"\x00\x3c\x00\xc0")])
    seeds["only_metadata"] = safetensors([], {"a": "b"})
    seeds["empty_header"] = safetensors([])
    seeds["unpadded"] = safetensors([("w", "F32", [2, 2], bytes(range(16)))], align=0)
    seeds["out_of_order"] = (lambda: (
        lambda text: struct.pack("<Q", len(text)) + text + bytes(range(24)))(
            json.dumps({"b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]},
                        "a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}},
                       separators=(",", ":")).encode()))()
    seeds["params_like"] = safetensors([
        ("fc1.weight", "F32", [4, 3], bytes(48)), ("fc1.bias", "F32", [4], bytes(16)),
        ("fc1.weight.adam_m", "F32", [4, 3], bytes(48)), ("step", "I64", [], bytes(8))])
    for name, data in sorted(seeds.items()):
        write(out_dir, "gen_" + name + ".safetensors", data)


# --------------------------------------------------------------------------
# .npy and .npz
# --------------------------------------------------------------------------

NPY_DTYPES = ["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "|i1", "|u1", "|b1"]


def npy_bytes(array, version=None):
    f = io.BytesIO()
    if version is None:
        np.save(f, array, allow_pickle=False)
    else:
        np.lib.format.write_array(f, array, version=version, allow_pickle=False)
    return f.getvalue()


def sample(dtype, shape, seed=0):
    n = int(np.prod(shape))
    values = (np.arange(n) * 37 + seed) % 11 - 5
    return values.astype(np.dtype(dtype)).reshape(shape) if np.dtype(dtype) != np.bool_ \
        else (values % 2 == 0).reshape(shape)


def npy_seeds(out_dir):
    seeds = {}
    for d in NPY_DTYPES:
        name = d.replace("<", "le_").replace("|", "")
        seeds[name] = npy_bytes(sample(d, [2, 3]))
        if d[0] == "<":
            seeds[name.replace("le_", "be_")] = npy_bytes(sample(">" + d[1:], [3]))
    seeds["fortran"] = npy_bytes(np.asfortranarray(sample("<f4", [2, 3, 2])))
    seeds["scalar"] = npy_bytes(np.float64(2.5))
    seeds["empty"] = npy_bytes(np.zeros([0, 3], np.int32))
    seeds["v2"] = npy_bytes(sample("<f4", [4]), version=(2, 0))
    seeds["v3"] = npy_bytes(sample("<i8", [2]), version=(3, 0))
    seeds["rank5"] = npy_bytes(sample("<i2", [1, 2, 1, 2, 2]))
    for name, data in sorted(seeds.items()):
        np.load(io.BytesIO(data), allow_pickle=False)
        write(out_dir, name + ".npy", data)


def npz_bytes(members, compression=zipfile.ZIP_STORED, zip64=False):
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w", compression=compression) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            info.external_attr = 0o600 << 16
            with z.open(info, "w", force_zip64=zip64) as m:
                m.write(data)
    return f.getvalue()


def npz_seeds(out_dir):
    seeds = {}
    arrays = [("x.npy", npy_bytes(sample("<f4", [4, 3]))),
              ("labels.npy", npy_bytes(sample("<i8", [4]))),
              ("mask.npy", npy_bytes(sample("|b1", [4])))]
    seeds["stored"] = npz_bytes(arrays)
    seeds["deflated"] = npz_bytes(arrays, zipfile.ZIP_DEFLATED)
    seeds["zip64"] = npz_bytes(arrays[:2], zip64=True)
    seeds["zip64_deflated"] = npz_bytes(arrays[:1], zipfile.ZIP_DEFLATED, zip64=True)
    seeds["nested_names"] = npz_bytes([("dir/w.npy", npy_bytes(sample("<f8", [2, 2]))),
                                       ("dir/sub/b.npy", npy_bytes(sample(">i4", [3]))),
                                       ("\u00e9t\u00e9.npy", npy_bytes(np.float32(1)))])
    seeds["empty_archive"] = npz_bytes([])
    seeds["one_scalar"] = npz_bytes([("s.npy", npy_bytes(np.int16(7)))])
    for name, data in sorted(seeds.items()):
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            for k in z.files:
                z[k]
        write(out_dir, name + ".npz", data)


HARNESSES = {
    "fuzz_onnx_import": onnx_seeds,
    "fuzz_json_import": json_seeds,
    "fuzz_plan": plan_seeds,
    "fuzz_safetensors": safetensors_seeds,
    "fuzz_npy": npy_seeds,
    "fuzz_npz": npz_seeds,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", default=os.path.join(REPO, "test", "fuzz", "corpus"))
    args = parser.parse_args()
    total = 0
    for harness, make in HARNESSES.items():
        out_dir = os.path.join(args.out_dir, harness)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        make(out_dir)
        files = sorted(os.listdir(out_dir))
        size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in files)
        total += size
        print("%-18s %3d files %8d bytes" % (harness, len(files), size))
    print("%-18s           %8d bytes" % ("total", total))
    if total > 2 * 1000 * 1000:
        sys.exit("make_seeds.py: the corpus is over 2 MB")


if __name__ == "__main__":
    main()
