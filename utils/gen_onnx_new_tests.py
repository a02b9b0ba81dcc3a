#!/usr/bin/env python3
"""Writes the importer's test models that need a current ONNX (opset 20,
IR 10) into test/Import/ONNX/Inputs/current/, with the onnx package of the
project's virtual environment (.venv, onnx 1.23). The older test models are
written by utils/gen_onnx_models.py with Debian's onnx 1.12 (opset 17).

  .venv/bin/python utils/gen_onnx_new_tests.py [--out-dir DIR]

Deterministic; every node has a name, which the importer uses as the op's
location.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=20, ir=10, value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits),
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="loom-tests")
    m.ir_version = ir
    return m


def exporter_ops():
    """The ops today's PyTorch exporter writes for GPT-2, BERT, MobileNet and
    Llama that opset 17 did not have or Loom did not map."""
    n = helper.make_node
    nodes = [
        n("Gelu", ["x"], ["g0"], name="/mlp/gelu"),
        n("Gelu", ["x"], ["g1"], name="/mlp/gelu_tanh", approximate="tanh"),
        n("HardSwish", ["x"], ["hs"], name="/features/hardswish"),
        n("Cos", ["x"], ["c"], name="/rotary/cos"),
        n("Sin", ["x"], ["s"], name="/rotary/sin"),
        n("IsNaN", ["x"], ["nan"], name="/attn/isnan"),
        n("Where", ["nan", "zero", "x"], ["clean"], name="/attn/where"),
        n("SplitToSequence", ["x", "split"], ["seq"], name="/attn/split",
          axis=1),
        n("SequenceAt", ["seq", "one"], ["part"], name="/attn/at"),
        n("Add", ["part", "part"], ["y"], name="/attn/add"),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array([2, 2, 2], np.int64), "split"),
             numpy_helper.from_array(np.array(-2, np.int64), "one")]
    outs = [vi(o, [2, 6]) for o in ("g0", "g1", "hs", "c", "s", "clean")]
    outs += [vi("nan", [2, 6], TensorProto.BOOL), vi("y", [2, 2])]
    return model(nodes, [vi("x", [2, 6])], outs, inits)


def folded_consts():
    """Constant computations the exporter leaves in the graph: CastLike to a
    run-time value's type, Expand of a constant, GatherElements and a 2-D
    Slice of integer buffers (BERT's token types and positions)."""
    n = helper.make_node
    nodes = [
        n("Constant", [], ["c"], name="/c", value=numpy_helper.from_array(
            np.array([1, 4], np.int64))),
        n("CastLike", ["c", "x"], ["cf"], name="/castlike"),
        n("Expand", ["cf", "shape"], ["ce"], name="/expand"),
        n("Slice", ["pos", "st", "en", "ax"], ["p"], name="/slice"),
        n("GatherElements", ["types", "p"], ["t"], name="/gather_elements",
          axis=1),
        n("Cast", ["t"], ["tf"], name="/cast", to=F),
        n("Mul", ["x", "ce"], ["m"], name="/mul"),
        n("Add", ["m", "tf"], ["y"], name="/add"),
    ]
    inits = [
        numpy_helper.from_array(np.array([3, 2], np.int64), "shape"),
        numpy_helper.from_array(np.arange(8, dtype=np.int64)[None], "pos"),
        numpy_helper.from_array(np.array([0, 2], np.int64), "st"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "en"),
        numpy_helper.from_array(np.array([0, 1], np.int64), "ax"),
        numpy_helper.from_array(np.array([[5, 6, 7, 8, 9, 10, 11, 12]],
                                         np.int64), "types"),
    ]
    return model(nodes, [vi("x", [3, 2])], [vi("y", [3, 2])], inits)


def folded_masks():
    """The mask computation transformers' GPT-2 exports without a KV cache:
    CumSum, N-D Concat and Transpose of constants, GatherND, LessOrEqual and
    And, all on constants; the mask then selects among run-time scores."""
    n = helper.make_node
    nodes = [
        n("CumSum", ["ones", "ax1"], ["pos"], name="/cumsum"),
        n("Concat", ["pos", "pos"], ["pos2"], name="/concat", axis=0),
        n("Transpose", ["pos2"], ["posT"], name="/transpose", perm=[1, 0]),
        n("GatherND", ["posT", "idx"], ["picked"], name="/gather_nd"),
        n("LessOrEqual", ["picked", "lim"], ["le"], name="/le"),
        n("And", ["le", "keep"], ["mask"], name="/and"),
        n("Where", ["mask", "x", "neg"], ["y"], name="/where"),
    ]
    inits = [
        numpy_helper.from_array(np.ones([1, 4], np.int64), "ones"),
        numpy_helper.from_array(np.array(1, np.int64), "ax1"),
        numpy_helper.from_array(np.array([[3, 0], [1, 1], [0, 0], [2, 1]],
                                         np.int64), "idx"),
        numpy_helper.from_array(np.array(2, np.int64), "lim"),
        numpy_helper.from_array(np.array([True, True, False, True]), "keep"),
        numpy_helper.from_array(np.array(-1e9, np.float32), "neg"),
    ]
    return model(nodes, [vi("x", [4])], [vi("y", [4])], inits)


def buffers():
    """Float initializers that are not parameters: one marked as a buffer
    the way torch.export's exporter marks it, and BatchNorm statistics."""
    n = helper.make_node
    nodes = [
        n("Mul", ["x", "inv_freq"], ["a"], name="/rotary/mul"),
        n("BatchNormalization", ["a", "bn.weight", "bn.bias",
                                 "bn.running_mean", "bn.running_var"], ["y"],
          name="/bn"),
    ]
    inits = [numpy_helper.from_array(np.full([3, 1, 1], v, np.float32), k)
             for k, v in (("inv_freq", 0.5), ("bn.weight", 1.5),
                          ("bn.bias", 0.1), ("bn.running_mean", 0.2),
                          ("bn.running_var", 2.0))]
    for t in inits[1:]:
        t.dims[:] = [3]
        t.raw_data = t.raw_data[:12]
    buf = vi("inv_freq", [3, 1, 1])
    kv = buf.metadata_props.add()
    kv.key = "pkg.torch.export.graph_signature.InputSpec.kind"
    kv.value = "BUFFER"
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", [2, 3, 4, 4])],
                 inits, value_info=[buf])


