#!/usr/bin/env python3
"""ONNX conformance runner: imports every model of Debian's libonnx-testdata.

Each model is classified as
  imported     loomc exited 0,
  unsupported  loomc reported an unsupported ONNX op (the clean refusal),
  failed       loomc exited non-zero with another diagnostic,
  CRASH/HANG   loomc died on a signal or ran past the timeout: always a bug.
It prints one table row per ONNX op type and, with --json, writes the full
results. Exit status is non-zero if any model crashed or hung, or if a model
whose ops are all in Loom's supported set failed without an explained reason
(see EXPECTED_FAILURES).

With --run it also checks numbers: every imported model is run by
loom-interp (the reference interpreter) on each of its test_data_set_*
inputs, and its outputs are compared with the expected ones with the
tolerances of ONNX's backend tests (rtol=1e-3, atol=1e-7). A model's numbers
pass when every data set matches; they fail on a mismatch (the largest error
is reported) or when loom-interp fails. A numbers failure not listed in
EXPECTED_NUMERIC_FAILURES also makes the exit status non-zero. For numbers,
only the integer inputs a model cannot import without are bound (shapes,
axes, ...; see needed_bindings); the others are fed at run time.

With --compiled (which implies --run) every imported model is also compiled
to native code (`loomc --target=cpu`, one artifact per set of bound inputs)
and run by loom-run on the same data sets, compared with the same
tolerances. Its result is one of
  pass           every data set matches,
  numbers-fail   loom-run's outputs differ (the largest error is reported),
  compile-fail   loomc --target=cpu exited non-zero (its diagnostic),
  run-fail       loom-run exited non-zero, or wrote no result for an output,
  CRASH/HANG     loomc or loom-run died on a signal or ran past the timeout.
A crash or hang always makes the exit status non-zero, and so does any other
compiled failure of a model whose interpreter numbers pass, unless
EXPECTED_COMPILED_FAILURES states why. --compiled-xfail names open, reported
codegen bugs (XFAIL; one that passes fails the run). --compiled-filter
restricts the compiled run to the models whose test name matches a regular
expression. --also-target TARGET compiles and runs every model for a second
target too (its own --also-target-flags and --also-expect), from the same
import and interpreter run. Docs: docs/onnx-import.md, "Compiled
conformance".

With --expect FILE the counts are pinned: FILE lists every model of the data
set that does not pass every stage, with the stage where it stops
(unsupported, import-failed, numbers-fail, compiled-fail) and the reason. A
model that now stops at an earlier stage than listed, or is not listed and
does not pass, prints NEWLY FAILS and makes the exit status non-zero; one
that gets further prints NEWLY PASSES (a note: update FILE). --write-expect
FILE writes this run's file for review. Docs: docs/onnx-import.md,
"Expectations files".

With --skip-same-as DIR a model whose folder (model and test data) is
byte for byte the same-named folder of the data set DIR is not run: a run
over DIR checks it already (test/Import/ONNX/node-tests-1.23.test skips the
node tests that onnx 1.23 kept unchanged from Debian's libonnx-testdata,
which conformance.test runs). The expectations check counts them as seen.

Usage: onnx_conformance.py --loomc build/bin/loomc [--data DIR] [--json OUT]
           [--run [--interp build/bin/loom-interp]]
           [--compiled [--loom-run build/bin/loom-run]
            [--compiled-filter REGEX] [--compiled-xfail TEST,...]
            [--keep-failures DIR] [--target T] [--target-flags F]
            [--also-target T [--also-target-flags F] [--also-expect FILE]]]
           [--expect FILE] [--write-expect FILE] [--skip-same-as DIR]
"""
import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

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
    (r"indices \(input 1\) computed at run time",
     "indices computed at run time"),
    (r"imported only when every input is a compile-time constant",
     "op folded only on constants, here on run-time inputs"),
    (r"ONNX checker rejected", "rejected by the ONNX checker"),
    (r"ONNX shape inference failed", "rejected by ONNX shape inference"),
]


# Models whose numbers are known to differ from ONNX's, with the reason. A
# model is listed here only when the interpreter is right and the difference
# comes from elsewhere (the importer, or the test data itself).
_LIKE_SHAPE = ("test data's 'like' input has shape [1] where the model "
               "declares [3, 4]; static shapes refuse it")
EXPECTED_NUMERIC_FAILURES = {
    "test_cast_FLOAT_to_BFLOAT16":
        "onnx 1.12's data truncates float to bf16; loom.cast rounds to "
        "nearest even (as later ONNX data does)",
    "test_castlike_BFLOAT16_to_FLOAT": _LIKE_SHAPE,
    "test_castlike_BFLOAT16_to_FLOAT_expanded": _LIKE_SHAPE,
    "test_castlike_FLOAT_to_BFLOAT16": _LIKE_SHAPE,
    "test_castlike_FLOAT_to_BFLOAT16_expanded": _LIKE_SHAPE,
    # onnx 1.23's node tests (utils/gen_onnx_node_tests.py):
    # The expanded Attention tests in 16 bits: Loom imports the expanded
    # graph's ops (matmuls, softmax, masks) each rounded to the element
    # type; the expected outputs round once, after the whole attention.
    # Measured: at most one unit in the last place (bf16 0.0039, fp16
    # 0.000488 at outputs near 1).
    **{name: "16-bit expanded attention: each op of the expanded graph "
             "rounds to 16 bits where the expected output rounds once; at "
             "most one unit in the last place"
       for name in ("test_attention_3d_causal_bf16_expanded",
                    "test_attention_4d_attn_mask_causal_bf16_expanded",
                    "test_attention_4d_causal_bf16_expanded",
                    "test_attention_4d_causal_fp16_expanded",
                    "test_attention_4d_causal_padded_kv_bf16_expanded",
                    "test_attention_4d_padded_kv_bf16_expanded")},
    "test_celu_bfloat16_expanded":
        "one element one bf16 ulp off: Loom imports Elu as several loom "
        "ops (exp, sub, mul, select), each rounded to bf16, where the "
        "reference rounds Elu's result once",
}

# Tests whose expected outputs come from a random mask (NumPy's generator,
# in ONNX's reference implementation): no deterministic backend reproduces
# them. Their outputs are compared only where both masks keep the element
# (the kept values must agree: x / (1 - ratio)).
RANDOM_MASK_TESTS = {"test_training_dropout", "test_training_dropout_default",
                     "test_training_dropout_mask",
                     "test_training_dropout_default_mask"}

