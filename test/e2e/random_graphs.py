#!/usr/bin/env python3
"""Random JSON graphs: compiled CPU code against the reference interpreter.

A seeded generator builds random but valid graphs in Loom's JSON format
(docs/json-format.md): f32 (and a little f64, i64, i32, i1), static shapes,
a few inputs and parameters with initializers, ops chained into a DAG with
fan-out and several outputs. For each graph it

1. imports it (`loomc G.json -o ir.mlir`, parameters in ir.safetensors),
2. compiles it (`loomc G.json --target=cpu -o art.loom`),
3. runs `@forward` with `loom-run` and with `loom-interp` on the same random
   inputs, and
4. compares every output: floats by the norm-wise relative error
   max|a - b| / max(max|b|, 1e-6) <= TOL, integers and booleans exactly
   (NaN only where the interpreter has NaN too).

A failure of either tool or a mismatch saves the graph, its inputs, the
log and a reproducer script under --keep-failures and prints a one-line
reproducer (`random_graphs.py --replay DIR`). `--minimize` shrinks each
failure to a smallest graph that still fails the same way (drops outputs,
bypasses nodes, cuts nodes into fresh inputs) and writes it to DIR/min/.

Graph N of a run uses seed --seed + N, so `--seed S --count 1` reproduces
graph S of any run. The values are kept well conditioned on purpose, so that
a mismatch is a real bug and never rounding: exp only of bounded values,
log/sqrt/rsqrt/pow/div only of values bounded away from zero, layer norm and
batch norm statistics of rows with noise added (never of a constant row),
float->int casts and f16/bf16 round trips only of values that both sides
compute bit for bit (inputs, parameters and exact ops: relu, max, slices...).

Ops the JSON format has no node for are not covered (`pad` is only created
by autodiff). `floor` is left out: it is discontinuous, so a last-bit
difference upstream flips whole units. `dropout` is left out: the inference
entry keeps its seed argument, which loom-run and loom-interp would each
have to be given, and its mask is random by design.

KNOWN_BUGS below lists generator features that expose compiler bugs not
fixed yet; they are off by default (so the lit test passes) and on with
--include-known-bugs. Remove an entry when its bug is fixed.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

import numpy as np

TOL = 1e-4

# Generator features that expose known, unfixed compiler bugs. Each entry:
# feature name -> the bug. The generator skips a feature listed here unless
# --include-known-bugs is given. Remove the entry when the bug is fixed.
KNOWN_BUGS = {
    "specials-conv-padding":
        "(--specials only) conv2d with padding and an inf or NaN in the input "
        "or filter: compiled code multiplies the padded zeros (0 * inf = NaN, "
        "as the doc's 'zero padding' and PyTorch do), loom-interp skips the "
        "padded taps (no NaN). One side must change; the doc suggests the "
        "interpreter. test/e2e/Inputs/random-failures/conv-pad-inf.json",
}

NP = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32,
      "i1": np.bool_, "f16": np.float16}
FLOATS = ("f32", "f64")
ALL = FLOATS + ("i64", "i32", "i1")


def prod(s):
    n = 1
    for d in s:
        n *= d
    return n


def shape_doc(dtype, shape):
    return "%s%s" % (dtype, list(shape))


def parse_shape_doc(doc):
    m = re.match(r"^([a-z0-9]+)(\[.*\])$", doc)
    return m.group(1), tuple(json.loads(m.group(2)))


class V:
    __slots__ = ("name", "shape", "dtype", "exact", "uses", "kind")

    def __init__(self, name, shape, dtype, exact, kind):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.exact, self.uses, self.kind = exact, 0, kind


class Unsupported(Exception):
    """This op does not apply to the chosen operand; try another."""


class Gen:
    def __init__(self, seed, max_ops, skip, all_outputs=False, specials=False):
        self.all_outputs = all_outputs
        self.specials = specials
        self.r = random.Random(seed)
        # A third of the graphs have larger tensors (odd sizes up to 40, to
        # reach vector loops and their remainders) and ranks up to 6.
        self.big = self.r.random() < 0.33
        self.max_elems = 8192 if self.big else 1024
        self.seed = seed
        self.max_ops = max_ops
        self.skip = set(skip)
        self.vals = []          # every value, in creation order
        self.by_name = {}
        self.inputs, self.params, self.nodes = [], [], []
        self.n = 0
        self.ops_used = []

    # -- values ------------------------------------------------------------
    def fresh(self, prefix):
        self.n += 1
        return "%s%d" % (prefix, self.n)

    def add_val(self, name, shape, dtype, exact, kind):
        v = V(name, shape, dtype, exact, kind)
        self.vals.append(v)
        self.by_name[name] = v
        return v

    def new_input(self, shape, dtype="f32", hint=None):
        name = self.fresh("in")
        if hint is None:
            hint = {"f32": "normal:%g%s" % (self.r.choice([1, 1, 2, 0.5]),
                                           ":special" if self.specials else ""),
                    "f64": "normal:1", "i1": "bool",
                    "i64": "int:-3:4", "i32": "int:-3:4"}[dtype]
        self.inputs.append({"name": name, "shape": list(shape),
                            "dtype": dtype, "doc": "rg:" + hint})
        return self.add_val(name, shape, dtype, True, "input")

    def new_param(self, shape, dtype="f32", init=None):
        name = self.fresh("p")
        if init is None:
            init = self.r.choice([
                {"normal": {"std": self.r.choice([0.1, 0.5, 1.0])}},
                {"normal": {"std": 1.0, "mean": 0.5}},
                {"uniform": {"low": -1.0, "high": 1.0}},
                {"uniform": {"low": 0.5, "high": 1.5}},
                "ones", {"constant": self.r.choice([0.5, -2.0, 3.0])}])
        self.params.append({"name": name, "shape": list(shape),
                            "dtype": dtype, "init": init})
        return self.add_val(name, shape, dtype, True, "param")

    def node(self, op, inputs, attrs, shape, dtype, exact=False, outputs=None):
        nid = self.fresh("v")
        ins = []
        for x in inputs:
            if isinstance(x, V):
                x.uses += 1
                ins.append(x.name)
            else:
                ins.append(x)
        nd = {"id": nid, "op": op}
        if ins:
            nd["inputs"] = ins
        if attrs:
            nd["attrs"] = attrs
        self.ops_used.append(op)
        if outputs:  # several results: [(shape, dtype)]
            names = [nid + "." + str(i) for i in range(len(outputs))]
            nd["outputs"] = names
            nd["doc"] = ";".join(shape_doc(d, s) for s, d in outputs)
            self.nodes.append(nd)
            return [self.add_val(n, s, d, exact, "node")
                    for n, (s, d) in zip(names, outputs)]
        nd["doc"] = shape_doc(dtype, shape)
        self.nodes.append(nd)
        return self.add_val(nid, shape, dtype, exact, "node")

    def pick(self, dtypes=FLOATS, pred=None):
        cands = [v for v in self.vals if v.dtype in dtypes
                 and (pred is None or pred(v))]
        if not cands:
            return None
        # Prefer recent values (chains), still reach back (fan-out).
        w = [1.0 + 4.0 * (i >= len(cands) - 3) + (v.uses == 0 and v.kind == "node")
             for i, v in enumerate(cands)]
        return self.r.choices(cands, w)[0]

    def rand_shape(self, rank=None, lo=1, hi=None):
        if rank is None:
            rank = self.r.choice([0, 1, 2, 2, 3, 3, 4, 4] + [5, 6] * self.big)
        if hi is None:
            hi = 40 if self.big else 6
        while True:
            s = [self.r.randint(lo, hi if self.r.random() < 0.5 else 6)
                 for _ in range(rank)]
            if prod(s) <= self.max_elems // 4:
                return s

    def operand(self, shape, dtype="f32", allow_const=True, other=None):
        """A value of exactly this shape and dtype: reused, new or constant."""
        shape = tuple(shape)
        c = self.r.random()
        if c < 0.45:
            cands = [v for v in self.vals if v.shape == shape
                     and v.dtype == dtype and v is not other]
            if cands:
                return self.r.choice(cands)
        if c < 0.7 and dtype in FLOATS:
            return self.new_param(shape, dtype)
        if c < 0.9 or not allow_const or prod(shape) > 64:
            return self.new_input(shape, dtype)
        return self.constant(shape, dtype)

    def constant(self, shape, dtype):
        if dtype == "i1":
            flat = [self.r.random() < 0.5 for _ in range(prod(shape))]
            a = np.array(flat, dtype=object).reshape(shape)
            return self.node("constant", [], {"value": a.tolist() if shape
                                              else flat[0], "dtype": "i1"},
                             shape, dtype, exact=True)
        if self.r.random() < 0.3:
            val = round(self.r.uniform(-2, 2), 3)
            if dtype not in FLOATS:
                val = int(val * 2)
            attrs = {"value": val, "shape": list(shape)}
        else:
            flat = [round(self.r.uniform(-2, 2), 3) for _ in range(prod(shape))]
            if dtype not in FLOATS:
                flat = [int(x * 2) for x in flat]
            a = np.array(flat, dtype=object).reshape(shape)
            attrs = {"value": a.tolist() if shape else flat[0]}
            if self.r.random() < 0.3 and shape:
                attrs = {"value": flat, "shape": list(shape)}
        if dtype != "f32" or self.r.random() < 0.2:
            attrs["dtype"] = dtype
        return self.node("constant", [], attrs, shape, dtype, exact=True)

    def number(self, dtype):
        if dtype in FLOATS:
            return self.r.choice([0.5, -1.5, 2.0, 0.125, 3.0, -0.25, 1e-3])
        return self.r.choice([1, 2, -3, 5, 0])

    def bcast_partner(self, shape):
        """A shape that broadcasts with `shape`; returns (partner, result)."""
        shape = list(shape)
        m = self.r.choice(["same", "same", "drop", "ones", "expand", "scalar"])
        p = list(shape)
        if m == "drop" and shape:
            p = shape[self.r.randint(1, len(shape)):]
        elif m == "ones" and shape:
            p = [1 if self.r.random() < 0.5 else d for d in shape]
            if self.r.random() < 0.5:
                p = p[self.r.randint(0, len(p)):] or p
        elif m == "expand":
            p = [self.r.randint(2, 4) if d == 1 and self.r.random() < 0.7 else d
                 for d in shape]
            if self.r.random() < 0.5 and len(shape) < 4:
                p = [self.r.randint(1, 3)] + p
        elif m == "scalar":
            p = []
        res = list(np.broadcast_shapes(tuple(shape), tuple(p)))
        if prod(res) > self.max_elems:
            return shape, shape
        return p, res

    # -- safe prologues ------------------------------------------------------
    def positive(self, x):
        """A value >= 0.5 elementwise computed from x (well conditioned)."""
        k = self.r.randint(0, 3)
        d, s = x.dtype, x.shape
        if k == 0:
            a = self.node("abs", [x], None, s, d)
            return self.node("add", [a, self.r.choice([0.5, 1.0])], None, s, d)
        if k == 1:
            q = self.node("mul", [x, x], None, s, d)
            return self.node("add", [1.0, q], None, s, d)
        if k == 2:
            e = self.node("exp", [self.node("tanh", [x], None, s, d)], None, s, d)
            return e if self.r.random() < 0.5 else self.node(
                "add", [e, 0.25], None, s, d)
        sg = self.node("sigmoid", [x], None, s, d)
        return self.node("add", [sg, 0.5], None, s, d)

    # -- op families ----------------------------------------------------------
    def g_unary(self):
        x = self.pick()
        op = self.r.choice(["neg", "abs", "tanh", "sigmoid", "relu", "erf",
                            "gelu", "sin", "cos", "stop_gradient"])
        attrs = None
        if op == "gelu" and self.r.random() < 0.6:
            attrs = {"approximate": self.r.choice(["none", "tanh"])}
        exact = x.exact and op in ("neg", "abs", "relu", "stop_gradient")
        return self.node(op, [x], attrs, x.shape, x.dtype, exact)

    def g_exp(self):
        x = self.pick()
        k = self.r.randint(0, 2)
        if k == 0:
            y = self.node("tanh", [x], None, x.shape, x.dtype)
        elif k == 1:
            y = self.node("neg", [self.node("abs", [x], None, x.shape, x.dtype)],
                          None, x.shape, x.dtype)
        else:
            y = self.node("min", [x, 2.0], None, x.shape, x.dtype)
        return self.node("exp", [y], None, x.shape, x.dtype)

    def g_log(self):
        x = self.pick()
        return self.node("log", [self.positive(x)], None, x.shape, x.dtype)

    def g_sqrt(self):
        x = self.pick()
        op = self.r.choice(["sqrt", "rsqrt"])
        return self.node(op, [self.positive(x)], None, x.shape, x.dtype)

    def g_pow(self):
        x = self.pick()
        base = self.positive(x)
        if self.r.random() < 0.5:
            e = self.r.choice([2.0, 0.5, 3.0, -1.0, 1.5, 0.0])
            return self.node("pow", [base, e], None, x.shape, x.dtype)
        p, res = self.bcast_partner(x.shape)
        y = self.operand(p, x.dtype, other=x)
        e = self.node("tanh", [y], None, y.shape, y.dtype)
        ins = [base, e]
        return self.node("pow", ins, None, res, x.dtype)

    def g_binary(self):
        x = self.pick()
        op = self.r.choice(["add", "sub", "mul", "max", "min", "div"])
        if self.r.random() < 0.2:
            num = self.number(x.dtype)
            if op == "div":
                if num == 0:
                    num = 2.0
                ins = [x, num]
            else:
                ins = [x, num] if self.r.random() < 0.5 else [num, x]
            exact = x.exact and op in ("max", "min")
            return self.node(op, ins, None, x.shape, x.dtype, exact)
        p, res = self.bcast_partner(x.shape)
        y = self.operand(p, x.dtype, other=x)
        if self.r.random() < 0.05:
            y, res = x, list(x.shape)  # the same value on both sides
        if op == "div":
            y = self.positive(y)
            if self.r.random() < 0.3:
                y = self.node("neg", [y], None, y.shape, y.dtype)
        ins = [x, y] if self.r.random() < 0.6 else [y, x]
        if op == "div" and ins[1] is x:
            ins = [y, self.positive(x)]
        exact = x.exact and y.exact and op in ("max", "min")
        return self.node(op, ins, None, res, x.dtype, exact)

    def g_select(self):
        a = self.pick()
        pred = self.r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        if self.r.random() < 0.3:
            b, res = self.number(a.dtype), list(a.shape)
        else:
            p, res = self.bcast_partner(a.shape)
            b = self.operand(p, a.dtype, other=a)
        if pred in ("eq", "ne") and not isinstance(b, V):
            a = self.node("relu", [a], None, a.shape, a.dtype, a.exact)
            b = 0.0
        ins = [a, b] if self.r.random() < 0.7 or not isinstance(b, V) else [b, a]
        c = self.node("compare", ins, {"predicate": pred}, res, "i1",
                      a.exact and (not isinstance(b, V) or b.exact))
        if self.r.random() < 0.15:
            return c  # a boolean result (maybe an output)
        t = self.pick(dtypes=ALL if self.r.random() < 0.3 else FLOATS,
                      pred=lambda v: self.bshape(v.shape, res) is not None)
        if t is None or self.r.random() < 0.3:
            t = self.operand(res, "f32")
        f = self.number(t.dtype) if self.r.random() < 0.25 and \
            t.dtype != "i1" else \
            self.operand(self.bcast_partner(t.shape)[0], t.dtype, other=t)
        if isinstance(f, V) and self.bshape(f.shape, t.shape) is None:
            f = self.operand(t.shape, t.dtype)
        out = self.bshape(res, t.shape)
        if isinstance(f, V) and out is not None:
            out = self.bshape(out, f.shape)
        if out is None:
            raise Unsupported
        ins = [c, t, f] if self.r.random() < 0.7 else [c, f, t]
        exact = c.exact and t.exact and (not isinstance(f, V) or f.exact)
        return self.node("select", ins, None, out, t.dtype, exact)

    def bshape(self, a, b):
        try:
            s = list(np.broadcast_shapes(tuple(a), tuple(b)))
        except ValueError:
            return None
        return s if prod(s) <= self.max_elems else None

    def red_dims(self, rank):
        k = self.r.randint(1, rank)
        dims = self.r.sample(range(rank), k)
        return [d - rank if self.r.random() < 0.3 else d for d in dims]

    def g_reduce(self):
        x = self.pick(pred=lambda v: len(v.shape) >= 1)
        if x is None:
            raise Unsupported
        op = self.r.choice(["reduce_sum", "reduce_mean", "reduce_max",
                            "reduce_min"])
        attrs = {}
        rank = len(x.shape)
        if self.r.random() < 0.15:
            dims = list(range(rank))
        else:
            dims = self.red_dims(rank)
            attrs["dims"] = dims
        keep = self.r.random() < 0.5
        if keep or self.r.random() < 0.3:
            attrs["keep_dims"] = keep
        nd = [d % rank for d in dims]
        shape = [1 if i in nd else s for i, s in enumerate(x.shape)] if keep \
            else [s for i, s in enumerate(x.shape) if i not in nd]
        exact = x.exact and op in ("reduce_max", "reduce_min")
        return self.node(op, [x], attrs or None, shape, x.dtype, exact)

    def factor(self, total, rank):
        primes, n, p = [], total, 2
        while n > 1:
            while n % p == 0:
                primes.append(p)
                n //= p
            p += 1
        dims = [1] * rank
        for q in primes:
            dims[self.r.randrange(rank)] *= q
        return dims

    def g_reshape(self, x=None, rank=None):
        x = x or self.pick(dtypes=ALL)
        total = prod(x.shape)
        rank = rank or self.r.randint(1, 4)
        shape = self.factor(total, rank)
        attr = list(shape)
        if self.r.random() < 0.3 and total > 0:
            attr[self.r.randrange(rank)] = -1
        return self.node("reshape", [x], {"shape": attr}, shape, x.dtype, x.exact)

    def g_transpose(self):
        x = self.pick(dtypes=ALL,
                      pred=lambda v: len(v.shape) >= 2)
        if x is None:
            raise Unsupported
        rank = len(x.shape)
        if self.r.random() < 0.25:
            perm, attrs = list(range(rank))[::-1], None
        else:
            perm = list(range(rank))
            self.r.shuffle(perm)
            attrs = {"perm": [p - rank if self.r.random() < 0.2 else p
                              for p in perm]}
        return self.node("transpose", [x], attrs, [x.shape[p] for p in perm],
                         x.dtype, x.exact)

    def g_slice(self):
        x = self.pick(dtypes=ALL, pred=lambda v: len(v.shape) >= 1)
        if x is None:
            raise Unsupported
        rank = len(x.shape)
        axes = list(range(rank))
        use_axes = self.r.random() < 0.3
        if use_axes:
            axes = sorted(self.r.sample(range(rank), self.r.randint(1, rank)))
        start, limit, stride, shape = [], [], [], list(x.shape)
        for a in axes:
            d = x.shape[a]
            s = self.r.randint(0, d - 1)
            l = self.r.randint(s + 1, d)
            st = self.r.choice([1, 1, 2, 3])
            shape[a] = (l - s + st - 1) // st
            if self.r.random() < 0.25:
                s -= d
            if l < d and self.r.random() < 0.25:
                l -= d
            start.append(s)
            limit.append(l)
            stride.append(st)
        attrs = {"start": start, "limit": limit}
        if any(s != 1 for s in stride) or self.r.random() < 0.3:
            attrs["stride"] = stride
        if use_axes:
            attrs["axes"] = [a - rank if self.r.random() < 0.2 else a
                             for a in axes]
        return self.node("slice", [x], attrs, shape, x.dtype, x.exact)

    def g_concat(self):
        x = self.pick(dtypes=ALL, pred=lambda v: len(v.shape) >= 1)
        if x is None:
            raise Unsupported
        rank = len(x.shape)
        dim = self.r.randrange(rank)
        parts = [x]
        for _ in range(self.r.randint(1, 2)):
            if self.r.random() < 0.2:
                parts.append(x)
                continue
            s = list(x.shape)
            s[dim] = self.r.randint(1, 4)
            parts.append(self.operand(s, x.dtype, other=x))
        self.r.shuffle(parts)
        shape = list(x.shape)
        shape[dim] = sum(p.shape[dim] for p in parts)
        if prod(shape) > self.max_elems:
            raise Unsupported
        d = dim - rank if self.r.random() < 0.3 else dim
        return self.node("concat", parts, {"dim": d}, shape, x.dtype,
                         all(p.exact for p in parts))

    def g_broadcast(self):
        x = self.pick(dtypes=ALL, pred=lambda v: len(v.shape) <= 3)
        if x is None:
            raise Unsupported
        rank = len(x.shape) + self.r.randint(0, 2)
        if rank == 0:
            rank = 1
        explicit = self.r.random() < 0.5
        if explicit:
            dims = sorted(self.r.sample(range(rank), len(x.shape)))
        else:
            dims = list(range(rank - len(x.shape), rank))
        shape = [self.r.randint(1, 3) for _ in range(rank)]
        for i, d in enumerate(dims):
            shape[d] = x.shape[i] if x.shape[i] != 1 or self.r.random() < 0.3 \
                else self.r.randint(2, 4)
        if prod(shape) > self.max_elems:
            raise Unsupported
        attrs = {"shape": shape}
        if explicit:
            attrs["dims"] = dims
        return self.node("broadcast_in_dim", [x], attrs, shape, x.dtype, x.exact)

    def g_gather(self):
        t = self.pick(dtypes=ALL, pred=lambda v: len(v.shape) >= 1)
        if t is None:
            raise Unsupported
        rank = len(t.shape)
        axis = self.r.randrange(rank)
        d = t.shape[axis]
        ishape = self.rand_shape(self.r.choice([0, 1, 1, 2]), 1, 4)
        idt = self.r.choice(["i64", "i64", "i32"])
        if self.r.random() < 0.2:
            flat = [self.r.randrange(-d, d) for _ in range(prod(ishape))]
            a = np.array(flat, dtype=object).reshape(ishape)
            idx = self.node("constant", [], {"value": a.tolist() if ishape else
                                             flat[0], "dtype": idt},
                            ishape, idt, True)
        else:
            idx = self.new_input(ishape, idt, "index:%d:%d" % (-d, d))
        shape = list(t.shape[:axis]) + ishape + list(t.shape[axis + 1:])
        if prod(shape) > self.max_elems:
            raise Unsupported
        attrs = None
        if axis or self.r.random() < 0.3:
            attrs = {"axis": axis - rank if self.r.random() < 0.3 else axis}
        return self.node("gather", [t, idx], attrs, shape, t.dtype, t.exact)

    def g_softmax(self):
        x = self.pick(pred=lambda v: len(v.shape) >= 1)
        if x is None:
            raise Unsupported
        rank = len(x.shape)
        op = self.r.choice(["softmax", "log_softmax"])
        attrs = None
        if self.r.random() < 0.7:
            a = self.r.randrange(rank)
            attrs = {"axis": a - rank if self.r.random() < 0.4 else a}
        return self.node(op, [x], attrs, x.shape, x.dtype)

    def noisy(self, x, nshape):
        """x plus random noise of shape nshape (rows never constant)."""
        n = self.new_param(nshape, x.dtype, {"normal": {"std": 1.0}})
        return self.node("add", [x, n], None, x.shape, x.dtype)

    def g_norm(self):
        x = self.pick(pred=lambda v: len(v.shape) >= 1)
        if x is None:
            raise Unsupported
        rank = len(x.shape)
        axis = self.r.randrange(rank)
        ns = list(x.shape[axis:])
        op = self.r.choice(["layer_norm", "rms_norm"])
        if op == "layer_norm":
            x = self.noisy(x, ns)
        scale = self.operand(ns, x.dtype, allow_const=False)
        ins = [x, scale]
        if op == "layer_norm" and self.r.random() < 0.6:
            ins.append(self.operand(ns, x.dtype))
        attrs = {}
        if axis != rank - 1 or self.r.random() < 0.3:
            attrs["axis"] = axis - rank if self.r.random() < 0.3 else axis
        if self.r.random() < 0.5:
            attrs["epsilon"] = self.r.choice([1e-5, 1e-3, 0.1])
        return self.node(op, ins, attrs or None, x.shape, x.dtype)

    def g_batch_norm(self):
        x = self.pick(pred=lambda v: len(v.shape) >= 2)
        if x is None:
            raise Unsupported
        c = x.shape[1]
        if self.r.random() < 0.5:
            x = self.noisy(x, x.shape)
            m, var = self.node("batch_norm_stats", [x], None, None, None,
                               outputs=[([c], x.dtype), ([c], x.dtype)])
        else:
            m = self.operand([c], x.dtype)
            var = self.new_param([c], x.dtype,
                                 {"uniform": {"low": 0.5, "high": 2.0}})
        scale = self.operand([c], x.dtype)
        bias = self.operand([c], x.dtype)
        attrs = {"epsilon": self.r.choice([1e-5, 1e-3])} \
            if self.r.random() < 0.3 else None
        return self.node("batch_norm", [x, scale, bias, m, var], attrs,
                         x.shape, x.dtype)

    def g_matmul(self):
        x = self.pick(pred=lambda v: len(v.shape) >= 1)
        if x is None:
            raise Unsupported
        if len(x.shape) == 1:
            s = [1, x.shape[0]] if self.r.random() < 0.5 else [x.shape[0], 1]
            x = self.node("reshape", [x], {"shape": s}, s, x.dtype, x.exact)
        ta, tb = self.r.random() < 0.3, self.r.random() < 0.3
        m, k = (x.shape[-1], x.shape[-2]) if ta else (x.shape[-2], x.shape[-1])
        n = self.r.randint(1, 8)
        batch = list(x.shape[:-2])
        rb = [] if (not batch or self.r.random() < 0.4) else batch
        rs = rb + ([n, k] if tb else [k, n])
        y = self.operand(rs, x.dtype)
        attrs = {}
        if ta:
            attrs["transpose_a"] = True
        if tb:
            attrs["transpose_b"] = True
        if self.r.random() < 0.1:
            attrs["transpose_a"] = ta
        shape = batch + [m, n]
        if prod(shape) > self.max_elems:
            raise Unsupported
        return self.node("matmul", [x, y], attrs or None, shape, x.dtype)

    def as_nchw(self, x):
        if len(x.shape) == 4 and prod(x.shape) <= self.max_elems // 2 and \
                self.r.random() < 0.8:
            return x
        if self.r.random() < 0.5 and prod(x.shape) >= 4:
            return self.g_reshape(x, 4)
        hw = 20 if self.big else 8
        return self.new_input([self.r.randint(1, 2), self.r.randint(1, 4),
                               self.r.randint(3, hw), self.r.randint(3, hw)],
                              x.dtype)

    def window(self, size, max_k, dil_ok, nopad=False):
        for _ in range(20):
            k = self.r.randint(1, max_k)
            dl = self.r.choice([1, 1, 2]) if dil_ok else 1
            st = self.r.choice([1, 1, 2, 3])
            lo, hi = self.r.randint(0, 2), self.r.randint(0, 2)
            if nopad:
                lo = hi = 0
            if not dil_ok:  # pools: padding smaller than the kernel
                lo, hi = min(lo, k - 1), min(hi, k - 1)
            span = dl * (k - 1) + 1
            if size + lo + hi >= span:
                return k, dl, st, lo, hi, (size + lo + hi - span) // st + 1
        raise Unsupported

    def g_conv(self):
        x = self.as_nchw(self.pick())
        n, c, h, w = x.shape
        nopad = self.specials and "specials-conv-padding" in self.skip
        kh, dh, sh, pt, pb, oh = self.window(h, 3, True, nopad)
        kw, dw, sw, pl, pr, ow = self.window(w, 3, True, nopad)
        divs = [g for g in range(1, c + 1) if c % g == 0]
        g = self.r.choice(divs)
        o = g * self.r.randint(1, 3)
        f = self.operand([o, c // g, kh, kw], x.dtype)
        ins = [x, f]
        if self.r.random() < 0.4:
            ins.append(self.operand([o], x.dtype))
        attrs = {}
        if (sh, sw) != (1, 1) or self.r.random() < 0.2:
            attrs["strides"] = [sh, sw]
        if (pt, pl, pb, pr) != (0, 0, 0, 0):
            attrs["padding"] = [pt, pl] if (pt, pl) == (pb, pr) and \
                self.r.random() < 0.5 else [pt, pl, pb, pr]
        if (dh, dw) != (1, 1):
            attrs["dilations"] = [dh, dw]
        if g != 1 or self.r.random() < 0.2:
            attrs["groups"] = g
        shape = [n, o, oh, ow]
        if prod(shape) > self.max_elems:
            raise Unsupported
        return self.node("conv2d", ins, attrs or None, shape, x.dtype)

    def g_pool(self):
        x = self.as_nchw(self.pick())
        n, c, h, w = x.shape
        op = self.r.choice(["max_pool2d", "avg_pool2d"])
        kh, _, sh, pt, pb, oh = self.window(h, 3, False)
        kw, _, sw, pl, pr, ow = self.window(w, 3, False)
        attrs = {"kernel": [kh, kw]}
        if (sh, sw) != (kh, kw) or self.r.random() < 0.3:
            attrs["strides"] = [sh, sw]
        else:
            sh, sw = kh, kw
            oh = (h + pt + pb - kh) // sh + 1
            ow = (w + pl + pr - kw) // sw + 1
        if (pt, pl, pb, pr) != (0, 0, 0, 0):
            attrs["padding"] = [pt, pl, pb, pr]
        if op == "avg_pool2d" and self.r.random() < 0.5:
            attrs["count_include_pad"] = self.r.random() < 0.5
        return self.node(op, [x], attrs, [n, c, oh, ow], x.dtype,
                         x.exact and op == "max_pool2d")

    def g_loss(self):
        if self.r.random() < 0.5:
            x = self.pick()
            y = self.operand(x.shape, x.dtype, other=x)
            red = self.r.choice(["mean", "sum", "none", None])
            attrs = {"reduction": red} if red else None
            shape = list(x.shape) if red == "none" else []
            return self.node("mse", [x, y], attrs, shape, x.dtype)
        x = self.pick(pred=lambda v: len(v.shape) >= 2)
        if x is None:
            raise Unsupported
        ign = self.r.random() < 0.3
        c = x.shape[1]
        lshape = [x.shape[0]] + list(x.shape[2:])
        lab = self.new_input(lshape, self.r.choice(["i64", "i32"]),
                             "labels:%d:%d" % (c, 1 if ign else 0))
        red = self.r.choice(["mean", "sum", "none", None])
        attrs = {}
        if red:
            attrs["reduction"] = red
        if ign:
            attrs["ignore_index"] = -1
        return self.node("cross_entropy", [x, lab], attrs or None,
                         lshape if red == "none" else [], x.dtype)

    def g_cast(self):
        k = self.r.randint(0, 4)
        if k == 0:  # exact float -> int -> (int ops) -> float
            x = self.pick(dtypes=("f32",), pred=lambda v: v.exact)
            if x is None:
                raise Unsupported
            # NaN and inf have no integer value (the dialect leaves it
            # undefined): with --specials only the cast to i1 (x != 0).
            to = "i1" if self.specials else self.r.choice(["i64", "i32", "i1"])
            y = self.node("cast", [x], {"to": to}, x.shape, to, True)
            if to == "i1":
                return y
            if self.r.random() < 0.5:
                return y
            return self.node("cast", [y], {"to": "f32"}, x.shape, "f32", True)
        if k == 1:  # bool -> number
            c = self.pick(dtypes=("i1",))
            if c is None:
                raise Unsupported
            to = self.r.choice(["f32", "i64", "i32", "f64"])
            return self.node("cast", [c], {"to": to}, c.shape, to, c.exact)
        if k == 2:  # f32 <-> f64
            x = self.pick()
            to = "f64" if x.dtype == "f32" else "f32"
            return self.node("cast", [x], {"to": to}, x.shape, to, x.exact)
        if k == 3:  # f16/bf16 round trip of bit-exact values
            x = self.pick(dtypes=("f32",), pred=lambda v: v.exact)
            if x is None:
                raise Unsupported
            h = self.r.choice(["f16", "bf16"])
            y = self.node("cast", [x], {"to": h}, x.shape, h, True)
            return self.node("cast", [y], {"to": "f32"}, x.shape, "f32", True)
        x = self.pick(dtypes=("i64", "i32"))  # int -> float, or -> bool
        if x is None:
            raise Unsupported
        to = self.r.choice(["f32", "f64", "i1"])
        return self.node("cast", [x], {"to": to}, x.shape, to, x.exact)

    def g_int(self):
        x = self.pick(dtypes=("i64", "i32"))
        if x is None or self.r.random() < 0.3:
            dt = self.r.choice(["i64", "i32"])
            src = self.pick(dtypes=("f32",), pred=lambda v: v.exact)
            if src is not None and self.r.random() < 0.5 and not self.specials:
                x = self.node("cast", [src], {"to": dt}, src.shape, dt, True)
            else:
                x = self.new_input(self.rand_shape(), dt,
                                   "int:%d:%d" % self.r.choice(
                                       [(-3, 4), (-100, 100), (0, 10)]))
        k = self.r.randint(0, 4)
        if k == 0:
            op = self.r.choice(["neg", "abs"])
            return self.node(op, [x], None, x.shape, x.dtype, x.exact)
        if k == 1:
            op = self.r.choice(["add", "sub", "mul", "max", "min"])
            if self.r.random() < 0.4:
                return self.node(op, [x, self.number(x.dtype)], None, x.shape,
                                 x.dtype, x.exact)
            p, res = self.bcast_partner(x.shape)
            y = self.operand(p, x.dtype, other=x)
            return self.node(op, [x, y], None, res, x.dtype, x.exact and y.exact)
        if k == 2:
            return self.node("div", [x, self.r.choice([2, 3, -2, 7])], None,
                             x.shape, x.dtype, x.exact)
        if k == 3 and x.shape:
            op = self.r.choice(["reduce_sum", "reduce_max", "reduce_min",
                                "reduce_mean"])
            rank = len(x.shape)
            dims = self.red_dims(rank)
            nd = [d % rank for d in dims]
            shape = [s for i, s in enumerate(x.shape) if i not in nd]
            return self.node(op, [x], {"dims": dims}, shape, x.dtype, x.exact)
        pred = self.r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        return self.node("compare", [x, self.number(x.dtype)],
                         {"predicate": pred}, x.shape, "i1", x.exact)

    FAMILIES = [
        ("unary", 6), ("exp", 2), ("log", 2), ("sqrt", 2), ("pow", 1),
        ("binary", 8), ("select", 3), ("reduce", 4), ("reshape", 2),
        ("transpose", 2), ("slice", 3), ("concat", 2), ("broadcast", 1),
        ("gather", 2), ("softmax", 2), ("norm", 2), ("batch_norm", 1),
        ("matmul", 3), ("conv", 2), ("pool", 2), ("loss", 1), ("cast", 3),
        ("int", 4),
    ]

    def build(self):
        r = self.r
        for _ in range(r.randint(1, 3)):
            self.new_input(self.rand_shape(), "f32")
        for _ in range(r.randint(0, 2)):
            self.new_param(self.rand_shape(), "f32")
        fams = [(f, w) for f, w in self.FAMILIES if f not in self.skip]
        names = [f for f, _ in fams]
        weights = [w for _, w in fams]
        nops = r.randint(max(1, self.max_ops // 3), self.max_ops)
        tries = 0
        while len(self.nodes) < nops and tries < 10 * nops:
            tries += 1
            fam = r.choices(names, weights)[0]
            mark = (len(self.nodes), len(self.inputs), len(self.params),
                    len(self.vals), list(self.ops_used), self.n)
            uses = [v.uses for v in self.vals]
            try:
                getattr(self, "g_" + fam)()
            except Unsupported:
                # Roll back whatever the family added before giving up.
                del self.nodes[mark[0]:]
                del self.inputs[mark[1]:]
                del self.params[mark[2]:]
                for v in self.vals[mark[3]:]:
                    del self.by_name[v.name]
                del self.vals[mark[3]:]
                self.ops_used = mark[4]
                for v, u in zip(self.vals, uses):
                    v.uses = u
        sinks = [v for v in self.vals if v.kind == "node" and v.uses == 0]
        r.shuffle(sinks)
        outs = sinks[:6]
        for v in self.vals:
            if v.kind == "node" and v not in outs and r.random() < 0.05:
                outs.append(v)
        if self.all_outputs:
            outs = [v for v in self.vals if v.kind == "node"]
        if r.random() < 0.04:  # an argument or a constant as an output
            outs.append(self.constant(self.rand_shape(), "f32")
                        if r.random() < 0.3 else r.choice(self.vals))
        if r.random() < 0.04 and self.inputs:  # a view of an input
            x = self.by_name[r.choice(self.inputs)["name"]]
            outs.append(self.g_reshape(x))
        outs = list(dict.fromkeys(outs))
        if not outs:
            v = r.choice(self.vals)
            if v not in outs:
                outs.append(v)
        order = {v.name: i for i, v in enumerate(self.vals)}
        outs.sort(key=lambda v: order[v.name])
        nodes = list(self.nodes)
        if r.random() < 0.2:
            r.shuffle(nodes)  # the importer sorts them topologically
        g = {"format": "loom-graph", "version": 1, "name": "random%d" % self.seed,
             "seed": r.randrange(1 << 32), "inputs": self.inputs,
             "parameters": self.params, "nodes": nodes,
             "outputs": [v.name for v in outs]}
        return g


def generate(seed, max_ops, skip, all_outputs=False, specials=False):
    return Gen(seed, max_ops, skip, all_outputs, specials).build()


# -- running ------------------------------------------------------------------

def make_inputs(graph, seed):
    """Random values for every graph input, from the hint in its doc."""
    rng = np.random.default_rng(seed)
    out = {}
    for inp in graph.get("inputs", []):
        shape, dt = inp["shape"], NP[inp["dtype"]]
        hint = inp.get("doc", "rg:normal:1")[3:].split(":")
        if hint[0] == "normal":
            a = rng.standard_normal(shape) * float(hint[1])
            if hint[2:] == ["special"]:
                m = rng.random(shape) < 0.1
                sp = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], shape)
                a = np.where(m, sp, a)
        elif hint[0] == "fill":  # every element this value (inf, nan, 2.5)
            a = np.full(shape, float(hint[1]))
        elif hint[0] == "bool":
            a = rng.random(shape) < 0.5
        elif hint[0] in ("int", "index"):
            a = rng.integers(int(hint[1]), int(hint[2]), shape)
        elif hint[0] == "labels":
            a = rng.integers(0, int(hint[1]), shape)
            if int(hint[2]) and a.size > 1:
                m = rng.random(shape) < 0.3
                m.flat[0] = False   # at least one label counts
                a = np.where(m, -1, a)
        else:
            raise ValueError("bad input hint %r" % inp.get("doc"))
        out[inp["name"]] = np.asarray(a).astype(dt)
    return out


# loomc flags of the compiled side (main sets them from --target).
TARGET_FLAGS = ["--target=cpu"]


class Tools:
    def __init__(self, loomc, loom_run, loom_interp, timeout):
        self.loomc, self.loom_run, self.loom_interp = loomc, loom_run, loom_interp
        self.timeout = timeout
        self.bindir = os.path.dirname(os.path.abspath(
            shutil.which(loomc) or loomc))

    def run(self, cmd):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return 124, "timed out after %ds" % self.timeout
        return r.returncode, (r.stdout or "") + (r.stderr or "")


def first_error(log):
    lines = [l for l in log.splitlines() if l.strip()]
    for l in lines:
        if "error" in l.lower() or "assert" in l.lower():
            return l.strip()
    return lines[-1].strip() if lines else "(no output)"


def signature(cat, msg):
    """A failure's kind, without names and numbers (for minimizing)."""
    if cat == "mismatch":
        return cat
    s = re.sub(r"'[^']*'", "'_'", msg)
    s = re.sub(r"tensor<[^>]*>", "tensor<_>", s)
    s = re.sub(r"\[[^\]]*\]", "[_]", s)
    s = re.sub(r"[0-9.e+-]+", "N", s)
    s = re.sub(r"^.*?: (error|note): ", "", s)
    return cat + ": " + s[:160]


