#!/usr/bin/env python3
"""Per-rank memory of data parallelism with ZeRO, read from the plans.

Compiles a model (default: the GPT example, examples/onnx/gpt2.onnx) with
`loomc --train --optimizer=adamw --target=cpu --dp=N --zero=Z` for N in
1, 2, 4 and Z in 0..3, and reads each plan's @train_step: the bytes of the
parameters and of the optimizer state a rank holds between steps (its
`param` and `state` inputs, shards where loom.shard says so), and the
step's arena (every temporary of one step: activations, gradients, the
gathered parameters of ZeRO 3). It prints them next to ZeRO's formulas for
fp32 AdamW, P parameters: parameters 4P (ZeRO 3: 4P/N), state 8P (ZeRO 1
and up: 8P/N), and the ratio measured / formula.

Loom keeps f32 parameters and state with --precision=bf16 too (the 16-bit
copies are temporaries of the step), so the mixed-precision formula
2P + 2P + 12P/N of the ZeRO paper does not describe it; its f32 master
weights are the parameters here.

  python3 bench/zero_memory.py [--model examples/onnx/gpt2.onnx] [--loomc build/bin/loomc]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plan_bytes(loomc, model, n, zero, workdir, extra):
    out = os.path.join(workdir, f"m_dp{n}_z{zero}.loom")
    cmd = [loomc, model, "--train", "--loss=cross_entropy", "--optimizer=adamw",
           "--target=cpu", f"--dp={n}", f"--zero={zero}", "-o", out] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("loomc failed: %s\n%s" % (" ".join(cmd), proc.stderr))
    plan = json.load(open(os.path.join(out, "plan.json")))
    entry = next(e for e in plan["entries"] if e["name"] == "train_step")
    sizes = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "i64": 8, "i32": 4}
    got = {"param": 0, "state": 0, "param_elems": 0}
    for b in entry["inputs"]:
        buf = entry["buffers"][b["buffer"]]
        elems = 1
        for d in buf["shape"]:
            elems *= d
        if b["kind"] in ("param", "state") and not b["name"].startswith("loss_scale"):
            got[b["kind"]] += elems * sizes[buf["dtype"]]
        if b["kind"] == "param":
            full = b.get("shard", {}).get("shape", buf["shape"])
            e = 1
            for d in full:
                e *= d
            got["param_elems"] += e
    got["arena"] = entry["arena_bytes"]
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "examples/onnx/gpt2.onnx"))
    ap.add_argument("--loomc", default=os.path.join(ROOT, "build/bin/loomc"))
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("extra", nargs="*", help="more loomc flags (after --)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.ranks.split(",")]:
            for zero in ([0] if n == 1 else [0, 1, 2, 3]):
                got = plan_bytes(args.loomc, args.model, n, zero, tmp, args.extra)
                p = got["param_elems"]
                want_param = 4 * p / (n if zero >= 3 else 1)
                want_state = 8 * p / (n if zero >= 1 else 1)
                rows.append(dict(ranks=n, zero=zero, P=p, param=got["param"],
                                 state=got["state"], arena=got["arena"],
                                 param_ratio=got["param"] / want_param,
                                 state_ratio=got["state"] / want_state))
    print("| ranks | ZeRO | params MiB (formula) | state MiB (formula) | params+state MiB | arena MiB |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    mib = 1 << 20
    for r in rows:
        n, z, p = r["ranks"], r["zero"], r["P"]
        print("| %d | %d | %.2f (%.2f, x%.3f) | %.2f (%.2f, x%.3f) | %.2f | %.2f |" % (
            n, z, r["param"] / mib, 4 * p / (n if z >= 3 else 1) / mib, r["param_ratio"],
            r["state"] / mib, 8 * p / (n if z >= 1 else 1) / mib, r["state_ratio"],
            (r["param"] + r["state"]) / mib, r["arena"] / mib))
    print("P = %d parameters" % rows[0]["P"])
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    worst = max(max(r["param_ratio"], r["state_ratio"]) for r in rows)
    print("largest measured / formula: %.4f" % worst)


if __name__ == "__main__":
    main()