# Tests whose expected outputs are random draws of 0 and 1 (Bernoulli, from
# NumPy's generator): Loom's draws come from its own seed, so only the
# shape, the element type and that every value is 0 or 1 are compared.
RANDOM_DRAW_TESTS = {"test_bernoulli", "test_bernoulli_double",
                     "test_bernoulli_double_expanded",
                     "test_bernoulli_expanded", "test_bernoulli_seed",
                     "test_bernoulli_seed_expanded"}

# Models whose compiled results (loomc --target=cpu + loom-run) differ from
# the test data although the interpreter's match, with the reason. A model is
# listed only when the reason is understood and is not a code generation
# bug. Keys are test names; COMPILED_FAILURE_PATTERNS match the message.
EXPECTED_COMPILED_FAILURES = {
}
COMPILED_FAILURE_PATTERNS = [
    (r"plan: GEMM steps multiply f32, f64 and bf16 matrices, not 'f16'",
     "a limitation of the targets: no f16 GEMM steps yet (the interpreter's "
     "numbers for the model pass)"),
    (r"loom-run: error: entry '[^']*': input '[^']*': expected bf16 .*, "
     r"got f32",
     "a bf16 graph input cannot be fed to loom-run: it reads inputs from "
     ".npy files, which have no bf16 type (loom-interp converts an f32 file; "
     "loom-run takes the plan's dtype exactly)"),
]

# ONNX backend-test tolerances (onnx/backend/test/runner: rtol=1e-3,
# atol=1e-7 unless a test overrides them).
RTOL, ATOL = 1e-3, 1e-7


def op_types(model_path):
    import onnx  # Debian's python3-onnx
    model = onnx.load(model_path, load_external_data=False)
    return sorted({n.op_type for n in model.graph.node})


def supported_ops(loomc):
    """The ONNX ops the importer maps, as `loomc --onnx-ops` lists them."""
    out = subprocess.run([loomc, "--onnx-ops"], capture_output=True,
                         text=True, check=True).stdout
    return set(out.split())


def graph_inputs(model):
    """The graph inputs that test data feeds (initializers excluded)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def mode_inputs(model):
    """Inputs that select a mode or size rather than carry data: dropout's
    ratio and training_mode, and Range's operands."""
    names = {n.input[k] for n in model.graph.node
             if n.op_type == "Dropout" for k in (1, 2) if len(n.input) > k}
    names |= {i for n in model.graph.node if n.op_type == "Range"
              for i in n.input}
    return names


def bindings(model_path, data_set="test_data_set_0", only=None):
    """--bind-input flags for inputs that carry shapes or modes.

    Node tests feed axes, shapes, starts, repeats, split sizes and dropout
    modes as graph inputs with values in the test data; a static-shape
    compiler specializes on them. Float data inputs are never bound. With
    `only` (a set of names), just those inputs are bound.
    """
    import onnx
    data = os.path.join(os.path.dirname(model_path), data_set)
    if not os.path.isdir(data):
        return []
    model = onnx.load(model_path, load_external_data=False)
    inputs = graph_inputs(model)
    modes = mode_inputs(model)
    flags = []
    for idx, inp in enumerate(inputs):
        pb = os.path.join(data, "input_%d.pb" % idx)
        if not os.path.isfile(pb) or not inp.type.HasField("tensor_type"):
            continue
        if only is not None and inp.name not in only:
            continue
        elem = inp.type.tensor_type.elem_type
        is_int = elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32,
                          onnx.TensorProto.BOOL)
        if is_int or inp.name in modes:
            flags.append("--bind-input=%s=%s" % (inp.name, pb))
    return flags