def compare(got, want):
    """None when they agree, else a reason."""
    if got.shape != want.shape:
        return "shape %s vs %s" % (list(got.shape), list(want.shape))
    if got.dtype != want.dtype:
        return "dtype %s vs %s" % (got.dtype, want.dtype)
    if want.dtype.kind in "biu":
        if not np.array_equal(got, want):
            bad = int((got != want).sum())
            return "%d of %d elements differ" % (bad, want.size)
        return None
    g, w = got.astype(np.float64), want.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    if not np.array_equal(gn, wn):
        return "NaN in %d vs %d elements" % (int(gn.sum()), int(wn.sum()))
    gi, wi = np.isinf(g), np.isinf(w)
    if not np.array_equal(g[gi], w[wi]) or not np.array_equal(gi, wi):
        return "inf in %d vs %d elements" % (int(gi.sum()), int(wi.sum()))
    ok = ~(gn | gi)
    if not ok.any():
        return None
    scale = max(np.abs(w[ok]).max(), 1e-6)
    err = np.abs(g[ok] - w[ok]).max() / scale
    if not err <= TOL:
        return "rel err %.3g > %g" % (err, TOL)
    return None


def check(tools, graph, inputs, d):
    """Runs one graph in directory d. Returns (category, message) or None."""
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    gpath = os.path.join(d, "graph.json")
    with open(gpath, "w") as f:
        json.dump(graph, f, indent=1)
    feed = []
    for k, v in inputs.items():
        p = os.path.join(d, "in." + k + ".npy")
        np.save(p, v)
        feed += ["--input", "%s=%s" % (k, p)]
    ir, art = os.path.join(d, "ir.mlir"), os.path.join(d, "art.loom")
    oc, oi = os.path.join(d, "compiled"), os.path.join(d, "interp")
    log = []
    steps = [("import", [tools.loomc, gpath, "-o", ir]),
             ("compile", [tools.loomc, gpath, "-o", art] + TARGET_FLAGS),
             ("interp", [tools.loom_interp, ir, "--entry=forward",
                         "--output-dir", oi] + feed),
             ("run", [tools.loom_run, art, "--entry=forward",
                      "--output-dir", oc] + feed)]
    for cat, cmd in steps:
        rc, out = tools.run(cmd)
        log.append("$ " + " ".join(cmd) + "\n" + out)
        if rc != 0:
            msg = first_error(out)
            if rc < 0:
                msg = "killed by signal %d: %s" % (-rc, msg)
            with open(os.path.join(d, "log.txt"), "w") as f:
                f.write("\n".join(log))
            return cat, msg
    bad = []
    types = value_types(graph)
    for name in graph["outputs"]:
        w = os.path.join(oi, name + ".npy")
        if name in types and os.path.exists(w):
            a = np.load(w)
            dt, shape = types[name]
            if tuple(a.shape) != shape or (dt in NP and a.dtype != NP[dt]):
                # The generator's own bookkeeping is wrong, not the compiler.
                return "generator", "%s: generator expected %s%s, got %s%s" % (
                    name, dt, list(shape), a.dtype, list(a.shape))
    for name in graph["outputs"]:
        w, g = os.path.join(oi, name + ".npy"), os.path.join(oc, name + ".npy")
        if not os.path.exists(w):
            bad.append("%s: the interpreter wrote no output" % name)
            continue
        if not os.path.exists(g):
            bad.append("%s: loom-run wrote no output" % name)
            continue
        why = compare(np.load(g), np.load(w))
        if why:
            bad.append("%s: %s" % (name, why))
    with open(os.path.join(d, "log.txt"), "w") as f:
        f.write("\n".join(log + bad))
    if bad:
        return "mismatch", "; ".join(bad)
    return None


