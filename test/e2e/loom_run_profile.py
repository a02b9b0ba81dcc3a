"""Checks a loom-run --profile CSV against the plan it profiles.

Usage: loom_run_profile.py PROFILE.csv PLAN.json ENTRY CALLS
"""
import csv
import json
import sys

path, plan_path, entry, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(path, newline="") as f:
    rows = list(csv.reader(f))
header = ["entry", "step", "kind", "what", "calls", "total_ms", "ms_per_call", "share"]
print("header ok" if rows[0] == header else "bad header: %r" % rows[0])
rows = [dict(zip(header, r)) for r in rows[1:] if r[0] == entry]
plan = json.load(open(plan_path))
steps = next(e["steps"] for e in plan["entries"] if e["name"] == entry)
views = {i for i, s in enumerate(steps)
         if s["kind"] not in ("kernel", "gemm", "copy", "conv")}
expected = set(range(len(steps))) - views
got = {int(r["step"]) for r in rows}
if got == expected and all(int(r["calls"]) == calls for r in rows):
    print("rows: every step of %s, %d calls each" % (entry, calls))
else:
    print("rows differ: missing %s, extra %s, calls %s" % (
        sorted(expected - got), sorted(got - expected), sorted({r["calls"] for r in rows})))
for r in rows:
    s = steps[int(r["step"])]
    if r["kind"] != s["kind"]:
        print("step %s: kind %s, the plan says %s" % (r["step"], r["kind"], s["kind"]))
    if s["kind"] == "kernel" and r["what"] != s["name"]:
        print("step %s: %s, the plan's kernel is %s" % (r["step"], r["what"], s["name"]))
    if s["kind"] == "conv":
        buffers = next(e["buffers"] for e in plan["entries"] if e["name"] == entry)
        dims = lambda b: "x".join(str(d) for d in buffers[s[b]]["shape"])
        want = "conv %s %s * %s" % (s["direction"], dims("x"), dims("w"))
        if s["groups"] != 1:
            want += " groups %d" % s["groups"]
        if r["what"] != want:
            print("step %s: %s, the plan's convolution is %s" % (r["step"], r["what"], want))
print("kinds: " + " ".join(sorted({r["kind"] for r in rows})))
order = [float(r["ms_per_call"]) for r in rows]
if order != sorted(order, reverse=True):
    print("not slowest first")
total = sum(float(r["share"]) for r in rows)
print("shares add up to 1" if abs(total - 1) < 1e-3 else "shares add up to %g" % total)
