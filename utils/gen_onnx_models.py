#!/usr/bin/python3
"""Generate the small ONNX models used by Loom's examples and importer tests.

Usage:
  utils/gen_onnx_models.py --set examples --out-dir examples/onnx
  utils/gen_onnx_models.py --set tests    --out-dir test/Import/ONNX/Inputs
  utils/gen_onnx_models.py --set all      [--out-dir DIR]
  utils/gen_onnx_models.py --set gpt      --out-dir DIR [--n-layer 12 --d-model 768
      --n-head 12 --seq 1024 --vocab 50304 --batch 8 --d-ff 3072]

With --set all and --out-dir DIR, the examples go to DIR/examples and the test
inputs to DIR/tests. Without --out-dir the repository folders are used
(examples/onnx and test/Import/ONNX/Inputs next to this script's parent).
--set gpt writes DIR/model.onnx, a GPT like examples/onnx/gpt2.onnx of any size
(default: GPT-2 small's shape), its weights as ONNX external data in
DIR/model.onnx.data; bench/gpt2_gpu.py uses it.

Requirements: the `onnx` (1.12 or newer) and `numpy` Python packages, e.g.
Debian's python3-onnx and python3-numpy. No PyTorch.

Every model uses the default domain at opset 17 and IR version 8. Every node
has a unique PyTorch-export-style name ("/fc1/Gemm"), because Loom uses node
names as MLIR locations. Output is deterministic (fixed seeds, no timestamps):
running the script twice writes byte-identical files.

Every valid model is checked with onnx.checker.check_model and with
onnx.shape_inference.infer_shapes (strict, with data propagation), and the
script asserts that every node output gets a fully static inferred shape.
The deliberately broken test inputs are checked to be broken the intended way.

--reference-npz additionally writes, for each example model, NAME.npz holding a
random input and the outputs computed by onnx.reference. onnx.reference exists
only in onnx >= 1.13; with an older onnx the flag prints a note and does
nothing.
"""

import argparse
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "loom-gen_onnx_models"
INT64_MAX = np.iinfo(np.int64).max

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_EXAMPLES_DIR = os.path.join(REPO_ROOT, "examples", "onnx")
DEFAULT_TESTS_DIR = os.path.join(REPO_ROOT, "test", "Import", "ONNX", "Inputs")

MAX_EXAMPLE_BYTES = 1536 * 1024  # keep committed examples small


# --------------------------------------------------------------------------
# Small graph-building helper
# --------------------------------------------------------------------------