def save_failure(keep, tag, d, graph, inputs, cat, msg, bindir="build/bin"):
    dst = os.path.join(keep, tag)
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    with open(os.path.join(dst, "graph.json"), "w") as f:
        json.dump(graph, f, indent=1)
    for k, v in inputs.items():
        np.save(os.path.join(dst, "in." + k + ".npy"), v)
    if os.path.exists(os.path.join(d, "log.txt")):
        shutil.copy(os.path.join(d, "log.txt"), os.path.join(dst, "log.txt"))
    with open(os.path.join(dst, "failure.txt"), "w") as f:
        f.write("%s: %s\n" % (cat, msg))
    feed = " ".join("--input %s=in.%s.npy" % (k, k) for k in inputs)
    with open(os.path.join(dst, "repro.sh"), "w") as f:
        f.write("#!/bin/sh\n# %s: %s\nset -e\ncd \"$(dirname \"$0\")\"\n"
                "B=${LOOM_BIN:-%s}\n"
                "$B/loomc graph.json -o ir.mlir\n"
                "$B/loomc graph.json --target=cpu -o art.loom\n"
                "$B/loom-interp ir.mlir --entry=forward --output-dir interp %s\n"
                "$B/loom-run art.loom --entry=forward --output-dir compiled %s\n"
                % (cat, msg[:300], bindir, feed, feed))
    return dst