def needed_bindings(loomc, path, timeout):
    """The names of the inputs the model needs bound to import: of the
    integer inputs `bindings` would bind, those it cannot import without
    (the others, such as gather indices, labels and where-conditions, stay
    run-time inputs so that their ops are computed, not folded at import).
    Mode inputs are always bound. Tried one input at a time."""
    import onnx
    flags = bindings(path)
    names = [f.split("=", 2)[1] for f in flags]
    keep = set(names)
    modes = mode_inputs(onnx.load(path, load_external_data=False))
    for name in names:
        if name in modes:
            continue
        trial = [f for f in flags if f.split("=", 2)[1] in keep - {name}]
        try:
            proc = subprocess.run([loomc, path, "-o", "-"] + trial,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            continue
        if proc.returncode == 0:
            keep.discard(name)
    return keep


def run_one(loomc, path, timeout, out="-", imported=None):
    """Imports the model at `path` (its integer and mode inputs bound, see
    `bindings`) and classifies the outcome. With `out` (a file), the module
    is written there, its parameters beside it, and `imported` (a dict) gets
    the import: {"flags": the --bind-input flags, "mlir": out}, which
    run_numbers reuses for the data set those flags bind."""
    try:
        binds = bindings(path)
    except Exception:
        binds = []
    try:
        proc = subprocess.run([loomc, path, "-o", out] + binds,
                              capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "HANG", "timed out after %ds" % timeout
    if proc.returncode < 0:
        return "CRASH", "signal %d: %s" % (-proc.returncode,
                                           proc.stderr[-500:])
    if proc.returncode == 0:
        if imported is not None and out != "-":
            imported.update(flags=binds, mlir=out)
        return "imported", ""
    errors = [l for l in proc.stderr.splitlines() if "error:" in l and
              not l.startswith("loomc: error: failed to import")]
    first = errors[0] if errors else proc.stderr.strip()[:300]
    if "unsupported ONNX op" in proc.stderr:
        return "unsupported", first
    return "failed", first


def sanitize(name):
    """loom-interp's file name for an output called `name`."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" + s if s in ("", ".", "..") else s


def read_pb(path, value_info=None):
    """The array in a TensorProto file. `value_info` is the graph input or
    output it feeds: bfloat16 data, which onnx 1.12 stores and returns as its
    raw bits (uint16; NumPy has no bfloat16), becomes float32, as loom-interp
    reads and writes bf16."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    array = numpy_helper.to_array(t)
    bf16 = t.data_type == onnx.TensorProto.BFLOAT16 or (
        value_info is not None and value_info.type.HasField("tensor_type") and
        value_info.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16)
    if bf16 and array.dtype == np.uint16:
        array = (array.astype(np.uint32) << 16).view(np.float32)
    elif bf16 and array.dtype.name == "bfloat16":
        # Newer onnx (1.15+) returns ml_dtypes' bfloat16: the same values.
        array = array.astype(np.float32)
    return array


def compare(expected, got, random_mask=False, random_draw=False):
    """None if `got` matches `expected` under the backend-test tolerances,
    else (max abs error, a short reason). With `random_mask`, only elements
    that are non-zero in both are compared (a boolean mask output: only the
    shape and type); with `random_draw`, `got` must have the shape and type
    and hold only 0 and 1."""
    import numpy as np
    if (random_mask or random_draw) and expected.shape == got.shape:
        if random_draw or expected.dtype == bool:
            if expected.dtype != got.dtype:
                return float("inf"), "dtype %s, expected %s" % (
                    got.dtype, expected.dtype)
            bad = ~((got == 0) | (got == 1))
            if random_draw and bad.any():
                return float("inf"), "%d of %d draws are not 0 or 1" % (
                    bad.sum(), bad.size)
            return None
        keep = (expected != 0) & (got != 0)
        expected, got = expected[keep], got[keep]
    if expected.shape != got.shape:
        return float("inf"), "shape %s, expected %s" % (got.shape,
                                                        expected.shape)
    if expected.dtype != got.dtype:
        return float("inf"), "dtype %s, expected %s" % (got.dtype,
                                                        expected.dtype)
    if expected.dtype == bool or expected.dtype.kind in "iu":
        bad = expected != got
        if not bad.any():
            return None
        err = np.abs(expected.astype(np.float64) - got.astype(np.float64))
        return float(err.max()), "%d of %d elements differ" % (bad.sum(),
                                                              bad.size)
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    nan_ok = np.isnan(e) == np.isnan(g)
    finite = ~np.isnan(e) & ~np.isnan(g)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(e - g), 0.0)
        # Equal infinities are equal (their difference is NaN).
        err = np.where(finite & (e == g), 0.0, err)
        bad = ~nan_ok | (err > ATOL + RTOL * np.abs(e))
    if not bad.any():
        return None
    worst = float(err[bad].max()) if nan_ok.all() else float("nan")
    return worst, "%d of %d elements out of tolerance" % (bad.sum(), bad.size)


def data_sets(model_dir):
    """The model's test_data_set_* folders, in order."""
    return sorted(d for d in os.listdir(model_dir)
                  if d.startswith("test_data_set_") and
                  os.path.isdir(os.path.join(model_dir, d)))


def write_inputs(inputs, data, bound, tmp, data_set):
    """Writes each fed input of data set `data` as .npy; returns the
    `--input NAME=FILE.npy` flags (inputs bound at import are left out)."""
    import numpy as np
    flags = []
    for idx, inp in enumerate(inputs):
        pb = os.path.join(data, "input_%d.pb" % idx)
        if not os.path.isfile(pb) or inp.name in bound:
            continue
        npy = os.path.join(tmp, "%s_input_%d.npy" % (data_set, idx))
        if not os.path.isfile(npy):
            np.save(npy, read_pb(pb, inp))
        flags += ["--input", "%s=%s" % (inp.name, npy)]
    return flags


def check_outputs(outputs, data, data_set, model_dir, result_file):
    """Compares every expected output of data set `data` with the result
    file `result_file(name)` (None: missing). Returns (status, message,
    max_error) with status "pass", "fail" or "missing"."""
    import numpy as np
    worst = 0.0
    random_mask = os.path.basename(model_dir) in RANDOM_MASK_TESTS
    random_draw = os.path.basename(model_dir) in RANDOM_DRAW_TESTS
    for idx, out in enumerate(outputs):
        pb = os.path.join(data, "output_%d.pb" % idx)
        if not os.path.isfile(pb):
            continue
        expected = read_pb(pb, out)
        got_path = result_file(out.name)
        if got_path is None or not os.path.isfile(got_path):
            return "missing", "%s: no result for output '%s'" % (
                data_set, out.name), 0.0
        got = np.load(got_path)
        bad = compare(expected, got, random_mask, random_draw)
        if bad is not None:
            return "fail", "%s output '%s': %s, max error %.3g" % (
                data_set, out.name, bad[1], bad[0]), bad[0]
        if (expected.dtype.kind == "f" and expected.size and
                not (random_mask or random_draw)):
            with np.errstate(invalid="ignore"):
                e = np.abs(expected.astype(np.float64) -
                           got.astype(np.float64))
            e = e[~np.isnan(e)]
            if e.size:
                worst = max(worst, float(e.max()))
    return "pass", "", worst


def run_numbers(loomc, interp, path, timeout, only=None, imported=None):
    """Runs loom-interp on every test data set of the model at `path`;
    `only` names the inputs to bind (see needed_bindings). `imported`:
    run_one's import ({"flags", "mlir"}), used for a data set whose
    bindings are those flags instead of importing the model again (the
    same loomc command: the same module).

    Returns (status, message, max_error): status "pass", "fail" (numbers
    differ), "error" (loom-interp or the re-import failed) or "nodata".
    """
    import onnx
    model_dir = os.path.dirname(path)
    sets = data_sets(model_dir)
    if not sets:
        return "nodata", "no test_data_set_*", 0.0
    model = onnx.load(path, load_external_data=False)
    inputs = graph_inputs(model)
    outputs = list(model.graph.output)
    worst = 0.0
    tmp = tempfile.mkdtemp(prefix="loom-conformance-")
    try:
        for data_set in sets:
            data = os.path.join(model_dir, data_set)
            # Bound inputs are constants of the imported model: import again
            # for each data set, with that data set's values.
            binds = bindings(path, data_set, only)
            bound = {b.split("=", 2)[1] for b in binds}
            if imported and imported["flags"] == binds:
                mlir = imported["mlir"]
            else:
                mlir = os.path.join(tmp, "m.mlir")
                try:
                    proc = subprocess.run([loomc, path, "-o", mlir] + binds,
                                          capture_output=True, text=True,
                                          timeout=timeout)
                except subprocess.TimeoutExpired:
                    return "error", "%s: loomc timed out" % data_set, 0.0
                if proc.returncode != 0:
                    return "error", "%s: loomc: %s" % (
                        data_set, proc.stderr.strip()[-300:]), 0.0
            out_dir = os.path.join(tmp, "out_" + data_set)
            cmd = [interp, mlir, "--entry=forward", "--output-dir", out_dir]
            cmd += write_inputs(inputs, data, bound, tmp, data_set)
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                return "error", "%s: loom-interp timed out" % data_set, 0.0
            if proc.returncode != 0:
                errors = [l for l in proc.stderr.splitlines()
                          if "error" in l]
                return "error", "%s: %s" % (
                    data_set, (errors[0] if errors else
                               proc.stderr.strip()[-300:])), 0.0
            status, message, err = check_outputs(
                outputs, data, data_set, model_dir,
                lambda name: os.path.join(out_dir, sanitize(name) + ".npy"))
            if status == "missing":
                return "error", message, 0.0
            if status == "fail":
                return "fail", message, err
            worst = max(worst, err)
        return "pass", "", worst
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_sanitize(name):
    """loom-run's file name for an output called `name` (docs/loom-run.md)."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if not s or s.startswith("."):
        s = "_" + s
    return s[:200]


def run_output_files(artifact, out_dir, entry="forward"):
    """Output name -> the .npy file loom-run writes for it: sanitized, and
    a name that collides with an earlier one gets -2, -3, ..."""
    with open(os.path.join(artifact, "plan.json")) as f:
        plan = json.load(f)
    files, used = {}, set()
    for e in plan["entries"]:
        if e["name"] != entry:
            continue
        for out in e["outputs"]:
            base = file = run_sanitize(out["name"])
            n = 2
            while file in used:
                file = "%s-%d" % (base, n)
                n += 1
            used.add(file)
            files.setdefault(out["name"], os.path.join(out_dir, file + ".npy"))
    return files


def first_error(stderr, tool):
    """The first diagnostic line of a failed tool, for the report."""
    lines = [l for l in stderr.splitlines() if "error" in l and
             not l.startswith("loomc: error: failed to ")]
    text = (lines[0] if lines else stderr.strip()[-300:]).strip()[:400]
    return text if text.startswith(tool + ":") else "%s: %s" % (tool, text)


def run_tool(cmd, timeout, tool):
    """Runs a compiled-path tool. Returns None on success, else (status,
    message) with status CRASH (a signal), HANG (the timeout) or "failed"."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "HANG", "%s timed out after %ds" % (tool, timeout)
    if proc.returncode < 0:
        return "CRASH", "%s: signal %d: %s" % (tool, -proc.returncode,
                                               proc.stderr.strip()[-300:])
    if proc.returncode != 0:
        return "failed", first_error(proc.stderr, tool)
    return None


def run_artifact(loom_run, artifact, flags, out_dir, outputs, data, data_set,
                 model_dir, timeout):
    """loom-run's @forward on one data set (`flags` feed its inputs), checked
    against the data set's expected outputs. Returns (status, message,
    max_error): "pass", "run-fail", "numbers-fail", "CRASH" or "HANG"."""
    bad = run_tool([loom_run, artifact, "--entry=forward", "--output-dir",
                    out_dir] + flags, timeout, "loom-run")
    if bad:
        return ("run-fail" if bad[0] == "failed" else bad[0],
                "%s: %s" % (data_set, bad[1]), 0.0)
    files = run_output_files(artifact, out_dir)
    status, message, err = check_outputs(outputs, data, data_set, model_dir,
                                         files.get)
    if status != "pass":
        return ("run-fail" if status == "missing" else "numbers-fail",
                message, err)
    return "pass", "", err


def stash_deferred(defer, path, tmp, runs):
    """run_compiled's --defer-run: copies the model, its test data sets, the
    artifacts and the input files into defer/<test name>, and writes the
    loom-run commands there (run.json, paths relative to that folder)."""
    model_dir = os.path.dirname(path)
    dest = os.path.join(defer, os.path.basename(model_dir))
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    shutil.copy(path, os.path.join(dest, "model.onnx"))
    entries = []
    for data_set, artifact, flags in runs:
        if not os.path.isdir(os.path.join(dest, data_set)):
            shutil.copytree(os.path.join(model_dir, data_set),
                            os.path.join(dest, data_set))
        art = os.path.basename(artifact)
        if not os.path.isdir(os.path.join(dest, art)):
            shutil.copytree(artifact, os.path.join(dest, art))
        rel = []
        for f in flags:
            if f.startswith(tmp) or "=" + tmp in f:
                name, file = f.split("=", 1) if "=" in f else ("", f)
                shutil.copy(file, os.path.join(dest, os.path.basename(file)))
                f = (name + "=" if name else "") + "{}/" + os.path.basename(file)
            rel.append(f)
        entries.append({"data_set": data_set, "artifact": art, "flags": rel})
    with open(os.path.join(dest, "run.json"), "w") as f:
        json.dump({"test": os.path.basename(model_dir), "runs": entries}, f)


def run_deferred(folder, loom_run, timeout, jobs):
    """Runs what --defer-run stashed in `folder` with `loom_run` and checks
    the outputs as --compiled does. Prints one line per failing model (known:
    with the stated reason of COMPILED_FAILURE_PATTERNS) and a summary;
    returns the number of unexpected failures (crashes and hangs included)."""
    import onnx
    tests = sorted(d for d in os.listdir(folder)
                   if os.path.isfile(os.path.join(folder, d, "run.json")))

    def one(test):
        dest = os.path.join(folder, test)
        spec = json.load(open(os.path.join(dest, "run.json")))
        model = onnx.load(os.path.join(dest, "model.onnx"),
                          load_external_data=False)
        outputs = list(model.graph.output)
        worst = 0.0
        for r in spec["runs"]:
            status, message, err = run_artifact(
                loom_run, os.path.join(dest, r["artifact"]),
                [f.replace("{}", dest) for f in r["flags"]],
                os.path.join(dest, "out_" + r["data_set"]), outputs,
                os.path.join(dest, r["data_set"]), r["data_set"], dest,
                timeout)
            if status != "pass":
                return status, message, err
            worst = max(worst, err)
        return "pass", "", worst

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = dict(zip(tests, pool.map(one, tests)))
    counts = collections.Counter(r[0] for r in results.values())
    unexpected = 0
    for test, (status, message, _) in sorted(results.items()):
        if status == "pass":
            continue
        reason = compiled_reason({"test": test, "compiled_message": message})
        if status in ("CRASH", "HANG") or not reason:
            unexpected += 1
        print("%s %s [%s]: %s" % ("known: " + reason if reason and status not in
                                  ("CRASH", "HANG") else "COMPILED-BUG",
                                  test, status, message))
    print("deferred: %d models run, %d pass, %d numbers-fail, %d run-fail, "
          "%d CRASH, %d HANG, %d unexpected" % (
              len(results), counts["pass"], counts["numbers-fail"],
              counts["run-fail"], counts["CRASH"], counts["HANG"], unexpected))
    return unexpected


# loomc flags of --compiled (main sets them from --target).

def run_compiled(loomc, loom_run, path, timeout, keep=None, only=None,
                 defer=None, target_flags=("--target=cpu",)):
    """Compiles the model at `path` with `target_flags` (loomc's --target
    and the flags that go with it) and runs it with
    loom-run on every test data set; `only` names the inputs to bind (see
    needed_bindings).

    Returns (status, message, max_error): status "pass", "numbers-fail",
    "compile-fail", "run-fail", "CRASH", "HANG" or "nodata". With `keep`, a
    failing model's artifacts and inputs are left in keep/<test name>.
    With `defer` (a folder), nothing runs: the artifacts, inputs and expected
    outputs go to defer/<test name> with the loom-run commands (run.json),
    for run_deferred on another machine (a GPU machine without MLIR); the
    status is then "deferred".
    """
    import onnx
    model_dir = os.path.dirname(path)
    sets = data_sets(model_dir)
    if not sets:
        return "nodata", "no test_data_set_*", 0.0
    model = onnx.load(path, load_external_data=False)
    inputs = graph_inputs(model)
    outputs = list(model.graph.output)
    worst = 0.0
    tmp = tempfile.mkdtemp(prefix="loom-compiled-")
    result = None
    deferred = []  # (data set, artifact, loom-run input flags)
    try:
        artifacts = {}  # bound inputs -> artifact directory
        for data_set in sets:
            data = os.path.join(model_dir, data_set)
            # Bound inputs are constants of the compiled model: compile once
            # per distinct set of bindings (most models: once).
            binds = bindings(path, data_set, only)
            bound = {b.split("=", 2)[1] for b in binds}
            key = tuple(open(b.split("=", 2)[2], "rb").read() for b in binds)
            artifact = artifacts.get(key)
            if artifact is None:
                artifact = os.path.join(tmp, "m%d.loom" % len(artifacts))
                bad = run_tool([loomc, path, "-o", artifact] +
                               list(target_flags) + binds, timeout, "loomc")
                if bad:
                    status = "compile-fail" if bad[0] == "failed" else bad[0]
                    result = (status, "%s: %s" % (data_set, bad[1]), 0.0)
                    return result
                artifacts[key] = artifact
            out_dir = os.path.join(tmp, "out_" + data_set)
            flags = write_inputs(inputs, data, bound, tmp, data_set)
            if defer:
                deferred.append((data_set, artifact, flags))
                continue
            status, message, err = run_artifact(
                loom_run, artifact, flags, out_dir, outputs, data, data_set,
                model_dir, timeout)
            if status != "pass":
                result = (status, message, err)
                return result
            worst = max(worst, err)
        if defer:
            stash_deferred(defer, path, tmp, deferred)
            result = ("deferred", "", 0.0)
            return result
        result = ("pass", "", worst)
        return result
    finally:
        if keep and result is not None and result[0] not in ("pass", "deferred"):
            dest = os.path.join(keep, os.path.basename(model_dir))
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tmp, dest, symlinks=True)
        shutil.rmtree(tmp, ignore_errors=True)