def batch_norm_modes():
    """Three BatchNormalization nodes, each with its own statistics: one
    that PyTorch's exporter traced in training mode (inference form, fx_node
    metadata naming the training op), one traced in eval mode, and one with
    training_mode=1 whose running-statistics outputs nothing reads (as the
    TorchScript exporter writes)."""
    n = helper.make_node

    def bn(name, x, y, fx=None, **attrs):
        outs = [y] + ([name + ".saved_mean", name + ".saved_var"]
                      if attrs.get("training_mode") else [])
        node = n("BatchNormalization",
                 [x] + [name + "." + k for k in
                        ("weight", "bias", "running_mean", "running_var")],
                 outs, name="/" + name, momentum=0.9, **attrs)
        if fx:
            kv = node.metadata_props.add()
            kv.key = "pkg.torch.onnx.fx_node"
            kv.value = ("%%%s : call_function[target=torch.ops.aten.%s]"
                        % (name, fx))
        return node

    nodes = [
        bn("bn_train", "x", "a",
           fx="_native_batch_norm_legit_functional.default"),
        bn("bn_eval", "a", "b", fx="_native_batch_norm_legit_no_training"
                                   ".default"),
        bn("bn_tm", "b", "y", training_mode=1),
    ]
    inits = []
    for name in ("bn_train", "bn_eval", "bn_tm"):
        for k, v in (("weight", 1.5), ("bias", 0.1), ("running_mean", 0.2),
                     ("running_var", 2.0)):
            inits.append(numpy_helper.from_array(
                np.full([3], v, np.float32), name + "." + k))
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", [2, 3, 4, 4])],
                 inits)


