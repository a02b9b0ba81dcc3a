#!/usr/bin/env python3
"""Compiled code against the reference interpreter, on whole models.

The artifact is for the CPU by default; --target=cuda:sm_90 checks the CUDA
target (on a GPU, or on the host through the GPU emulator, see
test/e2e/cuda-emulated.test).

For each model: `loomc --train` writes the training IR (the interpreter's
input) and `loomc --train --target=cpu` the artifact (what loom-run runs), from
the same flags. On the same random batch:

1. every entry of the artifact that the batch can feed (`forward_backward`,
   `predict`, `forward`, `train_step`) gives, output by output, what
   `loom-interp` gives on the training IR (norm-wise relative error, see
   TOL);
2. a training trajectory: STEPS calls of `train_step` chained by the test
   through loom-interp, against `loom-run --train` on a data set of exactly
   one batch (the same batch every step; the runtime permutes the samples
   inside it, which leaves the mean loss and its gradients unchanged up to
   rounding). The final parameters and losses must agree.

The interpreter accumulates in double and rounds each op's result to f32; the
kernels compute in f32 with another summation order, so agreement is to
about 1e-6 relative per op. The tolerances below allow for that over a whole
step, and fail on any real mistake (a wrong index, a missing term).
Exit status 0 when every check passes; the failures are printed.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

TOL = 2e-4        # norm-wise relative error of one entry's outputs
TRAJ_TOL = 2e-3   # of parameters after the trajectory
STEPS = 5

NP_DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64,
             "i32": np.int32, "i8": np.int8, "bool": np.bool_}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" % (
            r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    names = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
             "I32": np.int32}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=names[v["dtype"]]).reshape(
            v["shape"])
    return out


def write_safetensors(path, tensors):
    names = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
             np.dtype(np.int64): "I64", np.dtype(np.int32): "I32"}
    header, blobs, at = {}, [], 0
    for k in sorted(tensors):
        t = np.asarray(tensors[k], order="C")  # keeps 0-D tensors 0-D
        b = t.tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape),
                     "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rel_err(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = max(np.abs(want).max(initial=0.0), 1e-6)
    return float(np.abs(got - want).max(initial=0.0) / scale)


def entry_inputs(plan, entry):
    for e in plan["entries"]:
        if e["name"] == entry:
            return [(i, e["buffers"][i["buffer"]]) for i in e["inputs"]], e
    return None, None


def make_batch(plan, rng, int_high):
    """Random values for the data inputs of train_step."""
    inputs, _ = entry_inputs(plan, "train_step")
    batch = {}
    for binding, buf in inputs:
        if binding["kind"] != "input" or binding["name"] in ("step", "seed"):
            continue
        dt = NP_DTYPES[buf["dtype"]]
        shape = buf["shape"]
        if np.issubdtype(dt, np.integer):
            batch[binding["name"]] = rng.integers(0, int_high, shape).astype(dt)
        else:
            batch[binding["name"]] = rng.standard_normal(shape).astype(dt)
    return batch


def feed_args(inputs, files, work):
    feed = []
    for binding, _ in inputs:
        if binding["kind"] == "input" and binding["name"] in files:
            feed += ["--input", "%s=%s" % (binding["name"],
                                           os.path.join(work, files[binding["name"]]))]
    return feed


def prepare_model(args, model, flags, work):
    """Everything that needs the compiler and the interpreter: the artifact,
    the batch, every entry's interpreter outputs and the interpreter's
    trajectory. Returns the model's manifest (paths relative to WORK), which
    check_model runs against loom-run, here or on another machine."""
    name = os.path.splitext(os.path.basename(model))[0]
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    ir = os.path.join(d, "train.mlir")
    art = os.path.join(d, "train.loom")
    run([args.loomc, model, "--train"] + flags + ["-o", ir])
    run([args.loomc, model, "--train"] + flags +
        ["--target=" + args.target, "-o", art] + args.target_flags.split())
    plan = json.load(open(os.path.join(art, "plan.json")))
    rng = np.random.default_rng(0)
    batch = make_batch(plan, rng, args.int_high)
    files = {}
    for k, v in batch.items():
        files[k] = os.path.join(name, k + ".npy")
        np.save(os.path.join(work, files[k]), v)
    files["step"] = os.path.join(name, "step.npy")
    np.save(os.path.join(work, files["step"]), np.array(0, np.int64))
    manifest = {"name": name, "artifact": os.path.join(name, "train.loom"),
                "entries": []}

    for entry in ("forward_backward", "predict", "forward", "train_step"):
        inputs, _ = entry_inputs(plan, entry)
        if inputs is None:
            continue
        oi = os.path.join(name, entry + ".interp")
        run([args.loom_interp, ir, "--entry=" + entry, "--output-dir",
             os.path.join(work, oi)] + feed_args(inputs, files, work))
        manifest["entries"].append({"entry": entry, "interp": oi,
                                    "feed": {b["name"]: files[b["name"]]
                                             for b, _ in inputs
                                             if b["kind"] == "input"
                                             and b["name"] in files}})

    # The trajectory: STEPS train_steps on the same batch.
    inputs, _ = entry_inputs(plan, "train_step")
    state = read_safetensors(os.path.join(art, "params.safetensors"))
    losses = []
    for step in range(STEPS):
        params = os.path.join(d, "traj.safetensors")
        write_safetensors(params, state)
        np.save(os.path.join(work, files["step"]), np.array(step, np.int64))
        out = os.path.join(d, "traj%d" % step)
        run([args.loom_interp, ir, "--entry=train_step", "--params", params,
             "--output-dir", out] + feed_args(inputs, files, work))
        losses.append(float(np.load(os.path.join(out, "loss.npy"))))
        for k in list(state):
            f = os.path.join(out, k + ".npy")
            if os.path.exists(f):
                state[k] = np.load(f)
    np.save(os.path.join(work, files["step"]), np.array(0, np.int64))
    np.savez(os.path.join(d, "one_batch.npz"), **batch)
    write_safetensors(os.path.join(d, "interp_final.safetensors"), state)
    manifest["trajectory"] = {"data": os.path.join(name, "one_batch.npz"),
                              "losses": losses,
                              "final": os.path.join(name,
                                                    "interp_final.safetensors")}
    return manifest


def check_model(args, m, work):
    """loom-run on the prepared artifact against the interpreter's numbers."""
    name = m["name"]
    d = os.path.join(work, name)
    art = os.path.join(work, m["artifact"])
    failures = []
    for e in m["entries"]:
        entry = e["entry"]
        feed = []
        for k, f in sorted(e["feed"].items()):
            feed += ["--input", "%s=%s" % (k, os.path.join(work, f))]
        oc = os.path.join(d, entry + ".compiled")
        oi = os.path.join(work, e["interp"])
        run([args.loom_run, art, "--entry=" + entry, "--output-dir", oc] + feed)
        for f in sorted(os.listdir(oi)):
            want = np.load(os.path.join(oi, f))
            path = os.path.join(oc, f)
            if not os.path.exists(path):
                failures.append("%s @%s: no compiled output %s" % (name, entry, f))
                continue
            err = rel_err(np.load(path), want)
            status = "ok" if err <= TOL else "FAIL"
            print("%-18s @%-16s %-28s rel err %.2e  %s" % (name, entry, f, err,
                                                           status))
            if err > TOL:
                failures.append("%s @%s %s: rel err %.3g > %g" % (
                    name, entry, f, err, TOL))

    t = m["trajectory"]
    losses = t["losses"]
    state = read_safetensors(os.path.join(work, t["final"]))
    metrics = os.path.join(d, "metrics.jsonl")
    final = os.path.join(d, "final.safetensors")
    if os.path.exists(metrics):
        os.remove(metrics)
    run([args.loom_run, art, "--train", "--data", os.path.join(work, t["data"]),
         "--steps", str(len(losses)), "--metrics", metrics,
         "--save-params", final, "--progress=none"])
    compiled_losses = [json.loads(l)["loss"] for l in open(metrics)
                       if '"loss"' in l and '"eval' not in l][:len(losses)]
    err = rel_err(compiled_losses, losses)
    print("%-18s trajectory losses %s vs %s rel err %.2e" % (
        name, np.round(compiled_losses, 5).tolist(), np.round(losses, 5).tolist(),
        err))
    if err > TRAJ_TOL:
        failures.append("%s trajectory losses: rel err %.3g" % (name, err))
    got = read_safetensors(final)
    for k, v in got.items():
        e = rel_err(v, state[k])
        if e > TRAJ_TOL:
            failures.append("%s trajectory param %s: rel err %.3g > %g" % (
                name, k, e, TRAJ_TOL))
    print("%-18s trajectory params: %d tensors, max rel err %.2e" % (
        name, len(got), max(rel_err(v, state[k]) for k, v in got.items())))
    return failures