class GraphBuilder:
    """Collects nodes / initializers and hands out unique node names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.inputs = []
        self.outputs = []
        self._node_names = set()
        self._value_names = set()

    # values ---------------------------------------------------------------
    def input(self, name, elem_type, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        self._value_names.add(name)
        return name

    def output(self, name, elem_type, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def init(self, name, array):
        assert name not in self._value_names, name
        self._value_names.add(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, fan_in, dtype=np.float32):
        bound = 1.0 / np.sqrt(fan_in)
        return self.init(name, self.rng.uniform(-bound, bound, size=shape).astype(dtype))

    # nodes ----------------------------------------------------------------
    def node(self, op_type, inputs, name, outputs=None, n_out=1, **attrs):
        """Add a node named NAME. Output value names default to NAME + '_output_i'
        (PyTorch style); pass OUTPUTS to choose them (e.g. graph outputs)."""
        assert name not in self._node_names, "duplicate node name " + name
        self._node_names.add(name)
        if outputs is None:
            outputs = ["%s_output_%d" % (name, i) for i in range(n_out)]
        for o in outputs:
            if o:
                assert o not in self._value_names, "duplicate value " + o
                self._value_names.add(o)
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, name, array):
        """A Constant node (PyTorch export style) holding ARRAY."""
        arr = np.asarray(array)
        return self.node("Constant", [], name,
                         value=numpy_helper.from_array(arr, name + "_value"))

    def model(self, graph_name, doc=""):
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs,
                                  initializer=self.initializers)
        return make_model(graph, doc)


def make_model(graph, doc=""):
    m = helper.make_model(graph, producer_name=PRODUCER, producer_version="1",
                          opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = IR_VERSION
    m.doc_string = doc
    return m


def param_count(model):
    return sum(int(np.prod(t.dims)) if len(t.dims) else 1
               for t in model.graph.initializer)


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def _shape_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return dims


def verify_valid(model, label, model_dir=None):
    """check_model + strict shape inference; every node output must get a
    fully static shape. Returns the inferred model."""
    if model_dir is None:
        onnx.checker.check_model(model)
    else:
        # With external data, onnx 1.12's checker resolves locations relative to
        # the model file's folder only when given a path (relative to the cwd
        # when given a proto), so check by path.
        onnx.checker.check_model(os.path.join(model_dir, "model.onnx"))
    # Infer on a copy whose graph outputs carry no shape, so that the output
    # shapes are derived rather than copied from the declarations. data_prop is
    # needed by shape_folding.onnx (Reshape fed by a Shape->...->Concat chain).
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    for vi in stripped.graph.output:
        vi.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(stripped, check_type=True,
                                                 strict_mode=True, data_prop=True)
    # ... and once as written: strict mode rejects declared/inferred conflicts.
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                      data_prop=True)
    known = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + \
            list(inferred.graph.input):
        known[vi.name] = vi
    missing = []
    for n in inferred.graph.node:
        for o in n.output:
            if not o:
                continue
            if o not in known or known[o].type.tensor_type.elem_type == 0 \
                    or _shape_of(known[o]) is None:
                missing.append("%s (%s)" % (o, n.name))
    if missing:
        raise AssertionError("%s: shapes not fully inferred for: %s"
                             % (label, ", ".join(missing)))
    # Declared graph outputs must agree with what inference derives.
    for vi in model.graph.output:
        declared = _shape_of(vi)
        if declared is not None and declared != _shape_of(known[vi.name]):
            raise AssertionError("%s: output %s declared %s, inferred %s"
                                 % (label, vi.name, declared, _shape_of(known[vi.name])))
    names = [n.name for n in model.graph.node]
    assert all(names) and len(set(names)) == len(names), label + ": node names"
    return inferred


def save(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# --------------------------------------------------------------------------
# Example models
# --------------------------------------------------------------------------


def _mlp_body(b, x, batch=32, d_in=64, hidden=128, hidden2=64, classes=10):
    w1 = b.weight("fc1.weight", (hidden, d_in), d_in)
    b1 = b.weight("fc1.bias", (hidden,), d_in)
    h = b.node("Gemm", [x, w1, b1], "/fc1/Gemm", transB=1)
    h = b.node("Relu", [h], "/act1/Relu")
    w2 = b.weight("fc2.weight", (hidden2, hidden), hidden)
    b2 = b.weight("fc2.bias", (hidden2,), hidden)
    h = b.node("Gemm", [h, w2, b2], "/fc2/Gemm", transB=1)
    h = b.node("Relu", [h], "/act2/Relu")
    # The last layer is stored [in, out] and applied with MatMul + Add.
    w3 = b.weight("fc3.weight", (hidden2, classes), hidden2)
    b3 = b.weight("fc3.bias", (classes,), hidden2)
    h = b.node("MatMul", [h, w3], "/fc3/MatMul")
    return h, b3


def build_mlp():
    b = GraphBuilder(seed=1)
    x = b.input("x", TensorProto.FLOAT, [32, 64])
    h, b3 = _mlp_body(b, x)
    b.node("Add", [h, b3], "/fc3/Add", outputs=["logits"])
    b.output("logits", TensorProto.FLOAT, [32, 10])
    return b.model("mlp", "3-layer MLP classifier: 64 -> 128 -> 64 -> 10")


def build_mlp_loss():
    b = GraphBuilder(seed=1)  # same weights as mlp.onnx
    x = b.input("x", TensorProto.FLOAT, [32, 64])
    labels = b.input("labels", TensorProto.INT64, [32])
    h, b3 = _mlp_body(b, x)
    logits = b.node("Add", [h, b3], "/fc3/Add")
    b.node("SoftmaxCrossEntropyLoss", [logits, labels], "/loss/SoftmaxCrossEntropyLoss",
           outputs=["loss"], reduction="mean")
    b.output("loss", TensorProto.FLOAT, [])
    return b.model("mlp_loss", "mlp.onnx followed by mean softmax cross-entropy")


def build_cnn():
    b = GraphBuilder(seed=2)
    x = b.input("x", TensorProto.FLOAT, [8, 1, 28, 28])
    w = b.weight("conv1.weight", (8, 1, 3, 3), 9)
    bias = b.weight("conv1.bias", (8,), 9)
    h = b.node("Conv", [x, w, bias], "/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               strides=[1, 1])
    b.init("bn1.weight", b.rng.uniform(0.5, 1.5, 8).astype(np.float32))
    b.init("bn1.bias", b.rng.uniform(-0.1, 0.1, 8).astype(np.float32))
    b.init("bn1.running_mean", b.rng.uniform(-0.2, 0.2, 8).astype(np.float32))
    b.init("bn1.running_var", b.rng.uniform(0.5, 2.0, 8).astype(np.float32))
    h = b.node("BatchNormalization",
               [h, "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
               "/bn1/BatchNormalization", epsilon=1e-5, momentum=0.9)
    h = b.node("Relu", [h], "/act1/Relu")
    h = b.node("MaxPool", [h], "/pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    w = b.weight("conv2.weight", (16, 8, 3, 3), 72)
    bias = b.weight("conv2.bias", (16,), 72)
    h = b.node("Conv", [h, w, bias], "/conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               strides=[1, 1])
    h = b.node("Relu", [h], "/act2/Relu")
    h = b.node("AveragePool", [h], "/pool2/AveragePool", kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("Flatten", [h], "/flatten/Flatten", axis=1)
    w = b.weight("fc.weight", (10, 16 * 7 * 7), 16 * 7 * 7)
    bias = b.weight("fc.bias", (10,), 16 * 7 * 7)
    b.node("Gemm", [h, w, bias], "/fc/Gemm", outputs=["logits"], transB=1)
    b.output("logits", TensorProto.FLOAT, [8, 10])
    return b.model("cnn", "LeNet-style CNN for 1x28x28 images, 10 classes")


def _build_gpt(n_layer, graph_name, doc, batch=2, seq=16, d_model=64, n_head=4,
               vocab=128, d_ff=None):
    """A GPT-2-style pre-LN decoder: token + position embeddings, N_LAYER blocks
    (LayerNorm, causal multi-head attention, residual; LayerNorm, Erf-GELU MLP,
    residual), final LayerNorm and an untied lm_head (no bias). Weights are
    [in, out] (MatMul + Add). The defaults are the examples' size: changing them
    changes nothing else, and the examples stay byte-identical."""
    B, T, D, H, V = batch, seq, d_model, n_head, vocab
    F = 4 * D if d_ff is None else d_ff
    assert D % H == 0, "d_model %d is not a multiple of n_head %d" % (D, H)
    hd = D // H
    b = GraphBuilder(seed=3)
    ids = b.input("input_ids", TensorProto.INT64, [B, T])

    b.init("wte", (b.rng.standard_normal((V, D)) * 0.02).astype(np.float32))
    b.init("wpe", (b.rng.standard_normal((T, D)) * 0.01).astype(np.float32))
    b.init("position_ids", np.arange(T, dtype=np.int64))
    tok = b.node("Gather", ["wte", ids], "/wte/Gather", axis=0)            # [B,T,D]
    pos = b.node("Gather", ["wpe", "position_ids"], "/wpe/Gather", axis=0)  # [T,D]
    x = b.node("Add", [tok, pos], "/embed/Add")

    def layer_norm(inp, prefix, scope):
        b.init(prefix + ".weight", np.ones(D, np.float32)
               + b.rng.uniform(-0.1, 0.1, D).astype(np.float32))
        b.init(prefix + ".bias", b.rng.uniform(-0.1, 0.1, D).astype(np.float32))
        return b.node("LayerNormalization", [inp, prefix + ".weight", prefix + ".bias"],
                      scope + "/LayerNormalization", axis=-1, epsilon=1e-5)

    def linear(inp, prefix, scope, d_in, d_out):
        w = b.init(prefix + ".weight",
                   (b.rng.standard_normal((d_in, d_out)) * 0.02).astype(np.float32))
        bias = b.init(prefix + ".bias", (b.rng.standard_normal(d_out) * 0.02)
                      .astype(np.float32))
        y = b.node("MatMul", [inp, w], scope + "/MatMul")
        return b.node("Add", [y, bias], scope + "/Add")

    for layer in range(n_layer):
        L = "/h.%d" % layer
        P = "h.%d." % layer
        # --- attention ---------------------------------------------------------
        a = L + "/attn"
        h = layer_norm(x, P + "ln_1", L + "/ln_1")
        qkv = linear(h, P + "attn.c_attn", a + "/c_attn", D, 3 * D)           # [B,T,3D]
        b.init(P + "attn.split_sizes", np.array([D, D, D], np.int64))
        q, k, v = b.node("Split", [qkv, P + "attn.split_sizes"], a + "/Split", n_out=3, axis=2)
        heads_shape = b.const(a + "/Constant", np.array([B, T, H, hd], np.int64))
        q = b.node("Reshape", [q, heads_shape], a + "/Reshape")
        k = b.node("Reshape", [k, heads_shape], a + "/Reshape_1")
        v = b.node("Reshape", [v, heads_shape], a + "/Reshape_2")
        q = b.node("Transpose", [q], a + "/Transpose", perm=[0, 2, 1, 3])     # [B,H,T,hd]
        kt = b.node("Transpose", [k], a + "/Transpose_1", perm=[0, 2, 3, 1])  # [B,H,hd,T]
        v = b.node("Transpose", [v], a + "/Transpose_2", perm=[0, 2, 1, 3])   # [B,H,T,hd]
        s = b.node("MatMul", [q, kt], a + "/MatMul")                            # [B,H,T,T]
        scale = b.const(a + "/Constant_1", np.array(1.0 / np.sqrt(hd), np.float32))
        s = b.node("Mul", [s, scale], a + "/Mul")
        b.init(P + "attn.causal_mask", np.tril(np.ones((T, T), dtype=bool)))
        neg = b.const(a + "/Constant_2", np.array(-1e9, np.float32))
        s = b.node("Where", [P + "attn.causal_mask", s, neg], a + "/Where")
        p = b.node("Softmax", [s], a + "/Softmax", axis=-1)
        o = b.node("MatMul", [p, v], a + "/MatMul_1")                           # [B,H,T,hd]
        o = b.node("Transpose", [o], a + "/Transpose_3", perm=[0, 2, 1, 3])   # [B,T,H,hd]
        merged = b.const(a + "/Constant_3", np.array([B, T, D], np.int64))
        o = b.node("Reshape", [o, merged], a + "/Reshape_3")
        o = linear(o, P + "attn.c_proj", a + "/c_proj", D, D)
        x = b.node("Add", [x, o], L + "/Add")

        # --- MLP ---------------------------------------------------------------
        m = L + "/mlp"
        h = layer_norm(x, P + "ln_2", L + "/ln_2")
        h = linear(h, P + "mlp.c_fc", m + "/c_fc", D, F)
        sqrt2 = b.const(m + "/act/Constant", np.array(np.sqrt(2.0), np.float32))
        one = b.const(m + "/act/Constant_1", np.array(1.0, np.float32))
        half = b.const(m + "/act/Constant_2", np.array(0.5, np.float32))
        g = b.node("Div", [h, sqrt2], m + "/act/Div")
        g = b.node("Erf", [g], m + "/act/Erf")
        g = b.node("Add", [g, one], m + "/act/Add")
        g = b.node("Mul", [h, g], m + "/act/Mul")
        g = b.node("Mul", [g, half], m + "/act/Mul_1")
        h = linear(g, P + "mlp.c_proj", m + "/c_proj", F, D)
        x = b.node("Add", [x, h], L + "/Add_1")

    x = layer_norm(x, "ln_f", "/ln_f")
    w = b.init("lm_head.weight", (b.rng.standard_normal((D, V)) * 0.02).astype(np.float32))
    b.node("MatMul", [x, w], "/lm_head/MatMul", outputs=["logits"])
    b.output("logits", TensorProto.FLOAT, [B, T, V])
    return b.model(graph_name, doc)


def build_transformer_block():
    return _build_gpt(1, "transformer_block",
                      "GPT-2-style pre-LN transformer block (1 layer, d=64, 4 heads, vocab 128)")


def build_gpt2():
    return _build_gpt(2, "gpt2",
                      "GPT-2-style pre-LN transformer (2 layers, d=64, 4 heads, vocab 128)")


# GPT-2 small's shape (124M parameters with tied embeddings; 163M here, with the
# untied lm_head), the vocabulary padded to a multiple of 64 as nanoGPT does.
GPT_DEFAULTS = dict(n_layer=12, d_model=768, n_head=12, seq=1024, vocab=50304, batch=8)


def build_gpt(n_layer=12, d_model=768, n_head=12, seq=1024, vocab=50304, batch=8,
              d_ff=None, graph_name="gpt"):
    """A GPT of any size, built like gpt2.onnx (see _build_gpt); the batch is
    part of the graph's shapes. Big models are written with save_external()."""
    doc = ("GPT-2-style pre-LN transformer (%d layers, d=%d, %d heads, T=%d, vocab %d, "
           "batch %d)" % (n_layer, d_model, n_head, seq, vocab, batch))
    return _build_gpt(n_layer, graph_name, doc, batch=batch, seq=seq, d_model=d_model,
                      n_head=n_head, vocab=vocab, d_ff=d_ff)