def pad_trilu():
    """Pad in opset 18's form (axes as an input; a negative pad crops; a
    non-zero constant value) and Trilu (upper with k = 1, and lower)."""
    n = helper.make_node
    nodes = [
        n("Pad", ["x", "pads", "value", "axes"], ["p"], name="/pad",
          mode="constant"),
        n("Trilu", ["x", "k"], ["u"], name="/triu", upper=1),
        n("Trilu", ["x"], ["l"], name="/tril", upper=0),
    ]
    inits = [numpy_helper.from_array(np.array([1, -1, 2, 0], np.int64),
                                     "pads"),
             numpy_helper.from_array(np.array(1.5, np.float32), "value"),
             numpy_helper.from_array(np.array([-1, 1], np.int64), "axes"),
             numpy_helper.from_array(np.array(1, np.int64), "k")]
    return model(nodes, [vi("x", [2, 3, 4])],
                 [vi("p", [2, 2, 7]), vi("u", [2, 3, 4]),
                  vi("l", [2, 3, 4])], inits)


def pad_reflect():
    """Pad in reflect mode, which Loom does not map: refused by name."""
    n = helper.make_node("Pad", ["x", "pads"], ["y"], name="/pad",
                         mode="reflect")
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")
    return model([n], [vi("x", [2, 3])], [vi("y", [2, 5])], [pads])


def range_beyond_2p53():
    """An int64 Range of 4 values near 2^60: folded values are doubles,
    which cannot hold them exactly, so it is refused."""
    n = helper.make_node("Range", ["start", "limit", "delta"], ["r"],
                         name="/range")
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in
             (("start", 2 ** 60), ("limit", 2 ** 60 + 4), ("delta", 1))]
    return model([n], [], [vi("r", [4], TensorProto.INT64)], inits)


def gathernd_runtime():
    """GatherND on run-time data with constant indices, as transformers'
    padding masks are picked from an attention_mask input: batch_dims 0
    (with a negative index) and batch_dims 1."""
    n = helper.make_node
    nodes = [n("GatherND", ["x", "idx"], ["y"], name="/gather_nd"),
             n("GatherND", ["x", "bidx"], ["z"], name="/gather_nd_batch",
               batch_dims=1)]
    inits = [numpy_helper.from_array(
                 np.array([[[1, 2], [0, -1]], [[1, 0], [0, 0]]], np.int64),
                 "idx"),
             numpy_helper.from_array(np.array([[[2]], [[0]]], np.int64),
                                     "bidx")]
    return model(nodes, [vi("x", [2, 3, 4])],
                 [vi("y", [2, 2, 4]), vi("z", [2, 1, 4])], inits)