# Expectations files (--expect, --write-expect; docs/onnx-import.md,
# "Expectations files"). One per data set and target: every model that does
# not fully pass, one line each,
#   TEST  STAGE  REASON
# where STAGE is where the model stops, earliest first:
STAGES = ["unsupported", "import-failed", "numbers-fail", "compiled-fail"]
# and REASON (the rest of the line) says why, from the runner's
# classification. A model not listed passes every stage the run checks.
# Blank lines and lines starting with '#' are comments.
STAGE_RANK = {s: i for i, s in enumerate(STAGES + ["pass"])}
WRITTEN_BY = "# Written by onnx_conformance.py --write-expect"


def diagnostic(message):
    """The first line of a tool's diagnostic without the model file and
    node that loomc's start with, or other paths of the data folder or the
    runner's temporary folders (a data folder may itself be temporary), so
    that it reads the same from any checkout."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    text = re.sub(r"^\S*model\.onnx: (node '[^']*': )?error: ", "", text)
    text = re.sub(r"/\S*/loom-(conformance|compiled)-[^/\s]*/", "", text)
    return re.sub(r"/\S*/(model\.onnx)", r"\1", text)


def outcome(r, supported):
    """(stage, reason, detail, ceiling) of one model's results: the stage
    where it stops ("pass" if none); the reason as an expectations file
    states it (the runner's classification); the tool's diagnostic; and the
    rank of the last stage this run checked for the model (a run without
    --compiled, or a model --compiled-filter leaves out, checks no further
    than the numbers)."""
    if r.get("compiled") not in (None, "deferred"):
        ceiling = STAGE_RANK["pass"]
    elif "numbers" in r:
        ceiling = STAGE_RANK["compiled-fail"]
    else:
        ceiling = STAGE_RANK["numbers-fail"]
    unmapped = sorted(set(r["ops"]) - supported)
    ops = "op%s %s" % ("s" if len(unmapped) > 1 else "", ", ".join(unmapped))
    if r["status"] != "imported":
        detail = diagnostic(r["message"])
        if r["status"] == "unsupported":
            return ("unsupported", "unmapped " + ops if unmapped else detail,
                    detail, ceiling)
        if r["status"] in ("CRASH", "HANG"):
            why = r["status"]
        else:
            why = next((reason for pattern, reason in EXPECTED_FAILURES
                        if re.search(pattern, r["message"])), None)
            if why and unmapped:
                why += " (also unmapped %s)" % ops
            elif unmapped:
                why = "fails before the op check; unmapped " + ops
            elif not why:
                why = "unexplained"
        return "import-failed", "%s: %s" % (why, detail), detail, ceiling
    if r.get("numbers", "pass") != "pass":
        detail = diagnostic(r["numbers_message"])
        if r["numbers"] == "nodata":
            return "numbers-fail", "no test data", detail, ceiling
        return ("numbers-fail", EXPECTED_NUMERIC_FAILURES.get(
            r["test"], "unexpected %s: %s" % (r["numbers"], detail)), detail,
            ceiling)
    if r.get("compiled", "pass") not in ("pass", "deferred"):
        detail = diagnostic(r["compiled_message"])
        if r.get("compiled_xfail"):
            why = "open bug (--compiled-xfail): " + detail
        else:
            why = r.get("compiled_reason") or compiled_reason(r) or (
                "unexpected %s: %s" % (r["compiled"], detail))
        return "compiled-fail", why, detail, ceiling
    return "pass", "", "", ceiling


def read_expectations(path):
    """{test: (stage, reason)} of an expectations file."""
    expected = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(None, 2)
            if len(fields) < 2 or fields[1] not in STAGES:
                raise SystemExit("%s:%d: expected 'TEST STAGE REASON' with "
                                 "STAGE one of %s" % (path, n,
                                                      ", ".join(STAGES)))
            if fields[0] in expected:
                raise SystemExit("%s:%d: %s is listed twice" % (
                    path, n, fields[0]))
            expected[fields[0]] = (fields[1],
                                   fields[2] if len(fields) > 2 else "")
    return expected


def folder_digest(folder):
    """SHA-256 over the relative paths and bytes of every file under
    `folder`, in sorted order."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, folder).encode() + b"\0")
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def check_expectations(results, supported, expected, path, complete,
                       skipped=()):
    """Compares each model's outcome with `expected`, read from the
    expectations file `path`.
    Prints NEWLY FAILS for a model that stops earlier than listed (or is
    not listed and does not pass every stage the run checks), NEWLY PASSES
    for one that gets further (a note: the file is out of date), a note for
    a model that stops where listed for another reason, and a summary.
    `complete`: the run had every model of the data (no --filter), so a
    listed model it lacks is reported; `skipped` (--skip-same-as) count as
    present. Returns the number newly failing."""
    same = newly_fails = newly_passes = other_reason = 0
    print()
    for r in results:
        stage, reason, detail, ceiling = outcome(r, supported)
        listed, listed_reason = expected.get(r["test"], ("pass", ""))
        got = min(STAGE_RANK[stage], ceiling)
        want = min(STAGE_RANK[listed], ceiling)
        if got < want:
            newly_fails += 1
            print("NEWLY FAILS %s: %s: %s%s (listed: %s)" % (
                r["test"], stage, reason,
                "" if detail in reason else "; " + detail, listed))
        elif got > want:
            newly_passes += 1
            print("NEWLY PASSES %s (was %s%s): update %s" % (
                r["test"], listed, "" if stage == "pass" else
                "; now stops at " + stage, path))
        else:
            same += 1
            if stage == listed != "pass" and reason != listed_reason:
                other_reason += 1
                print("note: %s stops at %s as listed, for another reason: "
                      "%s (listed: %s): update %s" % (
                          r["test"], stage, reason, listed_reason, path))
    if complete:
        seen = {r["test"] for r in results} | set(skipped)
        for test in sorted(set(expected) - seen):
            print("note: %s is listed in %s but not in the data" % (test,
                                                                     path))
    print("expectations: %d models as expected, %d newly fail, %d newly "
          "pass%s" % (same, newly_fails, newly_passes,
                      " (%d stop where listed for another reason)" %
                      other_reason if other_reason else ""))
    return newly_fails


def write_expectations(results, supported, path, run_flags):
    """Writes the expectations file of this run to `path`. The comment
    lines that open an existing file there (up to the WRITTEN_BY line) are
    kept; a new file gets a default header."""
    header = []
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                if not line.startswith("#") or line.startswith(WRITTEN_BY):
                    break
                header.append(line)
    if not header:
        header = [
            "# Expected outcomes of utils/onnx_conformance.py for one data "
            "set and target.\n",
            "# One line per model that does not pass every stage: TEST  "
            "STAGE  REASON, with\n",
            "# STAGE where it stops (%s: earliest\n" % ", ".join(STAGES),
            "# first). Models not listed pass. Checked with --expect, written "
            "with\n",
            "# --write-expect; see docs/onnx-import.md, \"Expectations "
            "files\".\n"]
    rows = []
    for r in results:
        stage, reason, _, _ = outcome(r, supported)
        if stage != "pass":
            rows.append((r["test"], stage, reason))
    width = max([len(t) for t, _, _ in rows] + [0])

    def count(key, value):
        return sum(r.get(key) == value for r in results)
    with open(path, "w") as f:
        f.writelines(header)
        f.write("%s %s: %d models, %d imported, %d numbers pass, %d compiled "
                "pass, %d listed.\n" % (
                    WRITTEN_BY, run_flags, len(results),
                    count("status", "imported"), count("numbers", "pass"),
                    count("compiled", "pass"), len(rows)))
        for test, stage, reason in rows:
            f.write("%-*s  %-13s  %s\n" % (width, test, stage, reason))
    print("wrote %s: %d models listed" % (path, len(rows)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loomc")
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--json", help="write per-model results here")
    ap.add_argument("--markdown", help="write the summary and per-op tables "
                    "(as in docs/onnx-import.md) here")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--run", action="store_true",
                    help="also run each imported model with loom-interp on "
                         "its test data and compare the outputs")
    ap.add_argument("--interp", help="loom-interp to use with --run "
                    "(default: beside --loomc)")
    ap.add_argument("--filter", help="only models whose test name matches "
                    "this regular expression")
    ap.add_argument("--skip-same-as", metavar="DIR",
                    help="skip a model whose folder is byte for byte the "
                    "same-named folder of the data set DIR (a run over DIR "
                    "checks it)")
    ap.add_argument("--target", default="cpu",
                    help="with --compiled: loomc's --target (cpu, or "
                         "cuda:sm_90 on a GPU, or, with --loomc loomc-emu, "
                         "--target-flags --cuda-emulator-lib=LIB and the "
                         "fake CUDA driver)")
    ap.add_argument("--target-flags", default="",
                    help="with --compiled: more loomc flags")
    ap.add_argument("--also-target", metavar="TARGET",
                    help="with --compiled: compile and run each model for "
                         "this target too, from the same import and "
                         "interpreter run (its results, compiled summary "
                         "and expectations are printed after the first "
                         "target's, under '== also --target=TARGET')")
    ap.add_argument("--also-target-flags", default="",
                    help="with --also-target: its more loomc flags")
    ap.add_argument("--also-expect", metavar="FILE",
                    help="with --also-target: its expectations file")
    ap.add_argument("--compiled", action="store_true",
                    help="also compile each imported model with "
                         "--target=cpu and run it with loom-run on its test "
                         "data (implies --run)")
    ap.add_argument("--loom-run", help="loom-run to use with --compiled "
                    "(default: beside --loomc)")
    ap.add_argument("--compiled-filter", help="with --compiled, compile only "
                    "the models whose test name matches this regular "
                    "expression (the others are still imported and "
                    "interpreted)")
    ap.add_argument("--compiled-xfail", metavar="TEST,...", default="",
                    help="with --compiled, open bugs: these tests' "
                         "unexpected compiled failures are printed as XFAIL "
                         "and do not fail the run, but a listed test that "
                         "passes (XPASS) does, so the list stays current")
    ap.add_argument("--keep-failures", metavar="DIR",
                    help="with --compiled, keep the artifacts and inputs of "
                         "each model whose compiled run fails in DIR/<test>")
    ap.add_argument("--defer-run", metavar="DIR",
                    help="with --compiled, compile only: stash each model's "
                         "artifacts, inputs and expected outputs in DIR/<test> "
                         "for --run-deferred on another machine (e.g. a GPU "
                         "machine without MLIR)")
    ap.add_argument("--expect", metavar="FILE",
                    help="compare each model's outcome with the expectations "
                         "file FILE: a model that stops at an earlier stage "
                         "than listed (NEWLY FAILS) fails the run")
    ap.add_argument("--write-expect", metavar="FILE",
                    help="write this run's expectations file to FILE (every "
                         "model that does not pass, with its stage and "
                         "reason), for review")
    ap.add_argument("--run-deferred", metavar="DIR",
                    help="run what --defer-run stashed in DIR with --loom-run "
                         "and compare (needs only loom-run, onnx and numpy)")
    args = ap.parse_args()
    if args.run_deferred:
        if args.expect or args.write_expect:
            ap.error("--expect and --write-expect check a run, not "
                     "--run-deferred")
        if not args.loom_run:
            ap.error("--run-deferred needs --loom-run")
        return 1 if run_deferred(args.run_deferred, args.loom_run,
                                 args.timeout, args.jobs) else 0
    if not args.loomc:
        ap.error("--loomc is required")
    if args.write_expect and (args.filter or args.compiled_filter or
                              args.defer_run or args.skip_same_as):
        ap.error("--write-expect needs a whole run: no --filter, "
                 "--compiled-filter, --defer-run or --skip-same-as")
    # Read before the run, so that a bad file fails in a second, not after it.
    expected = None
    if args.expect:
        try:
            expected = read_expectations(args.expect)
        except OSError as e:
            ap.error("--expect: %s" % e)
    if args.also_target and not args.compiled:
        ap.error("--also-target needs --compiled")
    if args.also_target and (args.write_expect or args.defer_run):
        ap.error("--also-target checks a run of two targets: no "
                 "--write-expect or --defer-run (run one target at a time)")
    if args.also_expect and not args.also_target:
        ap.error("--also-expect needs --also-target")
    also_expected = None
    if args.also_expect:
        try:
            also_expected = read_expectations(args.also_expect)
        except OSError as e:
            ap.error("--also-expect: %s" % e)
    targets = [["--target=" + args.target] + args.target_flags.split()]
    if args.also_target:
        targets.append(["--target=" + args.also_target] +
                       args.also_target_flags.split())
    if args.compiled:
        args.run = True
        if not args.loom_run:
            args.loom_run = os.path.join(os.path.dirname(args.loomc),
                                         "loom-run")
    if args.run and not args.interp:
        args.interp = os.path.join(os.path.dirname(args.loomc), "loom-interp")

    models = []
    skipped = []
    for suite in SUITES:
        d = os.path.join(args.data, suite)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name, "model.onnx")
            if not os.path.isfile(p) or (args.filter and
                                         not re.search(args.filter, name)):
                continue
            if args.skip_same_as:
                twin = os.path.join(args.skip_same_as, suite, name)
                if os.path.isdir(twin) and (folder_digest(twin) ==
                                            folder_digest(os.path.dirname(p))):
                    skipped.append(name)
                    continue
            models.append((suite, name, p))
    if args.skip_same_as:
        print("skipped %d models identical to %s's" % (len(skipped),
                                                       args.skip_same_as))
    if not models:
        print("no models found under %s" % args.data, file=sys.stderr)
        return 2

    supported = supported_ops(args.loomc)
    results = []
    def work(path):
        # With --run the import is written to a file, which run_numbers
        # reuses for the data set it binds alike (most models: every one).
        tmp = tempfile.mkdtemp(prefix="loom-conformance-") if args.run \
            else None
        try:
            return work_in(path, tmp)
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)

    def work_in(path, tmp):
        imported = {}
        status, message = run_one(
            args.loomc, path, args.timeout,
            os.path.join(tmp, "import.mlir") if tmp else "-", imported)
        numbers = only = None
        compiled = []
        if args.run and status == "imported":
            try:
                only = needed_bindings(args.loomc, path, args.timeout)
                numbers = run_numbers(args.loomc, args.interp, path,
                                      args.timeout, only, imported)
            except Exception as e:  # bad test data: report, don't stop
                numbers = ("error", "runner: %s" % e, 0.0)
        name = os.path.basename(os.path.dirname(path))
        if args.compiled and status == "imported" and (
                not args.compiled_filter or
                re.search(args.compiled_filter, name)):
            for flags in targets:
                try:
                    compiled.append(run_compiled(
                        args.loomc, args.loom_run, path, args.timeout,
                        args.keep_failures, only, args.defer_run, flags))
                except Exception as e:
                    compiled.append(("run-fail", "runner: %s" % e, 0.0))
        return status, message, numbers, compiled, only

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(work, p): (s, n, p) for s, n, p in models}
        done = 0
        for fut in concurrent.futures.as_completed(futs):
            suite, name, path = futs[fut]
            status, message, numbers, compiled, only = fut.result()
            try:
                ops = op_types(path)
            except Exception as e:  # the model itself does not parse
                ops = ["<unparsable>"]
            results.append(dict(suite=suite, test=name, status=status,
                                ops=ops, message=message))
            if numbers is not None:
                results[-1].update(numbers=numbers[0],
                                   numbers_message=numbers[1],
                                   max_error=numbers[2])
            if only:
                results[-1]["bound_inputs"] = sorted(only)
            for i, c in enumerate(compiled):
                fields = dict(compiled=c[0], compiled_message=c[1],
                              compiled_max_error=c[2])
                if i == 0:
                    results[-1].update(fields)
                else:
                    results[-1]["also"] = fields
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
    numbers_bugs = report_numbers(results, args.compiled) if args.run else []
    xfail = {t for t in args.compiled_xfail.split(",") if t}
    compiled_bugs = report_compiled(results, xfail) if args.compiled else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown_tables(results, supported))
    print("\n%d passed, %d failed" % (len(results) - len(bad) - len(unexplained),
                                      len(bad) + len(unexplained)))
    if args.run:
        ran = [r for r in results if "numbers" in r]
        print("numbers: %d models run, %d pass, %d fail (%d expected), "
              "%d unexpected" % (
                  len(ran), sum(r["numbers"] == "pass" for r in ran),
                  sum(r["numbers"] in ("fail", "error") for r in ran),
                  sum(r["numbers"] in ("fail", "error") and
                      r["test"] in EXPECTED_NUMERIC_FAILURES for r in ran),
                  len(numbers_bugs)))
    if args.compiled:
        print_compiled_summary(results, compiled_bugs)
    newly_fail = 0
    if args.expect:
        newly_fail = check_expectations(results, supported, expected,
                                        args.expect, complete=not args.filter,
                                        skipped=skipped)
    if args.also_target:
        # The second target's view: the same import and interpreter results,
        # its own compiled ones.
        print("\n== also --target=%s" % args.also_target)
        view = []
        for r in results:
            v = {k: x for k, x in r.items()
                 if not k.startswith("compiled") and k != "also"}
            v.update(r.get("also", {}))
            view.append(v)
        also_bugs = report_compiled(view, xfail)
        compiled_bugs = compiled_bugs + also_bugs
        print_compiled_summary(view, also_bugs)
        if also_expected is not None:
            newly_fail += check_expectations(view, supported, also_expected,
                                             args.also_expect,
                                             complete=not args.filter,
                                             skipped=skipped)
    if args.write_expect:
        write_expectations(results, supported, args.write_expect,
                           "--compiled --target=" + args.target
                           if args.compiled else
                           "--run" if args.run else "(import only)")
    return 1 if (bad or unexplained or numbers_bugs or compiled_bugs or
                 newly_fail) else 0