def save_external(model, path, size_threshold=1024):
    """Writes MODEL to PATH with every initializer of SIZE_THRESHOLD bytes or
    more moved to one file beside it, PATH + '.data' (ONNX external data; the
    location is relative to the model's folder, as Loom's importer requires).
    This is what lets a model pass protobuf's 2 GiB limit, and it keeps the
    .onnx file itself small. MODEL is modified: its big initializers then
    refer to the data file instead of holding their bytes."""
    data = path + ".data"
    if os.path.exists(data):
        os.remove(data)  # onnx appends to an existing data file
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(data), size_threshold=size_threshold,
                    convert_attribute=False)


def gen_gpt(out_dir, verify=True, **config):
    """Writes OUT_DIR/model.onnx (+ model.onnx.data) for build_gpt(**CONFIG)
    and checks it like the examples (checker, strict shape inference, on the
    file, whose weights stay on disk). Returns the model's path."""
    model = build_gpt(**config)
    n_params = param_count(model)
    path = os.path.join(out_dir, "model.onnx")
    save_external(model, path)
    if verify:
        verify_valid(onnx.load(path, load_external_data=False), "gpt", model_dir=out_dir)
    print("wrote %s (+ %s, %d bytes; %d initializer values)"
          % (path, os.path.basename(path) + ".data",
             os.path.getsize(path + ".data") if os.path.exists(path + ".data") else 0,
             n_params))
    return path