def cumsum_runtime():
    """CumSum on run-time data: floats along the last axis (inclusive) and
    along axis 0 (reverse, exclusive), and integers cast from a boolean
    (RoBERTa's position ids: cumsum(ids != pad) * (ids != pad))."""
    n = helper.make_node
    nodes = [n("CumSum", ["x", "last"], ["y"], name="/cumsum"),
             n("CumSum", ["x", "first"], ["z"], name="/cumsum_rev",
               exclusive=1, reverse=1),
             n("Greater", ["x", "zero"], ["pos"], name="/gt"),
             n("Cast", ["pos"], ["posi"], name="/cast", to=TensorProto.INT64),
             n("CumSum", ["posi", "last"], ["c"], name="/cumsum_int"),
             n("Mul", ["c", "posi"], ["ids"], name="/mul")]
    inits = [numpy_helper.from_array(np.array(-1, np.int64), "last"),
             numpy_helper.from_array(np.array(0, np.int64), "first"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    return model(nodes, [vi("x", [3, 5])],
                 [vi("y", [3, 5]), vi("z", [3, 5]),
                  vi("ids", [3, 5], TensorProto.INT64)], inits)


def cumsum_runtime_ints():
    """CumSum of integers that are not known to be 0 or 1: summed in f64."""
    n = helper.make_node("CumSum", ["x", "axis"], ["y"], name="/cumsum")
    axis = numpy_helper.from_array(np.array(0, np.int64), "axis")
    return model([n], [vi("x", [4], TensorProto.INT64)],
                 [vi("y", [4], TensorProto.INT64)], [axis])


def gathernd_runtime_indices():
    """GatherND whose indices are an input: refused by name."""
    n = helper.make_node("GatherND", ["x", "i"], ["y"], name="/gather_nd")
    return model([n], [vi("x", [2, 3]), vi("i", [2, 1], TensorProto.INT64)],
                 [vi("y", [2, 3])])


def random_ops():
    """What a model.train() export draws: a drop-path mask (one uniform draw
    per sample, compared with the keep probability, divided by it), a
    normal draw of the input's shape, RandomUniform of a given shape, and
    Bernoulli; a training-mode Dropout whose mask output is read."""
    n = helper.make_node
    nodes = [n("Constant", [], ["s"], name="/drop_path/shape",
               value=numpy_helper.from_array(np.zeros((2, 1), np.float32))),
             n("RandomUniformLike", ["s"], ["u"], name="/drop_path/rand",
               seed=3.0),
             n("Less", ["u", "keep"], ["m"], name="/drop_path/lt"),
             n("Cast", ["m"], ["mf"], name="/drop_path/cast",
               to=TensorProto.FLOAT),
             n("Div", ["mf", "keep"], ["scale"], name="/drop_path/div"),
             n("Mul", ["x", "scale"], ["y"], name="/drop_path/mul"),
             n("RandomNormalLike", ["x"], ["noise"], name="/noise",
               mean=1.0, scale=0.5),
             n("RandomUniform", [], ["r"], name="/uniform", shape=[3],
               low=-1.0, high=1.0),
             n("Bernoulli", ["p"], ["b"], name="/bernoulli",
               dtype=TensorProto.INT64),
             n("Dropout", ["x", "ratio", "train"], ["d", "mask"],
               name="/dropout")]
    inits = [numpy_helper.from_array(np.array(0.75, np.float32), "keep"),
             numpy_helper.from_array(np.array(0.25, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "train")]
    return model(nodes, [vi("x", [2, 4]), vi("p", [2, 4])],
                 [vi("y", [2, 4]), vi("noise", [2, 4]), vi("r", [3]),
                  vi("b", [2, 4], TensorProto.INT64), vi("d", [2, 4]),
                  vi("mask", [2, 4], TensorProto.BOOL)], inits)


def random_int():
    """A uniform draw of integers: refused by name."""
    n = helper.make_node("RandomUniformLike", ["x"], ["y"], name="/rand",
                         dtype=TensorProto.INT64)
    return model([n], [vi("x", [2, 4])], [vi("y", [2, 4], TensorProto.INT64)])


def exporter_merges():
    """What PyTorch's exporter writes that loses the model's meaning: two
    LayerNorms sharing one weight and bias (its optimizer merges equal
    initializers), and a Dropout without training_mode (SDPA's dropout_p)
    beside one that trains."""
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "w", "b"], ["h"], name="/ln1"),
             n("Dropout", ["h", "ratio", "train"], ["h2"], name="/drop"),
             n("Dropout", ["h2", "ratio"], ["h3"], name="/sdpa_drop"),
             n("LayerNormalization", ["h3", "w", "b"], ["y"], name="/ln2")]
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "w"),
             numpy_helper.from_array(np.zeros(4, np.float32), "b"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "train")]
    return model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], inits)


def scatter_mod_pool():
    """ScatterND on run-time data and updates with constant indices (a
    slice assignment), Mod folded on constants, and an AveragePool with
    ceil_mode=1 and count_include_pad=1 whose last window reaches past the
    declared padding (that part is not counted)."""
    n = helper.make_node
    nodes = [n("ScatterND", ["x", "idx", "u"], ["y"], name="/scatter"),
             n("Mod", ["a", "m"], ["r"], name="/mod"),
             n("Cast", ["r"], ["rf"], name="/cast", to=TensorProto.FLOAT),
             n("Add", ["y", "rf"], ["z"], name="/add"),
             n("AveragePool", ["img"], ["p"], name="/pool",
               kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
               ceil_mode=1, count_include_pad=1)]
    const = lambda name, v: n("Constant", [], [name], name="/" + name,
                              value=numpy_helper.from_array(v))
    nodes = [const("a", np.array([-7, 7, -1], np.int64)),
             const("m", np.array([3, -3, 3], np.int64))] + nodes
    inits = [numpy_helper.from_array(np.array([[2], [0]], np.int64), "idx")]
    return model(nodes, [vi("x", [3, 3]), vi("u", [2, 3]),
                         vi("img", [1, 1, 4, 4])],
                 [vi("z", [3, 3]), vi("p", [1, 1, 3, 3])], inits)