def load_failure(src):
    """A saved failure directory, or a graph file (inputs from its hints)."""
    if os.path.isfile(src):
        graph = json.load(open(src))
        return graph, make_inputs(graph, 0)
    graph = json.load(open(os.path.join(src, "graph.json")))
    inputs = {}
    for inp in graph.get("inputs", []):
        p = os.path.join(src, "in." + inp["name"] + ".npy")
        inputs[inp["name"]] = np.load(p) if os.path.exists(p) else None
    if any(v is None for v in inputs.values()):
        inputs = make_inputs(graph, 0)
    return graph, inputs


# -- minimizing ------------------------------------------------------------------

def value_types(graph):
    t = {}
    for i in graph.get("inputs", []):
        t[i["name"]] = (i["dtype"], tuple(i["shape"]))
    for p in graph.get("parameters", []):
        t[p["name"]] = (p["dtype"], tuple(p["shape"]))
    for n in graph["nodes"]:
        outs = n.get("outputs", [n["id"]])
        docs = n.get("doc", "").split(";")
        for o, dd in zip(outs, docs):
            if dd:
                t[o] = parse_shape_doc(dd)
    return t


def prune(graph):
    """Drops nodes, inputs and parameters no output depends on."""
    g = json.loads(json.dumps(graph))
    prod_of = {}
    for n in g["nodes"]:
        for o in n.get("outputs", [n["id"]]):
            prod_of[o] = n
    live, stack = set(), list(g["outputs"])
    while stack:
        v = stack.pop()
        if v in live:
            continue
        live.add(v)
        n = prod_of.get(v)
        if n is not None:
            for o in n.get("outputs", [n["id"]]):
                live.add(o)
            stack += [x for x in n.get("inputs", []) if isinstance(x, str)]
    g["nodes"] = [n for n in g["nodes"]
                  if any(o in live for o in n.get("outputs", [n["id"]]))]
    g["inputs"] = [i for i in g.get("inputs", []) if i["name"] in live]
    g["parameters"] = [p for p in g.get("parameters", []) if p["name"] in live]
    return g