EXAMPLES = [
    ("mlp.onnx", build_mlp),
    ("cnn.onnx", build_cnn),
    ("transformer_block.onnx", build_transformer_block),
    ("gpt2.onnx", build_gpt2),
    ("mlp_loss.onnx", build_mlp_loss),
]


def _io_desc(vis):
    names = {TensorProto.FLOAT: "float", TensorProto.INT64: "int64", TensorProto.BOOL: "bool"}
    out = []
    for vi in vis:
        t = vi.type.tensor_type
        out.append("`%s` %s%s" % (vi.name, names.get(t.elem_type, str(t.elem_type)),
                                  _shape_of(vi)))
    return ", ".join(out)


def _init_desc(model):
    floats = [t for t in model.graph.initializer if t.data_type == TensorProto.FLOAT]
    others = [t for t in model.graph.initializer if t.data_type != TensorProto.FLOAT]
    text = "%d float tensors, %d values" % (len(floats), param_count_of(floats))
    if others:
        text += "; non-float constants " + ", ".join(
            "`%s` %s%s" % (t.name, TensorProto.DataType.Name(t.data_type).lower(),
                           list(t.dims)) for t in others)
    return text


def param_count_of(tensors):
    return sum(int(np.prod(t.dims)) for t in tensors)


EXAMPLE_NOTES = {
    "mlp.onnx": "Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, MatMul+Add. "
                "`fc1.weight` [128,64] and `fc2.weight` [64,128] are PyTorch-style [out,in]; "
                "`fc3.weight` [64,10] is [in,out] (MatMul).",
    "cnn.onnx": "Conv(8,3x3,pad 1) + BatchNormalization (inference) + Relu + MaxPool 2x2 + "
                "Conv(16,3x3,pad 1) + Relu + AveragePool 2x2 + Flatten + Gemm(784->10). "
                "Parameters `conv1.*`, `bn1.{weight,bias,running_mean,running_var}`, "
                "`conv2.*`, `fc.*`.",
    "transformer_block.onnx":
        "GPT-2-style pre-LN block, batch 2, T=16, d=64, 4 heads, vocab 128: token (`wte`) + "
        "position (`wpe`, `position_ids`) embedding Gathers; LayerNormalization; qkv MatMul "
        "[64,192]+Add, Split, Reshape [2,16,4,16], Transpose; q*k^T, Mul 1/sqrt(16), causal "
        "Where(`h.0.attn.causal_mask`, scores, -1e9), Softmax, *v; Transpose+Reshape back; "
        "output projection; residual; LayerNorm; MLP 64->256 with Erf-GELU ->64; residual; "
        "final LayerNorm `ln_f`; `lm_head.weight` [64,128] (no bias). Weights are [in,out]. "
        "Shapes and scalars come from Constant nodes.",
    "gpt2.onnx": "Two blocks exactly like transformer_block.onnx's (parameters `h.0.*` and "
                 "`h.1.*`, node scopes `/h.0/...` and `/h.1/...`), same embeddings, `ln_f` and "
                 "`lm_head`.",
    "mlp_loss.onnx": "Same layers and weights as mlp.onnx, then "
                     "SoftmaxCrossEntropyLoss(reduction=mean) on the logits and `labels` "
                     "(a loss-in-graph model; `loss` is a scalar).",
}


def write_examples_readme(out_dir, models):
    lines = [
        "# ONNX example models",
        "",
        "Generated by `utils/gen_onnx_models.py --set examples --out-dir examples/onnx`",
        "(deterministic; opset 17, IR version 8; needs only `onnx` and `numpy`).",
        "Every node has a PyTorch-export-style name (e.g. `/fc1/Gemm`), which Loom",
        "uses as the location of the ops it imports. Weights are random (fixed seed).",
        "",
    ]
    for fname, model in models:
        lines += [
            "## `%s`" % fname,
            "",
            "- inputs: %s" % _io_desc(model.graph.input),
            "- outputs: %s" % _io_desc(model.graph.output),
            "- initializers: %s" % _init_desc(model),
            "- %s" % EXAMPLE_NOTES[fname],
            "",
        ]
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("\n".join(lines))


