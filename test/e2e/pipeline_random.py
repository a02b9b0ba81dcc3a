#!/usr/bin/env python3
"""Random pipeline configurations, compiled and run to the end.

    pipeline_random.py MODEL.json WORK_DIR COUNT SEED

Draws COUNT combinations of (ranks P in 1..4, schedule, virtual stages V,
micro-batches M) that loomc accepts (interleaved: V in 2..3 and M a multiple
of P; P = 1 only with interleaved, the one-rank pipeline of V stages),
compiles the JSON model with `loomc --pp`, trains 2 steps under
`mpirun -np P` with a time limit (a hang is a failure), and compares the
parameters with one process's `--accumulate M` on the same micro-batches.
Prints one line per combination that fails and a summary line.
"""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiled_vs_interp import read_safetensors, rel_err  # noqa: E402

model, work, count, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tools = os.environ.get("LOOM_TOOLS_DIR", "")
loomc = "loomc"
loom_run = os.path.join(tools, "loom-run") if tools else "loom-run"
train = ["--train", "--loss=cross_entropy", "--optimizer=momentum", "--lr=0.05", "--target=cpu"]
os.makedirs(work, exist_ok=True)
rng = random.Random(seed)


def run(cmd, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


plain = os.path.join(work, "plain.loom")
r = run([loomc, model] + train + ["-o", plain])
if r.returncode:
    sys.exit("plain compile failed: " + r.stderr)
data = os.path.join(work, "data.npz")
subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "make_batches.py"),
                plain, data, "--batches", "16", "--int-high", "10"], check=True)
references = {}


def reference(m):
    if m not in references:
        out = os.path.join(work, f"one-{m}.safetensors")
        r = run([loom_run, plain, "--train", "--data", data, "--steps", "2", "--accumulate", str(m),
                 "--threads", "1", "--quiet", "--save-params", out])
        if r.returncode:
            sys.exit("reference failed: " + r.stderr)
        references[m] = read_safetensors(out)
    return references[m]


failed = 0
seen = {}
for i in range(count):
    schedule = rng.choice(["gpipe", "1f1b", "interleaved", "zb-h1"])
    if schedule == "interleaved":
        p, v = rng.randint(1, 4), rng.randint(2, 3)
        m = p * rng.randint(1, 3)
    else:
        p, v, m = rng.randint(2, 4), 1, rng.randint(1, 6)
    key = f"P={p} V={v} M={m} {schedule}"
    seen[schedule] = seen.get(schedule, 0) + 1
    art = os.path.join(work, f"c{i}.loom")
    out = os.path.join(work, f"c{i}.safetensors")
    r = run([loomc, model] + train + [f"--pp={p}", f"--pp-schedule={schedule}",
                                      f"--virtual-stages={v}", f"--microbatches={m}", "-o", art])
    if r.returncode:
        print(f"{key}: compile failed: {r.stderr.strip()}")
        failed += 1
        continue
    cmd = [loom_run, art, "--train", "--data", data, "--steps", "2", "--threads", "1", "--quiet",
           "--save-params", out, "--collective-timeout", "30"]
    if p > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(p)] + cmd
    try:
        r = run(cmd, timeout=90)
    except subprocess.TimeoutExpired:
        print(f"{key}: hung (no end after 90 s)")
        failed += 1
        continue
    if r.returncode:
        print(f"{key}: run failed: {r.stderr.strip()[-500:]}")
        failed += 1
        continue
    got, want = read_safetensors(out), reference(m)
    worst = max(rel_err(got[k], want[k]) for k in want)
    if not worst <= 1e-6:
        print(f"{key}: parameters differ from one process by {worst:.3g}")
        failed += 1
print(f"{count} combinations ({', '.join(f'{k} {n}' for k, n in sorted(seen.items()))}): {failed} failed")
