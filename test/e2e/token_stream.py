#!/usr/bin/env python3
"""Inputs and checks for test/e2e/token-stream.test.

  make --out DIR     a small GPT-2 (transformers, random weights, exported by
                     PyTorch's default exporter with input_ids [4, 16]) as
                     DIR/gpt.onnx; a token stream of 4001 random ids as
                     DIR/tokens.bin (uint16) and DIR/tokens32.bin (uint32).
  step-inputs TOKENS TRACE OUT [--step K]
                     the windows step K of a --data-trace read, cut from the
                     uint16 file TOKENS here (input_ids[s] = tokens[16 s :
                     16 s + 16], labels one token later) as OUT/input_ids.npy
                     and OUT/labels.npy, for `loom-run --entry=forward`, and
                     both in OUT/windows.npz.
  same-loss METRICS LOSS [--step K]
                     step K's loss in METRICS equals the loss in LOSS (an
                     .npy, or another metrics file's step-1 loss; relative
                     1e-6); prints `step K loss equal`.
  packed --out DIR   a one-layer causal LM whose attention is masked to each
                     token's own document (F.scaled_dot_product_attention
                     with (docs_i == docs_j) & causal) and whose position
                     ids restart per document, exported with inputs
                     input_ids, docs, pos [4, 16] (DIR/packed.onnx, its
                     parameters in DIR/packed_init.pt); DIR/packed.bin, a
                     uint16 stream of documents ended by token 0.
  packed-inputs DIR TRACE OUT
                     step 1's windows of DIR/packed.bin (from TRACE) as
                     OUT/{input_ids,labels,docs,pos}.npy, the document ids
                     and positions computed here in Python.
  packed-check DIR OUT METRICS
                     PyTorch's loss and gradients (float64) on OUT's inputs
                     against METRICS' step-1 loss and the gradients
                     `loom-run --entry=forward_backward --output-dir OUT`
                     wrote (relative 1e-5).
  megatron DIR       DIR/packed.bin's documents (each ended by token 0) as a
                     Megatron indexed dataset DIR/packed_mt.{bin,idx}: one
                     sequence per document, dtype uint16, written here from
                     Megatron-LM's documented layout.
  traces A B [--from-step K]
                     the --data-trace files A and B list the same sample
                     indices for every (step, micro-batch) from step K on;
                     prints `traces agree: N micro-batches`.
"""
import argparse
import json
import os
import sys

import numpy as np

T, BATCH, VOCAB, TOKENS = 16, 4, 64, 4001


def make(out):
    import torch
    import transformers as tf
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                    "utils"))
    import export_zoo as ez
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=VOCAB, n_positions=T, n_embd=32, n_layer=1, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    model = ez.LogitsOnly(model)
    model.train(True)
    ids = ez.tokens((BATCH, T), VOCAB)
    with torch.no_grad():
        torch.onnx.export(model, (ids,), os.path.join(out, "gpt.onnx"),
                          input_names=["input_ids"], output_names=["logits"],
                          external_data=False, optimize=False)
    tokens = np.random.default_rng(0).integers(0, VOCAB, TOKENS)
    tokens.astype("<u2").tofile(os.path.join(out, "tokens.bin"))
    tokens.astype("<u4").tofile(os.path.join(out, "tokens32.bin"))
    n = (TOKENS - 1) // T
    print("wrote", out, "with", n, "windows")