def write_reference_npz(out_dir, models):
    try:
        from onnx.reference import ReferenceEvaluator  # onnx >= 1.13
    except ImportError:
        print("note: onnx %s has no onnx.reference (needs >= 1.13); "
              "skipping --reference-npz" % onnx.__version__)
        return
    rng = np.random.default_rng(1234)
    for fname, model in models:
        feeds = {}
        for vi in model.graph.input:
            shape = _shape_of(vi)
            et = vi.type.tensor_type.elem_type
            if et == TensorProto.FLOAT:
                feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
            elif vi.name == "labels":
                feeds[vi.name] = rng.integers(0, 10, size=shape, dtype=np.int64)
            elif vi.name == "input_ids":
                feeds[vi.name] = rng.integers(0, 128, size=shape, dtype=np.int64)
            else:
                raise NotImplementedError(vi.name)
        outs = ReferenceEvaluator(model).run(None, feeds)
        arrays = dict(feeds)
        for vi, val in zip(model.graph.output, outs):
            arrays["expected_" + vi.name] = np.asarray(val)
        path = os.path.join(out_dir, fname[:-len(".onnx")] + ".npz")
        np.savez(path, **arrays)
        print("wrote", path)


def gen_examples(out_dir, reference_npz=False):
    os.makedirs(out_dir, exist_ok=True)
    models = []
    for fname, build in EXAMPLES:
        model = build()
        verify_valid(model, fname)
        path = os.path.join(out_dir, fname)
        save(model, path)
        size = os.path.getsize(path)
        assert size < MAX_EXAMPLE_BYTES, "%s is %d bytes" % (fname, size)
        print("wrote %s (%d bytes, %d params)" % (path, size, param_count(model)))
        models.append((fname, model))
    write_examples_readme(out_dir, models)
    if reference_npz:
        write_reference_npz(out_dir, models)


# --------------------------------------------------------------------------
# Test inputs
# --------------------------------------------------------------------------

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


def t_add_broadcast():
    b = GraphBuilder(10)
    b.input("a", F32, [2, 3])
    b.input("b", F32, [3])
    b.node("Add", ["a", "b"], "/Add", outputs=["y"])
    b.output("y", F32, [2, 3])
    return b.model("add_broadcast")


def t_matmul_batched():
    b = GraphBuilder(11)
    b.input("a", F32, [2, 4, 8])
    b.input("b", F32, [8, 5])
    b.node("MatMul", ["a", "b"], "/MatMul", outputs=["y"])
    b.output("y", F32, [2, 4, 5])
    return b.model("matmul_batched")


def t_gemm_trans():
    # y = 0.5 * A^T @ B^T + 2 * C, A:[6,4] (K,M), B:[3,6] (N,K), C:[3] broadcast.
    b = GraphBuilder(12)
    b.input("a", F32, [6, 4])
    b.weight("w", (3, 6), 6)
    b.weight("c", (3,), 6)
    b.node("Gemm", ["a", "w", "c"], "/fc/Gemm", outputs=["y"],
           transA=1, transB=1, alpha=0.5, beta=2.0)
    b.output("y", F32, [4, 3])
    return b.model("gemm_trans")


def t_reduce_mean():
    b = GraphBuilder(13)
    b.input("x", F32, [4, 6])
    # Opset 17: ReduceMean axes is still an attribute (it became an input in 18).
    b.node("ReduceMean", ["x"], "/ReduceMean", outputs=["y"], axes=[1], keepdims=0)
    b.output("y", F32, [4])
    return b.model("reduce_mean")


def t_reshape_transpose():
    b = GraphBuilder(14)
    b.input("x", F32, [2, 3, 4])
    # 0 copies the input dim (2), -1 is inferred (6): [2,3,4] -> [2,6,2].
    shape = b.const("/Constant", np.array([0, -1, 2], np.int64))
    r = b.node("Reshape", ["x", shape], "/Reshape")
    b.node("Transpose", [r], "/Transpose", outputs=["y"], perm=[2, 0, 1])
    b.output("y", F32, [2, 2, 6])
    return b.model("reshape_transpose")


def t_slice_concat():
    b = GraphBuilder(15)
    b.input("x", F32, [4, 10])
    # x[:, -4:]  (ends = INT64_MAX, as PyTorch exports open-ended slices) -> [4,4]
    b.init("s0_starts", np.array([-4], np.int64))
    b.init("s0_ends", np.array([INT64_MAX], np.int64))
    b.init("s0_axes", np.array([1], np.int64))
    b.init("s0_steps", np.array([1], np.int64))
    s0 = b.node("Slice", ["x", "s0_starts", "s0_ends", "s0_axes", "s0_steps"], "/Slice")
    # x[0:4, 0:-7]  (axes and steps inputs omitted: all axes, step 1) -> [4,3]
    b.init("s1_starts", np.array([0, 0], np.int64))
    b.init("s1_ends", np.array([4, -7], np.int64))
    s1 = b.node("Slice", ["x", "s1_starts", "s1_ends"], "/Slice_1")
    # x[:, -3:-1]  (negative start, negative end, negative axis, no steps) -> [4,2]
    b.init("s2_starts", np.array([-3], np.int64))
    b.init("s2_ends", np.array([-1], np.int64))
    b.init("s2_axes", np.array([-1], np.int64))
    s2 = b.node("Slice", ["x", "s2_starts", "s2_ends", "s2_axes"], "/Slice_2")
    b.node("Concat", [s0, s1, s2], "/Concat", outputs=["y"], axis=1)
    b.output("y", F32, [4, 9])
    return b.model("slice_concat")


def t_unsqueeze_squeeze():
    b = GraphBuilder(16)
    b.input("x", F32, [3, 4])
    b.init("unsqueeze_axes", np.array([0, -2], np.int64))  # -> [1,3,1,4]
    u = b.node("Unsqueeze", ["x", "unsqueeze_axes"], "/Unsqueeze")
    b.init("squeeze_axes", np.array([-2], np.int64))       # -> [1,3,4]
    b.node("Squeeze", [u, "squeeze_axes"], "/Squeeze", outputs=["y"])
    b.output("y", F32, [1, 3, 4])
    return b.model("unsqueeze_squeeze")


