#!/usr/bin/env python3
"""Every example model compiles for the CUDA target, for each architecture
asked (loomc --train --target=cuda:sm_NN), and the artifact holds what the
runtime needs:

- kernels.cubin is an ELF image (assembled by ptxas) and kernels.ptx is PTX
  for that architecture;
- plan.json says target cuda and the architecture, every kernel step names
  an .entry of the PTX and has a grid and a block;
- `loom-run --info` reads the plan without a GPU.

Prints one line per model and architecture; exit status 1 on any failure.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

# Training flags per example (mlp_loss.onnx computes its own loss).
FLAGS = {"mlp_loss.onnx": ["--loss=auto"]}
DEFAULT_FLAGS = ["--loss=cross_entropy", "--optimizer=adamw"]


def check(args, model, sm):
    name = os.path.basename(model)
    art = os.path.join(args.work, "%s.sm_%d.loom" % (name, sm))
    cmd = [args.loomc, model, "--train"] + FLAGS.get(name, DEFAULT_FLAGS) + [
        "--target=cuda:sm_%d" % sm, "-o", art]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return ["%s sm_%d: loomc failed:\n%s" % (name, sm, p.stderr[-2000:])]
    errors = []
    plan = json.load(open(os.path.join(art, "plan.json")))
    if plan.get("target") != "cuda" or plan.get("sm") != sm:
        errors.append("plan target/sm %r/%r" % (plan.get("target"), plan.get("sm")))
    ptx = open(os.path.join(art, plan["ptx"])).read()
    if ".target sm_%d" % sm not in ptx:
        errors.append("PTX is not for sm_%d" % sm)
    entries = set(re.findall(r"\.entry (\w+)\(", ptx))
    with open(os.path.join(art, plan["kernels"]), "rb") as f:
        cubin = f.read()
    if cubin[:4] != b"\x7fELF":
        errors.append("kernels.cubin is not an ELF image")
    launches = 0
    for entry in plan["entries"]:
        for step in entry["steps"]:
            if step["kind"] != "kernel":
                continue
            launches += 1
            if step["name"] not in entries:
                errors.append("step %s: no such .entry in the PTX" % step["name"])
            if step["name"].encode() not in cubin:
                errors.append("step %s: not in the cubin" % step["name"])
            for field in ("grid", "block", "shared_bytes"):
                if field not in step:
                    errors.append("step %s: no %s" % (step["name"], field))
    p = subprocess.run([args.loom_run, art, "--info"], capture_output=True,
                       text=True)
    if p.returncode != 0 or "target cuda" not in p.stdout:
        errors.append("loom-run --info failed: " + p.stderr)
    status = "ok" if not errors else "FAILED"
    print("%-24s sm_%d: %4d launches, %3d kernels in the PTX, cubin %d bytes: %s"
          % (name, sm, launches, len(entries), len(cubin), status))
    return ["%s sm_%d: %s" % (name, sm, e) for e in errors]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--loomc", required=True)
    p.add_argument("--loom-run", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--sm", default="90,80")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("models", nargs="+")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    jobs = [(m, int(sm)) for m in args.models for sm in args.sm.split(",")]
    failures = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for errors in pool.map(lambda j: check(args, *j), jobs):
            failures += errors
    if failures:
        print("\n".join(["FAILURES:"] + failures))
        return 1
    print("all examples compile for CUDA")
    return 0


if __name__ == "__main__":
    sys.exit(main())
