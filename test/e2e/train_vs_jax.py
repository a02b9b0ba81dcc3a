#!/usr/bin/env python3
"""Checks Loom's training step against JAX, an independent framework.

For an ONNX model: compile it with `loomc --train --loss=cross_entropy
--optimizer=adamw`, then with `loom-interp` compute the loss and gradients at
step 0 (@forward_backward) and the parameters after N AdamW steps
(@train_step, fed back step by step). The same is computed in JAX: the ONNX
graph is evaluated by a small evaluator written on jax.numpy/jax.lax below,
differentiated by jax.grad, and updated by PyTorch's AdamW rule written out
here. Shares nothing with Loom but the ONNX file and the initial parameter
values (read from the ONNX initializers, not from Loom's output).

Exit status 0 when every compared tensor agrees within --rtol (norm-wise
relative error ||loom - jax|| / ||jax||), 1 otherwise; prints one line per
comparison.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

import jax
import jax.numpy as jnp
import onnx
from onnx import numpy_helper

jax.config.update("jax_enable_x64", False)

# --------------------------------------------------------------------------
# ONNX evaluator on JAX (only the ops the example models use).
# --------------------------------------------------------------------------


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


# --precision=bf16|fp16: the policy of loom-mixed-precision, written out
# again here on the ONNX graph. Every MatMul / Gemm product takes its
# operands in 16 bits, sums in f32 and rounds its result to 16 bits, which
# it keeps. The ops in FOLLOW compute in 16 bits when a float input is 16-bit
# and every other float input is 16-bit or "castable" (a graph input, an
# initializer, a constant, or a reshape of one: cast to 16 bits); Softmax of
# a 16-bit input computes in f32 and rounds its output to 16 bits; every
# other op reads f32 (16-bit inputs widened). Graph outputs are widened.
LOW = None  # jnp.bfloat16 or jnp.float16
FOLLOW = {"Add", "Sub", "Mul", "Div", "Relu", "Erf", "Where", "Reshape",
          "Transpose", "Split", "Flatten"}


def _product(A, B):
    if LOW is None:
        return jnp.matmul(A, B)
    y = jnp.matmul(A.astype(LOW), B.astype(LOW),
                   preferred_element_type=jnp.float32)
    return y.astype(LOW)


def _is_low(v):
    return LOW is not None and v is not None and v.dtype == LOW


def _is_float(v):
    return v is not None and jnp.issubdtype(v.dtype, jnp.floating)


def _apply_policy(node, x, castable):
    """The inputs `node` computes on under the mixed-precision policy."""
    if LOW is None or node.op_type in ("MatMul", "Gemm"):
        return x
    floats = [i for i, v in enumerate(x) if _is_float(v)]
    low = [i for i in floats if _is_low(x[i])]
    if not low:
        return x
    if node.op_type in FOLLOW and all(
            _is_low(x[i]) or node.input[i] in castable for i in floats):
        # A castable input is broadcast in f32 and then cast, as Loom casts
        # after its explicit broadcast: the gradient is summed in f32.
        shape = (jnp.broadcast_shapes(*[x[i].shape for i in floats])
                 if node.op_type in ("Add", "Sub", "Mul", "Div", "Where")
                 else None)
        return [(jnp.broadcast_to(v, shape) if shape is not None and
                 not _is_low(v) else v).astype(LOW) if i in floats else v
                for i, v in enumerate(x)]
    return [v.astype(jnp.float32) if i in low else v for i, v in enumerate(x)]


def evaluate(model, env):
    """Runs the graph; env maps value names to arrays (inputs + initializers)."""
    env = dict(env)
    castable = set(env)
    for node in model.graph.node:
        a = _attrs(node)
        x = [env[i] if i else None for i in node.input]
        op = node.op_type
        low_softmax = op == "Softmax" and _is_low(x[0])
        x = _apply_policy(node, x, castable)
        if op == "Constant" or (op == "Reshape" and node.input[0] in castable):
            castable.update(node.output)
        if op == "Constant":
            out = [jnp.asarray(numpy_helper.to_array(a["value"]))]
        elif op == "Gemm":
            A, B = x[0], x[1]
            if a.get("transA", 0):
                A = A.T
            if a.get("transB", 0):
                B = B.T
            y = _product(A, B)
            if a.get("alpha", 1.0) != 1.0:
                y = a["alpha"] * y
            if len(x) > 2 and x[2] is not None:
                bias = x[2]
                if _is_low(y) and node.input[2] in castable:
                    bias = jnp.broadcast_to(bias, y.shape).astype(LOW)
                elif _is_low(y):
                    y = y.astype(jnp.float32)
                y = y + a.get("beta", 1.0) * bias
            out = [y]
        elif op == "MatMul":
            out = [_product(x[0], x[1])]
        elif op == "Add":
            out = [x[0] + x[1]]
        elif op == "Mul":
            out = [x[0] * x[1]]
        elif op == "Div":
            out = [x[0] / x[1]]
        elif op == "Relu":
            out = [jnp.maximum(x[0], 0)]
        elif op == "Erf":
            out = [jax.scipy.special.erf(x[0])]
        elif op == "Conv":
            pads = a.get("pads", [0, 0, 0, 0])
            y = jax.lax.conv_general_dilated(
                x[0], x[1], window_strides=a.get("strides", [1, 1]),
                padding=[(pads[0], pads[2]), (pads[1], pads[3])],
                rhs_dilation=a.get("dilations", [1, 1]),
                dimension_numbers=("NCHW", "OIHW", "NCHW"),
                feature_group_count=a.get("group", 1))
            if len(x) > 2 and x[2] is not None:
                y = y + x[2][None, :, None, None]
            out = [y]
        elif op == "BatchNormalization":
            X, s, b, m, v = x
            eps = a.get("epsilon", 1e-5)
            shp = (1, -1) + (1,) * (X.ndim - 2)
            out = [(X - m.reshape(shp)) / jnp.sqrt(v.reshape(shp) + eps)
                   * s.reshape(shp) + b.reshape(shp)]
        elif op in ("MaxPool", "AveragePool"):
            k, st = a["kernel_shape"], a.get("strides", [1, 1])
            init, fn = ((-jnp.inf, jax.lax.max) if op == "MaxPool"
                        else (0.0, jax.lax.add))
            y = jax.lax.reduce_window(x[0], init, fn, (1, 1) + tuple(k),
                                      (1, 1) + tuple(st), "VALID")
            if op == "AveragePool":
                y = y / (k[0] * k[1])
            out = [y]
        elif op == "Flatten":
            axis = a.get("axis", 1)
            X = x[0]
            out = [X.reshape(int(np.prod(X.shape[:axis])), -1)]
        elif op == "Gather":
            out = [jnp.take(x[0], x[1], axis=a.get("axis", 0))]
        elif op == "LayerNormalization":
            X, s, b = x[0], x[1], x[2]
            axis = a.get("axis", -1) % X.ndim
            axes = tuple(range(axis, X.ndim))
            mu = X.mean(axis=axes, keepdims=True)
            var = ((X - mu) ** 2).mean(axis=axes, keepdims=True)
            out = [(X - mu) / jnp.sqrt(var + a.get("epsilon", 1e-5)) * s + b]
        elif op == "Split":
            sizes = [int(v) for v in np.asarray(x[1])]
            idx = np.cumsum(sizes)[:-1]
            out = list(jnp.split(x[0], idx, axis=a.get("axis", 0)))
        elif op == "Reshape":
            shape = [int(v) for v in np.asarray(x[1])]
            shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
            out = [x[0].reshape(shape)]
        elif op == "Transpose":
            out = [jnp.transpose(x[0], a.get("perm"))]
        elif op == "Where":
            out = [jnp.where(x[0], x[1], x[2])]
        elif op == "Softmax":
            y = jax.nn.softmax(x[0].astype(jnp.float32), axis=a.get("axis", -1))
            out = [y.astype(LOW) if low_softmax else y]
        else:
            raise NotImplementedError("JAX reference: no rule for " + op)
        for name, value in zip(node.output, out):
            env[name] = value
    return [env[o.name].astype(jnp.float32) if _is_low(env[o.name])
            else env[o.name] for o in model.graph.output]


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy, classes on the last axis."""
    logits = logits.reshape(-1, logits.shape[-1])
    labels = labels.reshape(-1)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def adamw(params, grads, state, step, lr, beta1, beta2, eps, wd):
    """PyTorch's AdamW (decoupled weight decay, bias-corrected)."""
    t = step + 1
    new_p, new_s = {}, {}
    for k in params:
        p = params[k] * (1 - lr * wd)
        m = beta1 * state[k][0] + (1 - beta1) * grads[k]
        v = beta2 * state[k][1] + (1 - beta2) * grads[k] ** 2
        mhat = m / (1 - beta1 ** t)
        vhat = v / (1 - beta2 ** t)
        new_p[k] = p - lr * mhat / (jnp.sqrt(vhat) + eps)
        new_s[k] = (m, v)
    return new_p, new_s


