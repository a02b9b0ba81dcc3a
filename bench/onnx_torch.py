"""Evaluates an ONNX graph with PyTorch eager ops, for bench/ (the PyTorch
side of the comparison).

Covers the ops of the example models (mlp, cnn, transformer_block, gpt2,
digits_mlp), with the same semantics as the JAX evaluator in
test/e2e/train_vs_jax.py: in particular BatchNormalization is the inference
form with its running statistics as trainable parameters, as Loom imports it.
"""
import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def split_initializers(model):
    """(params, consts): float initializers of rank >= 1 are parameters (the
    rule Loom's importer and train_vs_jax.py use); the rest are constants."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    params = {k: v for k, v in inits.items() if v.dtype.kind == "f" and v.ndim >= 1}
    consts = {k: v for k, v in inits.items() if k not in params}
    return params, consts


def evaluate(model, env):
    """Runs the graph; env maps value names to tensors (inputs + initializers).
    Returns the graph outputs in order."""
    env = dict(env)
    for node in model.graph.node:
        a = _attrs(node)
        x = [env[i] if i else None for i in node.input]
        op = node.op_type
        if op == "Constant":
            out = [torch.from_numpy(np.array(numpy_helper.to_array(a["value"])))]
        elif op == "Gemm":
            A, B = x[0], x[1]
            if a.get("transA", 0):
                A = A.t()
            if a.get("transB", 0):
                B = B.t()
            alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
            C = x[2] if len(x) > 2 else None
            if C is not None and alpha == 1.0 and beta == 1.0:
                out = [torch.addmm(C, A, B)]  # what nn.Linear runs
            else:
                y = alpha * (A @ B)
                out = [y if C is None else y + beta * C]
        elif op == "MatMul":
            out = [torch.matmul(x[0], x[1])]
        elif op == "Add":
            out = [x[0] + x[1]]
        elif op == "Mul":
            out = [x[0] * x[1]]
        elif op == "Div":
            out = [x[0] / x[1]]
        elif op == "Relu":
            out = [torch.relu(x[0])]
        elif op == "Erf":
            out = [torch.erf(x[0])]
        elif op == "Conv":
            pads = a.get("pads", [0, 0, 0, 0])
            if pads[0] != pads[2] or pads[1] != pads[3]:
                raise NotImplementedError("PyTorch reference: asymmetric Conv pads")
            out = [F.conv2d(x[0], x[1], x[2] if len(x) > 2 else None,
                            stride=a.get("strides", [1, 1]), padding=pads[:2],
                            dilation=a.get("dilations", [1, 1]),
                            groups=a.get("group", 1))]
        elif op == "BatchNormalization":
            X, s, b, m, v = x
            eps = a.get("epsilon", 1e-5)
            shp = (1, -1) + (1,) * (X.dim() - 2)
            out = [(X - m.reshape(shp)) / torch.sqrt(v.reshape(shp) + eps)
                   * s.reshape(shp) + b.reshape(shp)]
        elif op == "MaxPool":
            out = [F.max_pool2d(x[0], a["kernel_shape"], a.get("strides", [1, 1]))]
        elif op == "AveragePool":
            out = [F.avg_pool2d(x[0], a["kernel_shape"], a.get("strides", [1, 1]))]
        elif op == "Flatten":
            out = [torch.flatten(x[0], a.get("axis", 1))]
        elif op == "Gather":
            axis = a.get("axis", 0)
            if axis != 0:
                raise NotImplementedError("PyTorch reference: Gather axis != 0")
            out = [F.embedding(x[1], x[0])]
        elif op == "LayerNormalization":
            X, s, b = x[0], x[1], x[2]
            axis = a.get("axis", -1) % X.dim()
            out = [F.layer_norm(X, X.shape[axis:], s, b, a.get("epsilon", 1e-5))]
        elif op == "Split":
            sizes = [int(v) for v in x[1].tolist()]
            out = list(torch.split(x[0], sizes, dim=a.get("axis", 0)))
        elif op == "Reshape":
            shape = [int(v) for v in x[1].tolist()]
            shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
            out = [x[0].reshape(shape)]
        elif op == "Transpose":
            perm = a.get("perm") or list(range(x[0].dim()))[::-1]
            out = [x[0].permute(*perm)]
        elif op == "Where":
            out = [torch.where(x[0], x[1], x[2])]
        elif op == "Softmax":
            out = [torch.softmax(x[0], dim=a.get("axis", -1))]
        else:
            raise NotImplementedError("PyTorch reference: no rule for " + op)
        for name, value in zip(node.output, out):
            env[name] = value
    return [env[o.name] for o in model.graph.output]


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy, classes on the last axis."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