def replace_uses(g, old, new):
    for n in g["nodes"]:
        if "inputs" in n:
            n["inputs"] = [new if x == old else x for x in n["inputs"]]
    g["outputs"] = [new if x == old else x for x in g["outputs"]]
    # A value listed twice as an output is left to the importer to judge.


def candidates(graph):
    """Smaller graphs to try, most promising first."""
    types = value_types(graph)
    outs = graph["outputs"]
    if len(outs) > 1:
        for o in outs:
            g = json.loads(json.dumps(graph))
            g["outputs"] = [o]
            yield "keep output " + o, prune(g)
    nodes = graph["nodes"]
    users = {}
    for n in nodes:
        for x in n.get("inputs", []):
            if isinstance(x, str):
                users.setdefault(x, []).append(n)
    for n in reversed(nodes):
        outs_n = n.get("outputs", [n["id"]])
        if len(outs_n) != 1:
            continue
        o = outs_n[0]
        if o not in types:
            continue
        # Bypass: use one of the node's operands instead of its result.
        for x in n.get("inputs", []):
            if isinstance(x, str) and types.get(x) == types[o]:
                g = json.loads(json.dumps(graph))
                g["nodes"] = [m for m in g["nodes"] if m["id"] != n["id"]]
                replace_uses(g, o, x)
                yield "bypass %s" % n["id"], prune(g)
        # Cut: the node's result becomes a fresh input (upstream goes away).
        dt, shape = types[o]
        if n["op"] == "constant":
            continue
        hint = {"i1": "bool", "f32": "normal:1", "f64": "normal:1"}.get(dt)
        if hint is None:
            uses = users.get(o, [])
            if any(u["op"] in ("gather", "cross_entropy") for u in uses):
                continue
            hint = "int:-3:4"
        g = json.loads(json.dumps(graph))
        g["nodes"] = [m for m in g["nodes"] if m["id"] != n["id"]]
        g.setdefault("inputs", []).append(
            {"name": o, "shape": list(shape), "dtype": dt, "doc": "rg:" + hint})
        yield "cut %s" % n["id"], prune(g)
    # Parameters into inputs (simpler initializers), one at a time.
    for p in graph.get("parameters", []):
        g = json.loads(json.dumps(graph))
        g["parameters"] = [q for q in g["parameters"] if q["name"] != p["name"]]
        g.setdefault("inputs", []).append(
            {"name": p["name"], "shape": p["shape"], "dtype": p["dtype"],
             "doc": "rg:normal:1"})
        yield "param %s to input" % p["name"], g


