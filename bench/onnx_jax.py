"""Evaluates a PyTorch-exported ONNX graph on JAX, for bench/ (the JAX side of
`bench/run.py --suite real`).

The op rules of test/e2e/train_vs_jax.py's evaluator (the test oracle, used
as it is) cover the example models. Graphs from `torch.onnx.export` (the
torchvision and transformers models) need more, in two kinds:

- Shape arithmetic (Shape, Concat, Range, Unsqueeze, Slice, CastLike of
  constants...): values that do not depend on the inputs or parameters.
  They are kept as numpy arrays (concrete under jax.jit, so that Reshape and
  Expand get static shapes) and computed by onnx's reference implementation
  (onnx.reference), node by node, whenever every input of a node is
  concrete. Shape of a traced value is its static shape.
- Ops on traced values that the oracle lacks (elementwise functions, MaxPool
  with padding, ReduceMean with axes as an input, HardSwish, HardSigmoid,
  SplitToSequence / SequenceAt, Expand, Cast), and BatchNormalization in
  training mode (batch statistics), which the exporter writes in inference
  form and marks only in its metadata (docs/onnx-import.md; Loom's
  `--batch-norm=auto` reads the same metadata). Those rules are below; every
  other op goes to the oracle's rule.
"""
import os
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "test", "e2e"))
import train_vs_jax  # noqa: E402  (the oracle: its evaluate, adamw, cross_entropy)

NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
            onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
            onnx.TensorProto.BOOL: np.bool_}

UNARY = {"Sqrt": jnp.sqrt, "Tanh": jnp.tanh, "Neg": jnp.negative,
         "Reciprocal": jnp.reciprocal, "Sigmoid": jax.nn.sigmoid, "Cos": jnp.cos,
         "Sin": jnp.sin, "Exp": jnp.exp, "Log": jnp.log, "IsNaN": jnp.isnan,
         "Identity": lambda x: x, "Not": jnp.logical_not}
BINARY = {"Pow": jnp.power, "Sub": jnp.subtract, "LessOrEqual": jnp.less_equal,
          "Less": jnp.less, "Greater": jnp.greater, "Equal": jnp.equal}


def attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def batch_norm_trains(node):
    """True when the exporter's metadata says the node came from a module in
    training mode (PyTorch's functional batch norm), or training_mode=1."""
    if attrs(node).get("training_mode", 0):
        return True
    return any(p.key == "pkg.torch.onnx.fx_node"
               and "_native_batch_norm_legit_functional" in p.value
               for p in node.metadata_props)


def trainable(model):
    """The names of the initializers that are trained: floats of rank >= 1,
    less those the exporter marks as buffers or constants (Llama's rotary
    inv_freq, BatchNorm's running statistics), as Loom's importer decides."""
    kinds = {}
    for vi in list(model.graph.value_info) + list(model.graph.input):
        for p in vi.metadata_props:
            if p.key == "pkg.torch.export.graph_signature.InputSpec.kind":
                kinds[vi.name] = p.value
    return {t.name for t in model.graph.initializer
            if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)
            and len(t.dims) >= 1 and kinds.get(t.name, "PARAMETER") == "PARAMETER"}


def _concrete(v):
    """A value known before tracing: None, numpy, or a sequence of such."""
    if isinstance(v, list):
        return all(_concrete(e) for e in v)
    return v is None or isinstance(v, (np.ndarray, np.generic))


def _pool_pads(a, rank):
    pads = list(a.get("pads", [0] * (2 * rank)))
    return [(0, 0), (0, 0)] + list(zip(pads[:rank], pads[rank:]))