def t_where_cast():
    b = GraphBuilder(17)
    b.input("cond", TensorProto.BOOL, [2, 3])
    b.input("a", I64, [2, 3])
    b.input("b", F32, [3])
    af = b.node("Cast", ["a"], "/Cast", to=TensorProto.FLOAT)
    b.node("Where", ["cond", af, "b"], "/Where", outputs=["y"])
    b.output("y", F32, [2, 3])
    return b.model("where_cast")


def t_shape_folding():
    # x.reshape(x.shape[0], -1) as PyTorch exports it: all foldable for static x.
    b = GraphBuilder(18)
    b.input("x", F32, [2, 3, 4])
    s = b.node("Shape", ["x"], "/Shape")
    idx = b.const("/Constant", np.array(0, np.int64))
    d0 = b.node("Gather", [s, idx], "/Gather", axis=0)               # scalar
    ax = b.const("/Constant_1", np.array([0], np.int64))
    d0u = b.node("Unsqueeze", [d0, ax], "/Unsqueeze")                # [1]
    minus1 = b.const("/Constant_2", np.array([-1], np.int64))
    shp = b.node("Concat", [d0u, minus1], "/Concat", axis=0)         # [2]
    b.node("Reshape", ["x", shp], "/Reshape", outputs=["y"])
    b.output("y", F32, [2, 12])
    return b.model("shape_folding")


def t_softmax_layernorm():
    b = GraphBuilder(19)
    b.input("x", F32, [2, 5, 8])
    s = b.node("Softmax", ["x"], "/Softmax", axis=-1)
    b.init("ln.weight", b.rng.uniform(0.5, 1.5, 8).astype(np.float32))
    b.init("ln.bias", b.rng.uniform(-0.5, 0.5, 8).astype(np.float32))
    b.node("LayerNormalization", [s, "ln.weight", "ln.bias"], "/ln/LayerNormalization",
           outputs=["y"], axis=-1, epsilon=1e-5)
    b.output("y", F32, [2, 5, 8])
    return b.model("softmax_layernorm")


def t_dropout():
    b = GraphBuilder(20)
    b.input("x", F32, [4, 8])
    # Opset 13+: ratio is an input; no training_mode input -> inference -> identity.
    b.init("ratio", np.array(0.1, np.float32))
    b.node("Dropout", ["x", "ratio"], "/dropout/Dropout", outputs=["y"])
    b.output("y", F32, [4, 8])
    return b.model("dropout")


def t_conv_pool():
    b = GraphBuilder(21)
    b.input("x", F32, [1, 3, 8, 8])
    w = b.weight("conv1.weight", (4, 3, 3, 3), 27)
    bias = b.weight("conv1.bias", (4,), 27)
    h = b.node("Conv", ["x", w, bias], "/conv1/Conv", kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1)  # [1,4,8,8]
    h = b.node("MaxPool", [h], "/pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    w = b.weight("conv2.weight", (6, 4, 3, 3), 36)  # no bias, stride 2, no padding
    h = b.node("Conv", [h, w], "/conv2/Conv", kernel_shape=[3, 3], strides=[2, 2])
    # [1,4,4,4] -> conv2 (3x3, s2, no pad) -> [1,6,1,1]
    b.node("AveragePool", [h], "/pool2/AveragePool", outputs=["y"], kernel_shape=[1, 1])
    b.output("y", F32, [1, 6, 1, 1])
    return b.model("conv_pool")


def t_unsupported_ops():
    b = GraphBuilder(22)
    b.input("x", F32, [4, 6])
    b.input("m", F32, [3, 3])
    k = b.const("/topk/Constant", np.array([2], np.int64))
    b.node("TopK", ["x", k], "/topk/TopK", outputs=["topk_values", "topk_indices"], axis=-1)
    axis = b.const("/cumsum/Constant", np.array(1, np.int64))
    b.node("CumSum", ["x", axis], "/cumsum/CumSum", outputs=["cumsum"])
    b.node("Det", ["m"], "/det/Det", outputs=["det"])
    b.output("topk_values", F32, [4, 2])
    b.output("topk_indices", I64, [4, 2])
    b.output("cumsum", F32, [4, 6])
    b.output("det", F32, [])
    return b.model("unsupported_ops")


VALID_TESTS = [
    ("add_broadcast.onnx", t_add_broadcast),
    ("matmul_batched.onnx", t_matmul_batched),
    ("gemm_trans.onnx", t_gemm_trans),
    ("reduce_mean.onnx", t_reduce_mean),
    ("reshape_transpose.onnx", t_reshape_transpose),
    ("slice_concat.onnx", t_slice_concat),
    ("unsqueeze_squeeze.onnx", t_unsqueeze_squeeze),
    ("where_cast.onnx", t_where_cast),
    ("shape_folding.onnx", t_shape_folding),
    ("softmax_layernorm.onnx", t_softmax_layernorm),
    ("dropout.onnx", t_dropout),
    ("conv_pool.onnx", t_conv_pool),
    ("unsupported_ops.onnx", t_unsupported_ops),
]


def t_shape_mismatch():
    b = GraphBuilder(23)
    b.input("a", F32, [2, 3])
    b.input("b", F32, [4, 5])
    b.node("Add", ["a", "b"], "/Add", outputs=["y"])
    b.output("y", F32, [2, 3])  # declared, but the Add cannot produce it
    return b.model("shape_mismatch")


def t_positions_too_long():
    """A position embedding of 64 rows read at positions 0..127, as an
    exporter writes a model traced at a sequence longer than its
    max_position_embeddings: valid ONNX, but the Gather's constant indices
    are out of range."""
    b = GraphBuilder(26)
    b.input("x", F32, [1, 128, 8])
    wpe = b.weight("wpe.weight", (64, 8), 8)
    pos = b.const("/positions/Constant",
                  np.arange(128, dtype=np.int64).reshape(1, 128))
    h = b.node("Gather", [wpe, pos], "/wpe/Gather", axis=0)
    b.node("Add", ["x", h], "/Add", outputs=["y"])
    b.output("y", F32, [1, 128, 8])
    return b.model("positions_too_long")


def _external(name, dims, location, offset, length):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)),
                       ("length", str(length))):
        e = t.external_data.add()
        e.key = key
        e.value = value
    return t