def markdown_tables(results, supported):
    """The summary and per-op tables of docs/onnx-import.md, in Markdown."""
    def count(rs, key, value):
        return sum(r.get(key) == value for r in rs)
    lines = ["| models | imported | unsupported op | failed (stated reason) | "
             "crash / hang | interpreter numbers pass | compiled pass |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
             "| %d | %d | %d | %d | %d | %d | %d |" % (
                 len(results), count(results, "status", "imported"),
                 count(results, "status", "unsupported"),
                 count(results, "status", "failed"),
                 count(results, "status", "CRASH") +
                 count(results, "status", "HANG"),
                 count(results, "numbers", "pass"),
                 count(results, "compiled", "pass")),
             "",
             "| op | models | imported | unsupported (another op) | failed "
             "(stated reason) | interpreter pass | compiled pass |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    by_op = collections.defaultdict(list)
    for r in results:
        for op in r["ops"]:
            by_op[op].append(r)
    for op in sorted(by_op):
        if op not in supported:
            continue
        rs = by_op[op]
        lines.append("| %s | %d | %d | %d | %d | %d | %d |" % (
            op, len(rs), count(rs, "status", "imported"),
            count(rs, "status", "unsupported"), count(rs, "status", "failed"),
            count(rs, "numbers", "pass"), count(rs, "compiled", "pass")))
    missing = sorted(op for op in by_op if op not in supported)
    lines += ["", "ONNX ops in the test data that Loom does not map yet "
              "(%d): %s." % (len(missing), ", ".join(missing)), ""]
    return "\n".join(lines)


COMPILED_COLS = ["pass", "numbers-fail", "compile-fail", "run-fail", "CRASH",
                 "HANG", "nodata"]


def report_numbers(results, compiled=False):
    """Prints the numerics table and failures; returns the unexpected ones.
    With `compiled`, the table has the compiled results beside the
    interpreter's."""
    ran = [r for r in results if "numbers" in r]
    table = collections.defaultdict(collections.Counter)
    ctable = collections.defaultdict(collections.Counter)
    for r in ran:
        for op in r["ops"]:
            table[op][r["numbers"]] += 1
            if "compiled" in r:
                ctable[op][r["compiled"]] += 1
    print("\nnumerics (loom-interp vs. the test data, rtol=%g atol=%g):" %
          (RTOL, ATOL))
    head = "%-28s %6s %6s %6s %7s" % ("op", "pass", "fail", "error", "nodata")
    if compiled:
        print("%-28s %-28s | %s" % ("", "interpreter", "compiled "
                                    "(loomc --target=cpu + loom-run)"))
        head += "  | %6s %8s %8s %8s %5s %4s %6s" % (
            "pass", "numbers", "compile", "run", "CRASH", "HANG", "nodata")
    print(head)
    for op in sorted(table):
        c = table[op]
        line = "%-28s %6d %6d %6d %7d" % (op, c["pass"], c["fail"],
                                          c["error"], c["nodata"])
        if compiled:
            line += "  | %6d %8d %8d %8d %5d %4d %6d" % tuple(
                ctable[op][k] for k in COMPILED_COLS)
        print(line)
    unexpected = []
    for r in ran:
        if r["numbers"] not in ("fail", "error"):
            continue
        known = EXPECTED_NUMERIC_FAILURES.get(r["test"])
        tag = "known: " + known if known else "NUMBERS"
        print("%s %s/%s [%s, max error %.3g]: %s" % (
            tag, r["suite"], r["test"], r["numbers"], r["max_error"],
            r["numbers_message"]))
        if not known:
            unexpected.append(r)
    return unexpected


def print_compiled_summary(results, bugs):
    """Prints the 'compiled: ...' counts line of one target's results."""
    comp = [r for r in results if "compiled" in r]
    counts = collections.Counter(r["compiled"] for r in comp)
    print("compiled: %d models run, " % len(comp) +
          ", ".join("%d %s" % (counts[k], k) for k in COMPILED_COLS) +
          " (%d expected, %d open bugs), %d unexpected" % (
              sum(r.get("compiled_known", False) for r in comp),
              sum(r.get("compiled_xfail", False) for r in comp),
              len(bugs)) +
          (", %d deferred (not run: --defer-run)" % counts["deferred"]
           if counts["deferred"] else ""))


def compiled_reason(r):
    """The stated reason of an expected compiled failure, or None."""
    if r["test"] in EXPECTED_COMPILED_FAILURES:
        return EXPECTED_COMPILED_FAILURES[r["test"]]
    for pattern, reason in COMPILED_FAILURE_PATTERNS:
        if re.search(pattern, r["compiled_message"]):
            return reason
    return None


def report_compiled(results, xfail=()):
    """Prints the compiled failures; returns the unexpected ones: every
    crash or hang, every other failure of a model whose interpreter numbers
    pass that EXPECTED_COMPILED_FAILURES does not explain, and every test of
    `xfail` (open bugs) that no longer fails."""
    unexpected = []
    print()
    for r in results:
        if r["test"] in xfail and r.get("compiled") == "pass":
            print("XPASS %s/%s: listed in --compiled-xfail but passes now: "
                  "remove it from the list" % (r["suite"], r["test"]))
            unexpected.append(r)
            continue
        if r.get("compiled", "pass") in ("pass", "nodata", "deferred"):
            continue
        reason = compiled_reason(r)
        if r["compiled"] in ("CRASH", "HANG"):
            tag = "COMPILED-BUG"
        elif reason:
            tag = "known: " + reason
            r["compiled_known"] = True
            r["compiled_reason"] = reason
        elif r.get("numbers") != "pass":
            tag = "known: the interpreter fails too (%s)" % r.get("numbers")
            r["compiled_known"] = True
            r["compiled_reason"] = "interpreter numbers %s" % r.get("numbers")
        elif r["test"] in xfail:
            tag = "XFAIL (open bug)"
            r["compiled_xfail"] = True
        else:
            tag = "COMPILED"
        print("%s %s/%s [%s, max error %.3g]: %s" % (
            tag, r["suite"], r["test"], r["compiled"],
            r["compiled_max_error"], r["compiled_message"]))
        if tag.startswith("COMPILED"):
            unexpected.append(r)
    return unexpected


if __name__ == "__main__":
    sys.exit(main())