# --------------------------------------------------------------------------
# Loom side.
# --------------------------------------------------------------------------

_ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
              np.dtype(np.int64): "I64"}


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = np.asarray(arr, order="C")  # keeps 0-D tensors 0-D
        data = arr.tobytes()
        header[name] = {"dtype": _ST_DTYPES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for blob in blobs:
            f.write(blob)


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write("command failed: %s\n%s%s" % (" ".join(cmd),
                                                       proc.stdout, proc.stderr))
        sys.exit(2)


def fname(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--interp", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--precision", choices=("fp32", "bf16", "fp16"),
                    default="fp32",
                    help="bf16/fp16: loomc --precision, and the same casts "
                         "around JAX's products; fp16 with dynamic loss "
                         "scaling on both sides (PyTorch GradScaler's rules)")
    ap.add_argument("--loss-scale-init", type=float, default=65536.0)
    ap.add_argument("--loss-scale-growth-interval", type=int, default=2000)
    args = ap.parse_args()
    global LOW
    LOW = {"fp32": None, "bf16": jnp.bfloat16,
           "fp16": jnp.float16}[args.precision]
    scaling = args.precision == "fp16"
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    os.makedirs(args.workdir, exist_ok=True)
    model = onnx.load(args.model)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    # Trainable: float initializers of rank >= 1, except BatchNorm's running
    # statistics (inputs 3 and 4 of an inference BatchNormalization), which
    # PyTorch keeps as buffers and Loom imports as constants.
    uses = {}
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            stat = node.op_type == "BatchNormalization" and k in (3, 4)
            uses[name] = uses.get(name, True) and stat
    params = {k: v for k, v in inits.items()
              if v.dtype.kind == "f" and v.ndim >= 1 and not uses.get(k)}
    consts = {k: v for k, v in inits.items() if k not in params}
    inputs = [i for i in model.graph.input if i.name not in inits]
    rng = np.random.default_rng(0)
    feed = {}
    for inp in inputs:
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        if inp.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feed[inp.name] = rng.integers(0, 100, size=shape).astype(np.int64)
        else:
            feed[inp.name] = rng.standard_normal(shape).astype(np.float32)
    out_shape = [d.dim_value for d in
                 model.graph.output[0].type.tensor_type.shape.dim]
    classes = out_shape[-1]
    labels = rng.integers(0, classes, size=out_shape[:-1]).astype(np.int64)

    # --- Loom ---
    mlir = os.path.join(args.workdir, "model.mlir")
    run([args.loomc, args.model, "--train", "--loss=cross_entropy",
         "--optimizer=adamw", "--lr=%r" % args.lr,
         "--weight-decay=%r" % args.weight_decay,
         "--precision=%s" % args.precision,
         "--loss-scale-init=%r" % args.loss_scale_init,
         "--loss-scale-growth-interval=%d" % args.loss_scale_growth_interval,
         "-o", mlir])
    in_files = []
    for name, value in list(feed.items()) + [("labels", labels)]:
        p = os.path.join(args.workdir, "in_%s.npy" % fname(name))
        np.save(p, value)
        in_files += ["--input", "%s=%s" % (name, p)]
    out0 = os.path.join(args.workdir, "fb")
    # With loss scaling, @forward_backward's gradients are scaled: step 0's
    # are taken at scale FB_SCALE (no overflow) and divided by it.
    FB_SCALE = 1024.0
    fb_feed = []
    if scaling:
        st0 = os.path.join(args.workdir, "scale0.safetensors")
        write_safetensors(st0, {**params,
                                "loss_scale": np.array(FB_SCALE, np.float32)})
        fb_feed = ["--params", st0]
    run([args.interp, mlir, "--entry=forward_backward", "--output-dir", out0]
        + fb_feed + in_files)
    loom_loss0 = np.load(os.path.join(out0, "loss.npy"))
    loom_grads = {k: np.load(os.path.join(out0, fname(k) + ".npy"))
                  / (FB_SCALE if scaling else 1.0) for k in params}

    state = {}
    for k, v in params.items():
        state[k + ".adam_m"] = np.zeros_like(v)
        state[k + ".adam_v"] = np.zeros_like(v)
    if scaling:
        state["loss_scale"] = np.array(args.loss_scale_init, np.float32)
        state["loss_scale.good_steps"] = np.array(0, np.int64)
        state["loss_scale.skipped"] = np.array(0, np.int64)
    loom_scales, loom_skips = [], []
    cur = dict(params)
    for step in range(args.steps):
        st = os.path.join(args.workdir, "state.safetensors")
        write_safetensors(st, {**cur, **state})
        sp = os.path.join(args.workdir, "step.npy")
        np.save(sp, np.array(step, dtype=np.int64))
        od = os.path.join(args.workdir, "step%d" % step)
        run([args.interp, mlir, "--entry=train_step", "--params", st,
             "--input", "step=" + sp, "--output-dir", od] + in_files)
        cur = {k: np.load(os.path.join(od, fname(k) + ".npy")) for k in params}
        state = {k: np.load(os.path.join(od, fname(k) + ".npy")) for k in state}
        got_step = int(np.load(os.path.join(od, "step.npy")))
        assert got_step == step + 1, "step counter %d != %d" % (got_step, step + 1)
        if scaling:
            loom_scales.append(float(np.load(os.path.join(od, "loss_scale_used.npy"))))
            loom_skips.append(int(np.load(os.path.join(od, "skipped_steps.npy"))))

    # --- JAX ---
    def loss_fn(p):
        env = {**{k: jnp.asarray(v) for k, v in consts.items()},
               **{k: jnp.asarray(v) for k, v in feed.items()}, **p}
        return cross_entropy(evaluate(model, env)[0], jnp.asarray(labels))

    jp = {k: jnp.asarray(v) for k, v in params.items()}
    if scaling:
        # Seeded with the scale as Loom's backward is, through the same
        # 16-bit casts, then unscaled by the f32 reciprocal.
        fb_grads = jax.grad(lambda p: loss_fn(p) * jnp.float32(FB_SCALE))(jp)
        jax_loss0 = loss_fn(jp)
        jax_grads = {k: g * jnp.float32(1.0 / FB_SCALE)
                     for k, g in fb_grads.items()}
    else:
        jax_loss0, jax_grads = jax.value_and_grad(loss_fn)(jp)
    js = {k: (jnp.zeros_like(v), jnp.zeros_like(v)) for k, v in jp.items()}
    # GradScaler: skip the update on an inf/NaN gradient and halve the scale;
    # double it after growth-interval good steps. Adam's t counts updates.
    scale, good, skipped, applied = np.float32(args.loss_scale_init), 0, 0, 0
    jax_scales, jax_skips = [], []
    for step in range(args.steps):
        if not scaling:
            g = jax.grad(loss_fn)(jp)
            jp, js = adamw(jp, g, js, step, args.lr, beta1, beta2, eps,
                           args.weight_decay)
            continue
        g = jax.grad(lambda p: loss_fn(p) * scale)(jp)
        finite = all(bool(jnp.all(jnp.isfinite(v))) for v in g.values())
        jax_scales.append(float(scale))
        if finite:
            inv = np.float32(1.0) / scale
            g = {k: v * inv for k, v in g.items()}
            jp, js = adamw(jp, g, js, applied, args.lr, beta1, beta2, eps,
                           args.weight_decay)
            applied += 1
            good += 1
            if good >= args.loss_scale_growth_interval:
                scale, good = np.float32(scale * 2), 0
        else:
            scale, good, skipped = np.float32(scale * 0.5), 0, skipped + 1
        jax_skips.append(skipped)

    # --- compare ---
    failures = 0

    def check(what, got, want):
        nonlocal failures
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        ok = err <= args.rtol
        failures += not ok
        print("%-4s %-40s rel err %.2e" % ("ok" if ok else "FAIL", what, err))

    if scaling:
        same = loom_scales == jax_scales and loom_skips == jax_skips
        failures += not same
        print("%-4s loss scales %s, skipped steps so far %s (JAX: %s, %s)" % (
            "ok" if same else "FAIL", loom_scales, loom_skips, jax_scales,
            jax_skips))
    check("loss at step 0", loom_loss0, jax_loss0)
    for k in params:
        check("grad " + k, loom_grads[k], jax_grads[k])
    # Adam(W) divides each gradient element by its own running RMS, so an
    # element whose exact gradient is zero (e.g. the key part of an attention
    # bias: softmax is invariant to it) takes full +-lr steps driven by f32
    # rounding noise, differently in any two correct implementations. Such
    # elements are not comparable; they are left out and counted, never
    # silently: an element counts as "noise" when JAX's gradient at step 0 is
    # below 1e-6 of the tensor's largest gradient element (1e-3 with bf16
    # GEMMs, whose rounding is 2^-8 relative) but not exactly zero in both.
    noise = 1e-3 if LOW is not None else 1e-6
    excluded = 0
    for k in params:
        g0 = np.abs(np.asarray(jax_grads[k], np.float64))
        l0 = np.asarray(loom_grads[k], np.float64)
        # Exactly zero in both (e.g. embedding rows no input uses) is exact,
        # and Adam leaves those elements to weight decay alone: compared.
        keep = (g0 > noise * max(g0.max(), 1e-30)) | ((g0 == 0) & (l0 == 0))
        excluded += int((~keep).sum())
        check("param %s after %d steps" % (k, args.steps),
              np.asarray(cur[k])[keep], np.asarray(jp[k])[keep])
    print("%d parameter elements with zero exact gradient not compared"
          % excluded)
    print("%d passed, %d failed" % (1 + 2 * len(params) + scaling - failures,
                                    failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