class Packed:
    """Builds the packed-document model lazily (torch is imported late)."""

    @staticmethod
    def module():
        import torch
        import torch.nn.functional as F

        class PackedLM(torch.nn.Module):
            def __init__(self, d=32, heads=2):
                super().__init__()
                self.heads = heads
                self.tok = torch.nn.Embedding(VOCAB, d)
                self.pos = torch.nn.Embedding(T, d)
                self.qkv = torch.nn.Linear(d, 3 * d)
                self.proj = torch.nn.Linear(d, d)
                self.norm = torch.nn.LayerNorm(d)
                self.head = torch.nn.Linear(d, VOCAB)

            def forward(self, ids, docs, pos):
                b, t = ids.shape
                x = self.tok(ids) + self.pos(pos)
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                shape = (b, t, self.heads, -1)
                q, k, v = (y.reshape(shape).transpose(1, 2) for y in (q, k, v))
                same = docs[:, None, :, None] == docs[:, None, None, :]
                causal = torch.ones(t, t, dtype=torch.bool).tril()
                a = F.scaled_dot_product_attention(q, k, v,
                                                   attn_mask=same & causal)
                x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
                return self.head(self.norm(x))

        return PackedLM()

    @staticmethod
    def roles(window, sep=0):
        docs, pos, d, start = [], [], 0, 0
        for i, tok in enumerate(window):
            docs.append(d)
            pos.append(i - start)
            if tok == sep:
                d, start = d + 1, i + 1
        return docs, pos


def packed(out):
    import torch
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Packed.module()
    torch.save(model.state_dict(), os.path.join(out, "packed_init.pt"))
    z = torch.zeros(BATCH, T, dtype=torch.long)
    with torch.no_grad():
        # Distinct tensors: given one tensor twice, the exporter makes one
        # input of both.
        torch.onnx.export(model, (z + 1, z.clone(), z.clone()),
                          os.path.join(out, "packed.onnx"),
                          input_names=["input_ids", "docs", "pos"],
                          output_names=["logits"], external_data=False,
                          optimize=False)
    rng = np.random.default_rng(1)
    tokens = []
    while len(tokens) < TOKENS:
        tokens += list(rng.integers(1, VOCAB, rng.integers(1, 12))) + [0]
    np.array(tokens[:TOKENS], "<u2").tofile(os.path.join(out, "packed.bin"))
    print("wrote", out)


def packed_inputs(d, trace, out):
    tokens = np.fromfile(os.path.join(d, "packed.bin"), "<u2").astype(
        np.int64)
    with open(trace) as f:
        samples = json.loads(f.readline())["samples"]
    arrays = {"input_ids": [], "labels": [], "docs": [], "pos": []}
    for s in samples:
        w = tokens[s * T: s * T + T + 1]
        docs, pos = Packed.roles(w[:T])
        for k, v in (("input_ids", w[:T]), ("labels", w[1:]),
                     ("docs", docs), ("pos", pos)):
            arrays[k].append(v)
    os.makedirs(out, exist_ok=True)
    for k, v in arrays.items():
        np.save(os.path.join(out, k + ".npy"), np.array(v, np.int64))
    print("up to %d documents in a window" % (max(map(max, arrays["docs"]))
                                              + 1))


def packed_check(d, out, metrics):
    import torch
    t = {k: torch.tensor(np.load(os.path.join(out, k + ".npy")))
         for k in ("input_ids", "labels", "docs", "pos")}
    model = Packed.module()
    model.load_state_dict(torch.load(os.path.join(d, "packed_init.pt")))
    model.double()
    logits = model(t["input_ids"], t["docs"], t["pos"])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                             t["labels"].reshape(-1))
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(loss, list(params.values()))
    with open(metrics) as f:
        got = json.loads(f.readline())["loss"]
    failures = []
    err = abs(got - loss.item()) / abs(loss.item())
    print("%s packed step-1 loss %.7f, PyTorch f64 %.7f, rel err %.1e" %
          ("ok" if err <= 1e-6 else "FAIL", got, loss.item(), err))
    if err > 1e-6:
        failures.append("loss")
    worst, worst_name = 0.0, ""
    for name, g in zip(params, grads):
        mine = np.load(os.path.join(out, name + ".npy")).astype(np.float64)
        want = g.detach().numpy()
        e = np.linalg.norm(mine - want) / np.linalg.norm(want)
        if e > worst:
            worst, worst_name = e, name
    ok = worst <= 1e-5
    print("%s packed %d gradients, worst %s rel err %.1e" %
          ("ok" if ok else "FAIL", len(params), worst_name, worst))
    if not ok:
        failures.append("gradients")
    if failures:
        raise SystemExit(1)