def _external_model(label, location, w_offset=0, bias_location=None):
    """x[2,8] @ fc.weight[8,4] (+ fc.bias[4]); fc.weight is external data."""
    b = GraphBuilder(24)
    b.input("x", F32, [2, 8])
    tensors = [_external("fc.weight", [8, 4], location, w_offset, 8 * 4 * 4)]
    h = b.node("MatMul", ["x", "fc.weight"], "/fc/MatMul",
               outputs=["y"] if bias_location is None else None)
    if bias_location is not None:
        tensors.append(_external("fc.bias", [4], bias_location, 0, 4 * 4))
        b.node("Add", [h, "fc.bias"], "/fc/Add", outputs=["y"])
    b.output("y", F32, [2, 4])
    m = b.model(label)
    m.graph.initializer.extend(tensors)
    return m


EXTERNAL_W_OFFSET = 64  # fc.weight starts 64 bytes into weights.bin


def external_weights():
    rng = np.random.default_rng(25)
    w = rng.uniform(-0.35, 0.35, (8, 4)).astype("<f4")
    bias = rng.uniform(-0.35, 0.35, (4,)).astype("<f4")
    blob = bytearray(EXTERNAL_W_OFFSET + w.nbytes)
    blob[0:bias.nbytes] = bias.tobytes()
    blob[EXTERNAL_W_OFFSET:] = w.tobytes()
    return w, bias, bytes(blob)