def gather_elements_runtime():
    """GatherElements with run-time data and indices (the TorchScript
    exporter's form of an index lookup along one axis)."""
    n = helper.make_node("GatherElements", ["x", "i"], ["y"],
                         name="/gather_elements", axis=1)
    return model([n], [vi("x", [3, 4]), vi("i", [3, 2], TensorProto.INT64)],
                 [vi("y", [3, 2])])


def scatter_elements_runtime():
    """ScatterElements with run-time data, indices and updates (reduction
    none): a repeated index has no defined result."""
    n = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"],
                         name="/scatter_elements", axis=1)
    return model([n], [vi("x", [2, 4]), vi("i", [2, 3], TensorProto.INT64),
                       vi("u", [2, 3])], [vi("y", [2, 4])])


def bool_reduce():
    """A boolean tensor written by one kernel and summed by a reduction
    kernel (after a Squeeze): the count of ignored targets in expanded
    NLLLoss."""
    n = helper.make_node
    nodes = [n("Equal", ["x", "one"], ["m"], name="/eq"),
             n("Squeeze", ["m", "ax"], ["s"], name="/squeeze"),
             n("Cast", ["s"], ["w"], name="/cast", to=TensorProto.FLOAT),
             n("ReduceSum", ["w"], ["y"], name="/sum", keepdims=0)]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    return model(nodes, [vi("x", [3, 1, 6, 6], TensorProto.INT64)],
                 [vi("y", [])], inits)


def output_and_full_slice():
    """A model that returns a tensor and a full-range Slice of it: inside
    the compiled kernel the slice folds away and two results are one
    value."""
    n = helper.make_node
    nodes = [n("Neg", ["x"], ["a"], name="/neg"),
             n("Slice", ["a", "st", "en", "ax"], ["b"], name="/slice")]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "st"),
             numpy_helper.from_array(np.array([2], np.int64), "en"),
             numpy_helper.from_array(np.array([0], np.int64), "ax")]
    return model(nodes, [vi("x", [2, 3])], [vi("b", [2, 3]), vi("a", [2, 3])],
                 inits)


def newer(opset, ir):
    n = helper.make_node("Relu", ["x"], ["y"], name="/relu")
    return model([n], [vi("x", [2])], [vi("y", [2])], opset=opset, ir=ir)


MODELS = {
    "exporter_ops.onnx": (exporter_ops, True),
    "folded_consts.onnx": (folded_consts, True),
    "folded_masks.onnx": (folded_masks, True),
    "buffers.onnx": (buffers, True),
    "batch_norm_modes.onnx": (batch_norm_modes, True),
    "pad_trilu.onnx": (pad_trilu, True),
    "pad_reflect.onnx": (pad_reflect, True),
    "range_beyond_2p53.onnx": (range_beyond_2p53, True),
    "gathernd_runtime.onnx": (gathernd_runtime, True),
    "gathernd_runtime_indices.onnx": (gathernd_runtime_indices, True),
    "cumsum_runtime.onnx": (cumsum_runtime, True),
    "cumsum_runtime_ints.onnx": (cumsum_runtime_ints, True),
    "random_ops.onnx": (random_ops, True),
    # ONNX's checker refuses an integer draw itself.
    "random_int.onnx": (random_int, False),
    "exporter_merges.onnx": (exporter_merges, True),
    "scatter_mod_pool.onnx": (scatter_mod_pool, True),
    "gather_elements_runtime.onnx": (gather_elements_runtime, True),
    "scatter_elements_runtime.onnx": (scatter_elements_runtime, True),
    "bool_reduce.onnx": (bool_reduce, True),
    "output_and_full_slice.onnx": (output_and_full_slice, True),
    # Written by an ONNX newer than Loom's library: refused, not checked.
    "newer_opset.onnx": (lambda: newer(99, 10), False),
    "newer_ir.onnx": (lambda: newer(20, 99), False),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(
        os.path.dirname(__file__), "..", "test", "Import", "ONNX", "Inputs",
        "current"))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name, (build, valid) in MODELS.items():
        m = build()
        if valid:
            onnx.checker.check_model(m, full_check=True)
        with open(os.path.join(args.out_dir, name), "wb") as f:
            f.write(m.SerializeToString(deterministic=True))
        print("wrote", name)


if __name__ == "__main__":
    main()