def main():
    global TOL, TRAJ_TOL
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--loomc")
    p.add_argument("--loom-run")
    p.add_argument("--loom-interp")
    p.add_argument("--work", required=True)
    p.add_argument("--phase", choices=("all", "prepare", "check"),
                   default="all",
                   help="prepare: compile and run the interpreter only, "
                        "writing WORK/manifest.json (needs --loomc and "
                        "--loom-interp); check: run loom-run on a prepared "
                        "WORK, possibly copied to another machine (needs "
                        "--loom-run); all: both")
    p.add_argument("--int-high", type=int, default=4,
                   help="integer inputs (labels, token ids) are drawn from "
                        "[0, int-high)")
    p.add_argument("--flags", default="--loss=cross_entropy --optimizer=momentum --lr=0.05",
                   help="loomc training flags")
    p.add_argument("--target", default="cpu",
                   help="loomc --target of the artifact (cpu, cuda:sm_90, ...)")
    p.add_argument("--target-flags", default="",
                   help="more loomc flags for the artifact, e.g. "
                        "--cuda-emulator-lib=LIB with --loomc loomc-emu "
                        "(then run with the fake "
                        "CUDA driver: LOOMRT_CUDA_DRIVER and "
                        "LOOMRT_CUBLASLT_LIBRARY in the environment)")
    p.add_argument("--tol", type=float, default=TOL,
                   help="norm-wise relative tolerance of each entry's outputs")
    p.add_argument("--traj-tol", type=float, default=TRAJ_TOL,
                   help="of the parameters after the trajectory (bf16 "
                        "models, whose rounding is 2^-8, need about 1e-2)")
    p.add_argument("models", nargs="*")
    args = p.parse_args()
    TOL, TRAJ_TOL = args.tol, args.traj_tol
    need = {"prepare": ("loomc", "loom_interp"), "check": ("loom_run",),
            "all": ("loomc", "loom_interp", "loom_run")}[args.phase]
    for n in need:
        if not getattr(args, n):
            p.error("--phase=%s needs --%s" % (args.phase, n.replace("_", "-")))
    if args.phase != "check" and not args.models:
        p.error("no models")
    os.makedirs(args.work, exist_ok=True)
    manifest_path = os.path.join(args.work, "manifest.json")
    if args.phase == "check":
        manifests = json.load(open(manifest_path))
    else:
        manifests = [prepare_model(args, m, args.flags.split(), args.work)
                     for m in args.models]
        with open(manifest_path, "w") as f:
            json.dump(manifests, f, indent=1)
    if args.phase == "prepare":
        print("prepared %d models in %s" % (len(manifests), args.work))
        return 0
    failures = []
    for m in manifests:
        failures += check_model(args, m, args.work)
    if failures:
        print("\n".join(["FAILURES:"] + failures))
        return 1
    print("all outputs match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