def gen_tests(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    written = []

    def rec(path):
        written.append(os.path.relpath(path, out_dir))

    for fname, build in VALID_TESTS:
        model = build()
        verify_valid(model, fname)
        save(model, os.path.join(out_dir, fname))
        rec(os.path.join(out_dir, fname))

    # shape_mismatch: not checked (that is the point); make sure it is broken.
    model = t_shape_mismatch()
    path = os.path.join(out_dir, "shape_mismatch.onnx")
    save(model, path)
    rec(path)
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception:
        pass
    else:
        raise AssertionError("shape_mismatch.onnx unexpectedly passes shape inference")

    # positions_too_long: valid ONNX whose Gather reads past its table.
    model = t_positions_too_long()
    verify_valid(model, "positions_too_long.onnx")
    path = os.path.join(out_dir, "positions_too_long.onnx")
    save(model, path)
    rec(path)

    # truncated: an MLP cut to half its serialized length.
    data = build_mlp().SerializeToString()
    path = os.path.join(out_dir, "truncated.onnx")
    write_bytes(path, data[: len(data) // 2])
    rec(path)

    # garbage: 200 random bytes.
    path = os.path.join(out_dir, "garbage.onnx")
    write_bytes(path, np.random.default_rng(26).integers(0, 256, 200, dtype=np.uint8)
                .tobytes())
    rec(path)

    for bad in ("truncated.onnx", "garbage.onnx"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                onnx.load(os.path.join(out_dir, bad))
        except Exception:
            pass
        else:
            raise AssertionError(bad + " unexpectedly parses")

    # External data, valid: fc.bias at offset 0, fc.weight at offset 64 of weights.bin.
    w, bias, blob = external_weights()
    d = os.path.join(out_dir, "external_ok")
    model = _external_model("external_ok", "weights.bin", EXTERNAL_W_OFFSET, "weights.bin")
    save(model, os.path.join(d, "model.onnx"))
    write_bytes(os.path.join(d, "weights.bin"), blob)
    rec(os.path.join(d, "model.onnx"))
    rec(os.path.join(d, "weights.bin"))
    verify_valid(model, "external_ok", model_dir=d)
    loaded = onnx.load(os.path.join(d, "model.onnx"))  # resolves external data
    got = {t.name: numpy_helper.to_array(t) for t in loaded.graph.initializer}
    assert np.array_equal(got["fc.weight"], w) and np.array_equal(got["fc.bias"], bias)

    # A 128-byte decoy one level up, so that a loader following "../secret.bin"
    # would succeed in reading it (rather than failing on a missing file).
    path = os.path.join(out_dir, "secret.bin")
    write_bytes(path, bytes(range(128)))
    rec(path)

    hostile = [
        ("external_abs", "/etc/passwd"),
        ("external_dotdot", "../secret.bin"),
        ("external_symlink", "link.bin"),
    ]
    for folder, location in hostile:
        d = os.path.join(out_dir, folder)
        model = _external_model(folder, location)
        # Everything but the location is fine: check a copy whose external
        # tensors are inlined as zeros. (Checking the proto itself would make
        # onnx 1.12 look the location up relative to the current directory.)
        inlined = onnx.ModelProto()
        inlined.CopyFrom(model)
        for t in inlined.graph.initializer:
            if t.data_location == TensorProto.EXTERNAL:
                n = int(np.prod(t.dims))
                del t.external_data[:]
                t.data_location = TensorProto.DEFAULT
                t.raw_data = np.zeros(n, np.float32).tobytes()
        verify_valid(inlined, folder)
        save(model, os.path.join(d, "model.onnx"))
        rec(os.path.join(d, "model.onnx"))
    link = os.path.join(out_dir, "external_symlink", "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    # Absolute target outside the model folder that exists everywhere and is
    # longer than the 128 bytes the tensor asks for.
    os.symlink("/etc/passwd", link)
    rec(link)

    write_tests_readme(out_dir)
    for p in written:
        print("wrote", os.path.join(out_dir, p))


TESTS_README = """\
# ONNX importer test inputs

Generated by `utils/gen_onnx_models.py --set tests --out-dir test/Import/ONNX/Inputs`
(deterministic; opset 17, IR version 8). Do not edit by hand: change the script
and regenerate. Every node has a unique PyTorch-style name (`/fc/Gemm`), which
the importer should use as the op's location.

Valid models (pass `onnx.checker` and strict shape inference; all shapes static):

| file | exercises |
|---|---|
| `add_broadcast.onnx` | Add of [2,3] and [3] (numpy broadcasting) |
| `matmul_batched.onnx` | MatMul [2,4,8] x [8,5] -> [2,4,5] (rank-3 x rank-2) |
| `gemm_trans.onnx` | Gemm transA=1 transB=1 alpha=0.5 beta=2; A input [6,4], B initializer `w` [3,6], C initializer `c` [3] -> [4,3] |
| `reduce_mean.onnx` | ReduceMean axes=[1] keepdims=0 on [4,6] -> [4] (axes attribute, opset 17) |
| `reshape_transpose.onnx` | Reshape [2,3,4] by a Constant node [0,-1,2] -> [2,6,2], Transpose perm [2,0,1] -> [2,2,6] |
| `slice_concat.onnx` | three Slices of [4,10]: `x[:, -4:]` (INT64_MAX end, explicit axes/steps), `x[0:4, 0:-7]` (axes/steps omitted), `x[:, -3:-1]` (negative axis); Concat axis 1 -> [4,9] |
| `unsqueeze_squeeze.onnx` | opset-13 style Unsqueeze/Squeeze with axes as initializer inputs (incl. negative axes): [3,4] -> [1,3,1,4] -> [1,3,4] |
| `where_cast.onnx` | Cast int64 -> float, Where with bool condition and broadcast else-branch [3] |
| `shape_folding.onnx` | Shape -> Gather -> Unsqueeze -> Concat -> Reshape (x.reshape(x.shape[0], -1)); all constant-foldable, [2,3,4] -> [2,12]. ONNX shape inference derives the Reshape shape only with data propagation (`data_prop=true`) or after folding |
| `softmax_layernorm.onnx` | Softmax axis=-1 then LayerNormalization (opset 17) with scale/bias on [2,5,8] |
| `dropout.onnx` | Dropout with ratio input 0.1 and no training_mode input: inference, i.e. identity |
| `conv_pool.onnx` | Conv 3x3 pad 1 with bias, MaxPool 2x2 s2, Conv 3x3 s2 without bias or pads, AveragePool 1x1 -> [1,6,1,1] |
| `unsupported_ops.onnx` | three ops Loom does not support, `/topk/TopK`, `/cumsum/CumSum`, `/det/Det`; all three should be reported |

Broken inputs (the importer must fail with a clear diagnostic, never crash):

| file | what is wrong |
|---|---|
| `shape_mismatch.onnx` | valid protobuf, but `/Add` adds [2,3] and [4,5] (not broadcastable) |
| `truncated.onnx` | an MLP model's bytes cut to half their length |
| `garbage.onnx` | 200 random bytes |

External data (`fc.weight` [8,4] float, 128 bytes, stored outside the model):

| file | location | expected |
|---|---|---|
| `external_ok/model.onnx` + `weights.bin` | `weights.bin`; `fc.bias` [4] at offset 0 length 16, `fc.weight` at offset 64 length 128 | loads; y = x @ fc.weight + fc.bias |
| `external_abs/model.onnx` | `/etc/passwd` (absolute) | rejected |
| `external_dotdot/model.onnx` | `../secret.bin` (escapes the model folder; `secret.bin` exists here, 128 bytes, so only a path check can reject it) | rejected |
| `external_symlink/model.onnx` + `link.bin` | `link.bin`, a symlink to `/etc/passwd` (resolves outside the model folder) | rejected |
| `secret.bin` | decoy target of `external_dotdot`, not a model | - |
"""


def write_tests_readme(out_dir):
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(TESTS_README)


# --------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", help="output folder (see --help text at the top)")
    ap.add_argument("--set", choices=["examples", "tests", "all", "gpt"], default="all")
    ap.add_argument("--reference-npz", action="store_true",
                    help="also write NAME.npz (input + expected outputs) for each "
                         "example via onnx.reference (onnx >= 1.13)")
    gpt = ap.add_argument_group("--set gpt: OUT_DIR/model.onnx + model.onnx.data, a GPT "
                                "of any size (default: GPT-2 small's shape)")
    for key, value in GPT_DEFAULTS.items():
        gpt.add_argument("--" + key.replace("_", "-"), type=int, default=value)
    gpt.add_argument("--d-ff", type=int, help="MLP width (default 4 x d-model)")
    args = ap.parse_args(argv)
    if args.set == "gpt":
        if not args.out_dir:
            ap.error("--set gpt needs --out-dir")
        gen_gpt(args.out_dir, d_ff=args.d_ff,
                **{k: getattr(args, k) for k in GPT_DEFAULTS})
        return 0

    if args.set == "all":
        ex_dir = os.path.join(args.out_dir, "examples") if args.out_dir else DEFAULT_EXAMPLES_DIR
        te_dir = os.path.join(args.out_dir, "tests") if args.out_dir else DEFAULT_TESTS_DIR
    else:
        ex_dir = te_dir = args.out_dir
        if ex_dir is None:
            ex_dir, te_dir = DEFAULT_EXAMPLES_DIR, DEFAULT_TESTS_DIR
    if args.set in ("examples", "all"):
        gen_examples(ex_dir, args.reference_npz)
    if args.set in ("tests", "all"):
        gen_tests(te_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
