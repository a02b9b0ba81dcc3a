#!/usr/bin/env python3
"""ONNX conformance runner: imports every model of Debian's libonnx-testdata.

For now it checks import only (later issues add numerics through the
interpreter and the compiled paths). Each model is classified as
  imported     loomc exited 0,
  unsupported  loomc reported an unsupported ONNX op (the clean refusal),
  failed       loomc exited non-zero with another diagnostic,
  CRASH/HANG   loomc died on a signal or ran past the timeout: always a bug.
It prints one table row per ONNX op type and, with --json, writes the full
results. Exit status is non-zero if any model crashed or hung, or if a model
whose ops are all in Loom's supported set failed without an explained reason
(see EXPECTED_FAILURES).

Usage: onnx_conformance.py --loomc build/bin/loomc [--data DIR] [--json OUT]
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys

SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]

# Reasons a supported op's test may legitimately fail to import, matched
# against loomc's diagnostics. Anything else is a conformance bug.
EXPECTED_FAILURES = [
    (r"converting it to opset 13 failed", "ONNX's version converter failed"),
    (r"unsupported ONNX element type", "element type not supported"),
    (r"dynamic dimension|has no known shape", "dynamic shape"),
    (r"must be a compile-time constant", "shape input computed at run time"),
    (r"is not a tensor \(sequences", "non-tensor value"),
    (r"only 2-D (convolution|pooling)", "1-D/3-D conv or pooling"),
    (r"integer Pow", "integer Pow"),
    (r"class-weight input", "SoftmaxCrossEntropyLoss class weights"),
    (r"log_prob output", "SoftmaxCrossEntropyLoss log_prob output"),
    (r"mask output", "Dropout mask output"),
    (r"is not supported", "op variant not supported"),
    (r"ONNX checker rejected", "rejected by the ONNX checker"),
    (r"ONNX shape inference failed", "rejected by ONNX shape inference"),
]


def op_types(model_path):
    import onnx  # Debian's python3-onnx
    model = onnx.load(model_path, load_external_data=False)
    return sorted({n.op_type for n in model.graph.node})


def supported_ops(loomc_src):
    """The op list of the ONNX importer, read from its source."""
    text = open(loomc_src).read()
    block = text[text.index("supportedOps()"):]
    block = block[:block.index("};")]
    return set(re.findall(r'"([A-Za-z]+)"', block))


def bindings(model_path):
    """--bind-input flags for inputs that carry shapes or modes.

    Node tests feed axes, shapes, starts, repeats, split sizes and dropout
    modes as graph inputs with values in test_data_set_0; a static-shape
    compiler specializes on them. Float data inputs are never bound.
    """
    import onnx
    data = os.path.join(os.path.dirname(model_path), "test_data_set_0")
    if not os.path.isdir(data):
        return []
    model = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    mode_inputs = {n.input[k] for n in model.graph.node
                   if n.op_type == "Dropout" for k in (1, 2)
                   if len(n.input) > k}
    mode_inputs |= {i for n in model.graph.node if n.op_type == "Range"
                    for i in n.input}
    flags = []
    for idx, inp in enumerate(inputs):
        pb = os.path.join(data, "input_%d.pb" % idx)
        if not os.path.isfile(pb) or not inp.type.HasField("tensor_type"):
            continue
        elem = inp.type.tensor_type.elem_type
        is_int = elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32,
                          onnx.TensorProto.BOOL)
        if is_int or inp.name in mode_inputs:
            flags.append("--bind-input=%s=%s" % (inp.name, pb))
    return flags


def run_one(loomc, path, timeout):
    try:
        binds = bindings(path)
    except Exception:
        binds = []
    try:
        proc = subprocess.run([loomc, path, "-o", "-"] + binds,
                              capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "HANG", "timed out after %ds" % timeout
    if proc.returncode < 0:
        return "CRASH", "signal %d: %s" % (-proc.returncode,
                                           proc.stderr[-500:])
    if proc.returncode == 0:
        return "imported", ""
    errors = [l for l in proc.stderr.splitlines() if "error:" in l and
              not l.startswith("loomc: error: failed to import")]
    first = errors[0] if errors else proc.stderr.strip()[:300]
    if "unsupported ONNX op" in proc.stderr:
        return "unsupported", first
    return "failed", first


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--importer-src", default=os.path.join(
        os.path.dirname(__file__), "..", "lib", "Import", "OnnxImporter.cpp"))
    ap.add_argument("--json", help="write per-model results here")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    models = []
    for suite in SUITES:
        d = os.path.join(args.data, suite)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name, "model.onnx")
            if os.path.isfile(p):
                models.append((suite, name, p))
    if not models:
        print("no models found under %s" % args.data, file=sys.stderr)
        return 2

    supported = supported_ops(args.importer_src)
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(run_one, args.loomc, p, args.timeout): (s, n, p)
                for s, n, p in models}
        done = 0
        for fut in concurrent.futures.as_completed(futs):
            suite, name, path = futs[fut]
            status, message = fut.result()
            try:
                ops = op_types(path)
            except Exception as e:  # the model itself does not parse
                ops = ["<unparsable>"]
            results.append(dict(suite=suite, test=name, status=status,
                                ops=ops, message=message))
            done += 1
            if done % 100 == 0:
                print("... %d/%d models" % (done, len(models)),
                      file=sys.stderr, flush=True)
    results.sort(key=lambda r: (r["suite"], r["test"]))

    # Per-op table: a model counts under each op type it contains.
    table = collections.defaultdict(collections.Counter)
    for r in results:
        for op in r["ops"]:
            table[op][r["status"]] += 1
    cols = ["imported", "unsupported", "failed", "CRASH", "HANG"]
    print("%-28s %9s %12s %7s %6s %5s  %s" % (("op",) + tuple(cols) +
                                             ("loom maps it",)))
    for op in sorted(table):
        c = table[op]
        print("%-28s %9d %12d %7d %6d %5d  %s" % (
            (op,) + tuple(c[k] for k in cols) +
            ("yes" if op in supported else "no",)))
    totals = collections.Counter(r["status"] for r in results)
    print("\nmodels: %d  " % len(results) +
          "  ".join("%s=%d" % (k, totals[k]) for k in cols))

    # A model all of whose ops Loom maps must import, or fail for a listed
    # reason.
    unexplained, explained = [], collections.Counter()
    for r in results:
        if r["status"] != "failed":
            continue
        if not set(r["ops"]) <= supported:
            continue
        for pattern, reason in EXPECTED_FAILURES:
            if re.search(pattern, r["message"]):
                explained[reason] += 1
                r["reason"] = reason
                break
        else:
            unexplained.append(r)
    if explained:
        print("\nsupported-op models that fail for a stated reason:")
        for reason, n in explained.most_common():
            print("  %4d  %s" % (n, reason))
    bad = [r for r in results if r["status"] in ("CRASH", "HANG")]
    for r in bad + unexplained:
        print("BUG %s/%s [%s]: %s" % (r["suite"], r["test"], r["status"],
                                      r["message"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("\n%d passed, %d failed" % (len(results) - len(bad) - len(unexplained),
                                      len(bad) + len(unexplained)))
    return 1 if bad or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
