#!/usr/bin/env python3
"""ScatterElements as PyTorch's exporter writes it, against PyTorch in f64.

    scatter_vs_torch.py export OUTDIR    writes OUTDIR/scatter.onnx and the
                                         inputs (inp, cls, idx, labels .npy)
    scatter_vs_torch.py check OUTDIR FB  compares Loom's @forward_backward
                                         results in FB (loss and the
                                         gradients) with PyTorch's

The model (random weights, distinct) uses, on a linear layer's output x
[4, 6]:
  - `zeros_like(x).scatter(1, cls, 1.0)`: a one-hot from run-time labels
    (reduction none, run-time indices);
  - `x.scatter(1, cls, u[:, :1])`: updates from a parameter;
  - `x.scatter_add(1, idx, u)`: run-time indices with repeats (summed);
  - `x.scatter_reduce(1, cidx, v, "amax")` and `"prod"` with a constant
    index buffer that repeats positions (compile-time indices, combined in
    order with the data, as include_self=True does);
  - `x.index_put((rows,), w, accumulate=True)` with run-time rows that
    repeat (ScatterND, reduction add), `x.index_put((pr, pc), w[0, :3])`
    with distinct run-time (row, column) pairs, one negative (ScatterND,
    reduction none), and `x[pr, pc]` (a gather of those pairs).
The loss is the mean squared error against `labels`; the check compares the
loss and every parameter's gradient (norm-wise relative, 1e-6).
"""
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")


class Scatters(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 6)
        self.u = torch.nn.Parameter(torch.randn(4, 3))
        self.v = torch.nn.Parameter(torch.randn(4, 2))
        self.w = torch.nn.Parameter(torch.randn(5, 6))
        self.register_buffer(
            "cidx", torch.tensor([[0, 2], [1, 1], [5, 0], [3, 3]]))

    def forward(self, inp, cls, idx, rows, pr, pc):
        x = self.lin(inp)
        # Run-time row and (row, column) indices: ScatterND add (repeated
        # rows summed) and none (distinct pairs), GatherND.
        e = x.index_put((rows,), self.w, accumulate=True)
        f = x.index_put((pr, pc), self.w[0, :3]) + x[pr, pc].mean()
        onehot = torch.zeros_like(x).scatter(1, cls, 1.0)
        a = x.scatter(1, cls, self.u[:, :1])
        b = x.scatter_add(1, idx, self.u)
        c = x.scatter_reduce(1, self.cidx, self.v, "amax")
        d = x.scatter_reduce(1, self.cidx, self.v, "prod")
        return torch.cat([onehot * x, a, b, c, d, e, f], 1)


INPUTS = ("inp", "cls", "idx", "rows", "pr", "pc")


def inputs():
    r = np.random.RandomState(7)
    return dict(inp=r.randn(4, 5).astype(np.float32),
                cls=np.array([[2], [0], [5], [2]], np.int64),
                idx=np.array([[0, 0, 4], [1, 2, 3], [5, 5, 5], [3, 0, 2]],
                             np.int64),
                rows=np.array([3, 0, 3, -1, 1], np.int64),
                pr=np.array([0, 2, 3], np.int64),
                pc=np.array([5, 1, -6], np.int64),
                labels=r.randn(4, 42).astype(np.float32))


def model():
    torch.manual_seed(0)
    return Scatters().train()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    feed = inputs()
    m = model()
    if mode == "export":
        args = tuple(torch.from_numpy(feed[k]) for k in INPUTS)
        with torch.no_grad():
            torch.onnx.export(m, args, os.path.join(out, "scatter.onnx"),
                              input_names=list(INPUTS),
                              output_names=["y"], optimize=False,
                              external_data=False)
        for k, v in feed.items():
            np.save(os.path.join(out, k + ".npy"), v)
        return 0
    fb = sys.argv[3]
    m = m.double()
    y = m(*[torch.from_numpy(feed[k]) if k != "inp" else
            torch.from_numpy(feed[k]).double() for k in INPUTS])
    loss = torch.nn.functional.mse_loss(
        y, torch.from_numpy(feed["labels"]).double())
    names = [n for n, _ in m.named_parameters()]
    grads = torch.autograd.grad(loss, [p for _, p in m.named_parameters()])
    bad = 0

    def rel(got, want):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != want.shape:
            return np.inf
        return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)

    checks = [("loss", np.load(os.path.join(fb, "loss.npy")), loss.item())]
    for n, g in zip(names, grads):
        checks.append((n, np.load(os.path.join(fb, n + ".npy")), g.numpy()))
    for n, got, want in checks:
        e = rel(got, want)
        ok = e <= 1e-6
        bad += not ok
        print("%-4s %-12s rel err %.2e" % ("ok" if ok else "FAIL", n, e))
    print("%d compared, %d failures" % (len(checks), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