def fix_inputs(graph, old_inputs, seed):
    """Inputs for a candidate: the old values where the input is unchanged."""
    fresh = make_inputs(graph, seed)
    out = {}
    for inp in graph.get("inputs", []):
        k = inp["name"]
        o = old_inputs.get(k)
        if o is not None and list(o.shape) == inp["shape"]:
            out[k] = o
        else:
            out[k] = fresh[k]
    return out


def minimize(tools, graph, inputs, sig, work, budget_s, log=print):
    """Greedy reduction keeping the failure's signature."""
    t0 = time.time()
    graph = prune(graph)
    inputs = fix_inputs(graph, inputs, 0)
    trials = 0
    last = None
    progress = True
    while progress and time.time() - t0 < budget_s:
        progress = False
        for what, cand in candidates(graph):
            if time.time() - t0 > budget_s:
                break
            trials += 1
            ci = fix_inputs(cand, inputs, trials)
            res = check(tools, cand, ci, os.path.join(work, "min"))
            if res and signature(*res) == sig:
                log("  minimize: %s -> %d nodes" % (what, len(cand["nodes"])))
                graph, inputs, last = cand, ci, res
                progress = True
                break
    return graph, inputs, trials, last


# -- main -------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    bindir = os.path.join(here, "..", "..", "build", "bin")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0, help="seed of the first graph")
    p.add_argument("--count", type=int, default=10, help="how many graphs")
    p.add_argument("--max-ops", type=int, default=12,
                   help="most generator steps per graph (a step may add "
                        "a few nodes)")
    p.add_argument("--work", default=None, help="scratch directory")
    p.add_argument("--keep-failures", default=None,
                   help="where to save failing graphs and their inputs")
    p.add_argument("--minimize", action="store_true",
                   help="shrink each failure (saved under DIR/min)")
    p.add_argument("--minimize-budget", type=float, default=300,
                   help="seconds per failure for --minimize")
    p.add_argument("--include-known-bugs", action="store_true",
                   help="also generate what KNOWN_BUGS excludes")
    p.add_argument("--skip", default="",
                   help="comma-separated op families not to generate")
    p.add_argument("--all-outputs", action="store_true",
                   help="make every node result an output (checks more "
                        "values, and the generator's shape bookkeeping)")
    p.add_argument("--specials", action="store_true",
                   help="float inputs hold some NaN, +-inf and -0.0 (checks "
                        "that both sides agree on IEEE special values)")
    p.add_argument("--replay", default=None,
                   help="rerun a saved failure directory (or a graph .json "
                        "whose inputs carry generator hints)")
    p.add_argument("--print-graph", action="store_true",
                   help="print the graph of --seed and exit")
    p.add_argument("--loomc", default=os.path.join(bindir, "loomc"))
    p.add_argument("--loom-run", default=os.path.join(bindir, "loom-run"))
    p.add_argument("--loom-interp", default=os.path.join(bindir, "loom-interp"))
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--target", default="cpu",
                   help="loomc --target of the compiled side (cpu, "
                        "cuda:sm_90 with a GPU or, with --loomc loomc-emu, "
                        "--target-flags --cuda-emulator-lib=LIB and the "
                        "fake CUDA driver)")
    p.add_argument("--target-flags", default="",
                   help="more loomc flags for the compiled side")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()

    TARGET_FLAGS[:] = ["--target=" + args.target] + args.target_flags.split()
    tools = Tools(args.loomc, args.loom_run, args.loom_interp, args.timeout)
    skip = [s for s in args.skip.split(",") if s]
    if not args.include_known_bugs:
        skip += list(KNOWN_BUGS)
    work = args.work or os.path.join("/tmp", "loom-random-graphs-%d" % os.getpid())
    os.makedirs(work, exist_ok=True)
    me = os.path.relpath(os.path.abspath(__file__))

    if args.print_graph:
        print(json.dumps(generate(args.seed, args.max_ops, skip), indent=1))
        return 0

    if args.replay:
        graph, inputs = load_failure(args.replay)
        res = check(tools, graph, inputs, os.path.join(work, "replay"))
        if res is None:
            print("replay %s: all %d outputs match" % (args.replay,
                                                        len(graph["outputs"])))
            return 0
        print("replay %s: %s: %s" % (args.replay, res[0], res[1]))
        if args.minimize:
            g, i, n, last = minimize(tools, graph, inputs, signature(*res),
                                     work, args.minimize_budget)
            dst = save_failure(args.replay if os.path.isdir(args.replay)
                               else work, "min", os.path.join(work, "min"),
                               g, i, *(last or res), bindir=tools.bindir)
            print("minimized to %d nodes in %d trials: %s" % (
                len(g["nodes"]), n, dst))
        return 1

    counts = {}
    failures = []
    t0 = time.time()
    for i in range(args.count):
        seed = args.seed + i
        graph = generate(seed, args.max_ops, skip, args.all_outputs,
                         args.specials)
        inputs = make_inputs(graph, seed)
        d = os.path.join(work, "g%d" % seed)
        res = check(tools, graph, inputs, d)
        if res is None:
            counts["match"] = counts.get("match", 0) + 1
            if args.verbose:
                print("seed %d: %d nodes, %d outputs: match" % (
                    seed, len(graph["nodes"]), len(graph["outputs"])))
            shutil.rmtree(d, ignore_errors=True)
            continue
        cat, msg = res
        counts[cat] = counts.get(cat, 0) + 1
        failures.append((seed, cat, msg))
        line = "FAIL seed %d (%d nodes): %s: %s" % (seed, len(graph["nodes"]),
                                                      cat, msg[:400])
        if args.keep_failures:
            dst = save_failure(args.keep_failures, "seed%d-%s" % (seed, cat),
                               d, graph, inputs, cat, msg, bindir=tools.bindir)
            line += "\n  reproduce: %s %s --replay %s" % (
                "python3", me, dst)
            if args.minimize:
                g, inp, n, last = minimize(tools, graph, inputs,
                                           signature(cat, msg), work,
                                           args.minimize_budget)
                m = save_failure(dst, "min", os.path.join(work, "min"), g, inp,
                                 *(last or (cat, msg)), bindir=tools.bindir)
                line += "\n  minimized to %d nodes (%d trials): %s" % (
                    len(g["nodes"]), n, m)
        else:
            line += "\n  reproduce: python3 %s --seed %d --count 1 --max-ops %d" \
                " --keep-failures DIR" % (me, seed, args.max_ops)
        print(line, flush=True)
    n = args.count
    parts = ["%d %s" % (c, k) for k, c in sorted(counts.items())
             if k != "match"]
    print("%d graphs, %d match%s (%.0f s)" % (
        n, counts.get("match", 0), (", " + ", ".join(parts)) if parts else "",
        time.time() - t0))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if counts.get("match", 0) == n else 1


if __name__ == "__main__":
    sys.exit(main())
