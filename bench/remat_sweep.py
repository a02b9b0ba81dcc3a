#!/usr/bin/env python3
"""Sweeps loomc --memory-budget over one model's training step and prints
what loom-remat and the memory planner give at each budget.

For each budget, from the arena without recomputation down to the smallest
one loom-remat reaches (--remat=full), loomc compiles the step up to the
memory plan (--emit=plan-memory) and this script reads back, for
@train_step, the planned arena (loom.arena_bytes, written by
loom-plan-memory) and loom-remat's record (recomputed FLOPs, the step's
FLOPs). It checks that every planned arena is within its budget and that
the arena never rises as the budget falls, and prints a markdown table.
The "activation" share is the arena minus that of @apply_optimizer (the
parameters, gradients and optimizer state, which no recomputation removes).

  python3 bench/remat_sweep.py MODEL.onnx [--points 8] [--loomc build/bin/loomc]
          [--exhaustive N] [-- extra loomc flags]

With --exhaustive N (small graphs: 2^N trial plans per budget), each budget
is also given to loomc --remat-exhaustive=N, and the table shows, beside the
greedy search's choice, the least recomputation over every subset of the
stored forward values (each recomputed before its first backward reader):
how far the pass is from the optimum of that space.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ENTRY = "train_step"


def compile_plan(loomc, model, flags, extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.mlir")
        cmd = [loomc, model, "--train", "--target=cpu", "--emit=plan-memory",
               "-o", out] + flags + extra
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        secs = time.perf_counter() - t0
        if r.returncode != 0:
            return None, r.stderr.strip(), secs
        text = open(out).read()
    funcs = {}
    for m in re.finditer(r"func\.func @(\w+)\((.*)", text):
        line = m.group(2)
        info = {}
        a = re.search(r"loom\.arena_bytes = (\d+)", line)
        if a:
            info["arena"] = int(a.group(1))
        start = line.find("loom.remat = {")
        if start >= 0:
            depth, end = 0, start
            for end in range(start + len("loom.remat = "), len(line)):
                depth += {"{": 1, "}": -1}.get(line[end], 0)
                if depth == 0:
                    break
            body = line[start:end + 1]
            ops = re.search(r"recomputed = \{(.*?)\}", body)
            rest = body.replace(ops.group(0), "") if ops else body
            for k, v in re.findall(r"(\w+) = (-?\d+) : i64", rest):
                info[k] = int(v)
            info["ops"] = dict((k, int(v)) for k, v in
                               re.findall(r"(\w+) = (\d+) : i64", ops.group(1))) if ops else {}
        funcs[m.group(1)] = info
    return funcs, "", secs


UNIT = [2**20, "MiB"]


def mib(b):
    return "%.1f" % (b / UNIT[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--loomc", default="build/bin/loomc")
    ap.add_argument("--points", type=int, default=8,
                    help="budgets between the no-remat and the smallest arena")
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("--exhaustive", type=int, default=0,
                    help="also the optimum over every subset of at most N stored values")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra

    base, err, secs0 = compile_plan(args.loomc, args.model, ["--remat=none"], args.extra)
    if base is None:
        sys.exit("loomc failed: " + err)
    full, err, secs_full = compile_plan(args.loomc, args.model, ["--remat=full"], args.extra)
    if full is None:
        sys.exit("loomc --remat=full failed: " + err)
    a0 = base[ENTRY]["arena"]
    if a0 < 64 * 2**20:
        UNIT[:] = [2**10, "KiB"]
    amin = full[ENTRY]["arena"]
    fixed = base.get("apply_optimizer", {}).get("arena", 0)
    act0 = a0 - fixed
    print("model %s: no remat %s %s (activations %s over the optimizer's %s), "
          "smallest with remat %s (--remat=full); compile %.1f s / %.1f s"
          % (os.path.basename(args.model), mib(a0), UNIT[1], mib(act0), mib(fixed),
             mib(amin), secs0, secs_full))
    budgets = [a0 - (a0 - amin) * i // max(1, args.points - 1) for i in range(args.points)]
    half = fixed + act0 // 2
    if amin <= half < a0:
        budgets.append(half)
    budgets = sorted(set(budgets), reverse=True)
    rows, last, ok = [], None, True
    exh = ["--remat-exhaustive=%d" % args.exhaustive] if args.exhaustive else []
    if exh:
        print(("| budget {u} | greedy alone: arena {u}, recompute % | subset search: "
               "arena {u}, recompute % | the pass (with both): arena {u}, recompute % |"
               ).format(u=UNIT[1]))
        print("|---:|---:|---:|---:|")
    else:
        print(("| budget {u} | planned arena {u} | activations {u} | recompute FLOPs % | "
               "recomputed ops | compile s |").format(u=UNIT[1]))
        print("|---:|---:|---:|---:|---|---:|")
    for b in budgets:
        funcs, err, secs = compile_plan(args.loomc, args.model,
                                        ["--memory-budget=%d" % b] + exh, args.extra)
        if funcs is None:
            print("| %s | error: %s | | | | |" % (mib(b), err.splitlines()[-1][:80]))
            ok = False
            continue
        t = funcs[ENTRY]
        arena = t["arena"]
        pct = 100.0 * t.get("recompute_flops", 0) / max(1, t.get("step_flops", 1))
        ops = ", ".join("%s %d" % kv for kv in sorted(t.get("ops", {}).items()))
        note = ""
        if arena > b:
            note, ok = " OVER BUDGET", False
        if last is not None and arena > last:
            note, ok = note + " ROSE", False
        last = arena
        tag = " (half the activations)" if b == half else ""
        row = dict(budget=b, arena=arena, activations=arena - fixed,
                   recompute_pct=pct, ops=t.get("ops", {}), compile_s=secs)
        if exh:
            if "exhaustive_arena" in t:
                row["subset_arena"] = t["exhaustive_arena"]
                row["subset_pct"] = (100.0 * t["exhaustive_recompute_flops"]
                                     / max(1, t.get("step_flops", 1)))
                subset = "%s, %.2f" % (mib(row["subset_arena"]), row["subset_pct"])
            else:
                subset = "none fits (%d values)" % t.get("exhaustive_candidates", 0)
            alone, err2, _ = compile_plan(args.loomc, args.model,
                                          ["--memory-budget=%d" % b], args.extra)
            if alone is None:
                greedy = "does not fit"
            else:
                g = alone[ENTRY]
                row["greedy_arena"] = g["arena"]
                row["greedy_pct"] = (100.0 * g.get("recompute_flops", 0)
                                     / max(1, g.get("step_flops", 1)))
                greedy = "%s, %.2f" % (mib(g["arena"]), row["greedy_pct"])
            print("| %s%s | %s | %s | %s%s, %.2f |"
                  % (mib(b), tag, greedy, subset, mib(arena), note, pct))
        else:
            print("| %s%s | %s%s | %s | %.2f | %s | %.1f |"
                  % (mib(b), tag, mib(arena), note, mib(arena - fixed), pct, ops or "-", secs))
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=args.model, no_remat=a0, smallest=amin, fixed=fixed,
                           rows=rows), f, indent=1)
    print("every arena within its budget and never rising: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