def _traced_rule(node, a, x):
    """The result list of NODE on traced inputs X, or None to use the
    oracle's rule."""
    op = node.op_type
    if op in UNARY:
        return [UNARY[op](x[0])]
    if op in BINARY:
        return [BINARY[op](x[0], x[1])]
    if op == "Shape":
        return [np.array(x[0].shape[a.get("start", 0):a.get("end", None)], np.int64)]
    if op == "CastLike":
        return [(np.asarray(x[0]) if _concrete(x[0]) else x[0]).astype(x[1].dtype)]
    if op == "Cast":
        return [x[0].astype(NP_TYPES[a["to"]])]
    if op == "Expand":
        shape = np.broadcast_shapes(tuple(x[0].shape), tuple(int(s) for s in x[1]))
        return [jnp.broadcast_to(x[0], shape)]
    if op == "Unsqueeze":
        return [jnp.expand_dims(x[0], tuple(int(v) for v in x[1]))]
    if op == "Concat":
        return [jnp.concatenate([jnp.asarray(v) for v in x], axis=a["axis"])]
    if op == "SplitToSequence":
        axis = a.get("axis", 0)
        dim = x[0].shape[axis]
        if len(x) < 2 or x[1] is None:  # chunks of 1, squeezed unless keepdims
            parts = jnp.split(x[0], dim, axis=axis)
            return [parts if a.get("keepdims", 1) else
                    [jnp.squeeze(p, axis) for p in parts]]
        sizes = np.asarray(x[1])
        if sizes.ndim == 0:  # chunks of that size, the last one shorter
            n = int(sizes)
            sizes = [n] * (dim // n) + ([dim % n] if dim % n else [])
        return [list(jnp.split(x[0], np.cumsum(sizes)[:-1], axis=axis))]
    if op == "Slice":  # Python's slices clamp as ONNX does
        starts, ends = np.asarray(x[1]).tolist(), np.asarray(x[2]).tolist()
        axes = np.asarray(x[3]).tolist() if len(x) > 3 and x[3] is not None \
            else list(range(len(starts)))
        steps = np.asarray(x[4]).tolist() if len(x) > 4 and x[4] is not None \
            else [1] * len(starts)
        index = [slice(None)] * x[0].ndim
        for s, e, ax, st in zip(starts, ends, axes, steps):
            index[ax % x[0].ndim] = slice(s, e, st)
        return [x[0][tuple(index)]]
    if op == "SequenceAt":
        return [x[0][int(x[1])]]
    if op == "ReduceMean":
        axes = a.get("axes") if len(x) < 2 or x[1] is None else \
            tuple(int(v) for v in x[1])
        if axes is None and a.get("noop_with_empty_axes", 0):
            return [x[0]]
        return [jnp.mean(x[0], axis=None if axes is None else tuple(axes),
                         keepdims=bool(a.get("keepdims", 1)))]
    if op == "HardSigmoid":
        return [jnp.clip(a.get("alpha", 0.2) * x[0] + a.get("beta", 0.5), 0.0, 1.0)]
    if op == "HardSwish":
        return [x[0] * jnp.clip(x[0] / 6.0 + 0.5, 0.0, 1.0)]
    if op == "MaxPool" and any(a.get("pads", [])):
        if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
            raise NotImplementedError("JAX (bench): MaxPool with ceil_mode or dilations")
        k, st = a["kernel_shape"], a.get("strides", [1] * len(a["kernel_shape"]))
        return [jax.lax.reduce_window(x[0], -jnp.inf, jax.lax.max, (1, 1) + tuple(k),
                                      (1, 1) + tuple(st), _pool_pads(a, len(k)))]
    if op == "Reshape" and a.get("allowzero", 0) and 0 in [int(s) for s in x[1]]:
        raise NotImplementedError("JAX (bench): Reshape with allowzero=1 and a 0")
    if op == "BatchNormalization" and batch_norm_trains(node):
        X, s, b = x[0], x[1], x[2]
        axes = (0,) + tuple(range(2, X.ndim))
        shp = (1, -1) + (1,) * (X.ndim - 2)
        mean = X.mean(axis=axes, keepdims=True)
        var = ((X - mean) ** 2).mean(axis=axes, keepdims=True)  # biased, as PyTorch
        return [(X - mean) / jnp.sqrt(var + a.get("epsilon", 1e-5)) * s.reshape(shp)
                + b.reshape(shp)]
    return None


def evaluate(model, env):
    """Runs the graph; ENV maps value names to arrays (inputs, parameters as
    JAX values, constants as numpy arrays). Returns the graph outputs."""
    env = dict(env)
    for node in model.graph.node:
        x = [env[i] if i else None for i in node.input]
        a = attrs(node)
        if all(_concrete(v) for v in x):
            feeds = {i: v for i, v in zip(node.input, x) if i}
            out = ReferenceEvaluator(node).run(None, feeds)
        else:
            out = _traced_rule(node, a, x)
            if out is None:
                one = types.SimpleNamespace(graph=types.SimpleNamespace(
                    node=[node], output=[types.SimpleNamespace(name=o)
                                         for o in node.output]))
                out = train_vs_jax.evaluate(one, {i: v for i, v in zip(node.input, x) if i})
        for name, value in zip(node.output, out):
            env[name] = value
    return [env[o.name] for o in model.graph.output]


def split_initializers(model, base_dir=None):
    """(params, consts) as numpy arrays: trainable() decides."""
    names = trainable(model)
    inits = {t.name: numpy_helper.to_array(t, base_dir=base_dir or "")
             for t in model.graph.initializer}
    return ({k: v for k, v in inits.items() if k in names},
            {k: v for k, v in inits.items() if k not in names})