def megatron(d):
    import struct
    tokens = np.fromfile(os.path.join(d, "packed.bin"), "<u2")
    ends = list(np.nonzero(tokens == 0)[0] + 1)
    if not ends or ends[-1] != len(tokens):
        ends.append(len(tokens))
    lengths = np.diff([0] + ends).astype(np.int32)
    pointers = (np.concatenate([[0], np.cumsum(lengths)[:-1]]) * 2).astype(
        np.int64)
    with open(os.path.join(d, "packed_mt.idx"), "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", 8))  # uint16
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(lengths) + 1))
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    tokens.tofile(os.path.join(d, "packed_mt.bin"))
    print("wrote %d documents" % len(lengths))


def step_inputs(tokens_path, trace, out, step):
    tokens = np.fromfile(tokens_path, "<u2").astype(np.int64)
    with open(trace) as f:
        rows = [json.loads(line) for line in f]
    samples = [r["samples"] for r in rows if r["step"] == step][0]
    os.makedirs(out, exist_ok=True)
    arrays = {name: np.stack([tokens[s * T + off: s * T + off + T]
                              for s in samples])
              for name, off in (("input_ids", 0), ("labels", 1))}
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
    np.savez(os.path.join(out, "windows.npz"), **arrays)
    print("windows", samples)


def same_loss(metrics, loss_npy, step):
    with open(metrics) as f:
        got = [json.loads(line) for line in f if '"loss"' in line][step - 1]
    got = got["loss"]
    if loss_npy.endswith(".jsonl"):  # another run's step-1 loss
        with open(loss_npy) as f:
            want = [json.loads(line) for line in f if '"loss"' in line][0]
        want = want["loss"]
    else:
        want = float(np.load(loss_npy))
    ok = abs(got - want) <= 1e-6 * abs(want)
    print("step %d loss %s: %.8f and %.8f" % (step, "equal" if ok else
                                              "DIFFERS", got, want))
    if not ok:
        raise SystemExit(1)


def load_trace(path, from_step):
    rows = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["step"] >= from_step:
                rows[(r["step"], r["micro"])] = (r["rank"], r["samples"])
    return rows


def traces(a, b, from_step):
    ta, tb = load_trace(a, from_step), load_trace(b, from_step)
    if not ta or set(ta) != set(tb):
        raise SystemExit("FAIL: the traces cover different micro-batches: "
                         "%s vs %s" % (sorted(ta), sorted(tb)))
    for key in sorted(ta):
        if ta[key][1] != tb[key][1]:
            raise SystemExit("FAIL: step %d micro-batch %d read %s and %s" %
                             (key[0], key[1], ta[key][1], tb[key][1]))
    print("traces agree: %d micro-batches" % len(ta))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    # Each command's positional arguments; "--out" is an option; "--step"
    # and "--from-step" default to 1.
    commands = {
        "make": ["--out"], "packed": ["--out"], "megatron": ["dir"],
        "step-inputs": ["tokens", "trace", "out", "--step"],
        "same-loss": ["metrics", "loss", "--step"],
        "packed-inputs": ["dir", "trace", "out"],
        "packed-check": ["dir", "out", "metrics"],
        "traces": ["a", "b", "--from-step"],
    }
    for cmd, params in commands.items():
        sp = sub.add_parser(cmd)
        for name in params:
            if name == "--out":
                sp.add_argument(name, required=True)
            elif name.startswith("--"):
                sp.add_argument(name, type=int, default=1)
            else:
                sp.add_argument(name)
    args = ap.parse_args()
    if args.cmd == "make":
        make(args.out)
    elif args.cmd == "step-inputs":
        step_inputs(args.tokens, args.trace, args.out, args.step)
    elif args.cmd == "same-loss":
        same_loss(args.metrics, args.loss, args.step)
    elif args.cmd == "megatron":
        megatron(args.dir)
    elif args.cmd == "packed":
        packed(args.out)
    elif args.cmd == "packed-inputs":
        packed_inputs(args.dir, args.trace, args.out)
    elif args.cmd == "packed-check":
        packed_check(args.dir, args.out, args.metrics)
    else:
        traces(args.a, args.b, args.from_step)


if __name__ == "__main__":
    main()
