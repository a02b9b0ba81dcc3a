#!/usr/bin/env python3
"""Benchmarks one training step (forward, backward, AdamW update) of the
example models in Loom, JAX and PyTorch on the CPU.

Usage (from the repository root, with the set-up script's .venv):
  .venv/bin/python bench/run.py [--quick] [--models mlp,cnn,transformer_block]
      [--frameworks loom,jax,torch] [--steps N] [--warmup W] [--repeat R]
      [--loomc build/bin/loomc] [--loom-run build/bin/loom-run]
      [--workdir out/bench] [--json FILE] [--markdown]

Every framework trains the same ONNX model (examples/onnx/NAME.onnx: same
shapes, same initial weights, read from the ONNX initializers) with mean
softmax cross-entropy and AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight
decay 0.01) on the same random data (NAME.npz in the work folder: inputs
named like the model's, and `labels`: one batch, used at every step, so that
loom-run's shuffling, which only permutes the samples inside it, changes
nothing, and every framework computes the same losses):

- loom:  `loomc --train --target=cpu` compiles the step; `loom-run --train`
         runs it; ms/step comes from its --metrics file, warm-up steps left out.
- jax:   the ONNX graph evaluated by test/e2e/train_vs_jax.py's evaluator,
         value_and_grad + AdamW in one jax.jit; the first (compiling) call and
         the warm-up steps left out.
- torch: the ONNX graph evaluated by bench/onnx_torch.py, eager autograd,
         torch.optim.AdamW; warm-up steps left out.

Each framework runs in a subprocess of its own, so the peak RSS (ru_maxrss
from wait4) is that framework's alone; it includes the interpreter and the
framework's libraries. ms/step is the median over the timed steps; each
model and framework runs --repeat times (interleaved) and the fastest run is
kept, since other work on a 2-core machine only ever slows a run down. The loss
of the first step is compared across frameworks (same weights and data) as a
check that they train the same thing. Frameworks that are not installed
(e.g. torch, or loomc/loom-run not built or without --train) are reported as
skipped, not failed.

Internal: `run.py --worker jax|torch ...` is the subprocess side.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["mlp", "cnn", "transformer_block"]
FRAMEWORKS = ["loom", "jax", "torch"]
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.01
# Random batches in the data file, cycled. One: loom-run shuffles the samples
# of its data file (docs/loom-run.md), and the mean loss of one batch does not
# depend on the order of its samples, so all frameworks see the same steps.
N_BATCHES = 1


# --------------------------------------------------------------------------
# Data and model facts (orchestrator side; needs only onnx and numpy)
# --------------------------------------------------------------------------


def model_io(model):
    """(inputs [(name, shape, is_int)], logits shape)."""
    import onnx
    inits = {i.name for i in model.graph.initializer}
    ins = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        ins.append((i.name, [d.dim_value for d in t.shape.dim],
                    t.elem_type == onnx.TensorProto.INT64))
    out = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    return ins, out


def make_data(model, path, seed=0):
    """Writes N_BATCHES batches of random inputs and labels (first dim =
    samples) to PATH; returns the batch size."""
    ins, out = model_io(model)
    batch = ins[0][1][0]
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, shape, is_int in ins:
        shape = [batch * N_BATCHES] + shape[1:]
        if is_int:
            # Token ids: below the vocabulary (the logits' class count).
            arrays[name] = rng.integers(0, out[-1], size=shape).astype(np.int64)
        else:
            arrays[name] = rng.standard_normal(shape).astype(np.float32)
    arrays["labels"] = rng.integers(0, out[-1], size=[batch * N_BATCHES] + out[1:-1]) \
        .astype(np.int64)
    np.savez(path, **arrays)
    return batch


def batch_slices(data, batch):
    """The data file cut into its N_BATCHES batches, as dicts of arrays."""
    return [{k: v[i * batch:(i + 1) * batch] for k, v in data.items()}
            for i in range(N_BATCHES)]


def summarize(step_times, batch):
    ms = [t * 1e3 for t in step_times]
    med = statistics.median(ms)
    return {"ms_per_step": med, "ms_mean": statistics.fmean(ms),
            "ms_min": min(ms), "samples_per_s": batch / med * 1e3,
            "timed_steps": len(ms)}


def peak_rss_mib(usage):
    return usage.ru_maxrss / 1024.0  # Linux: KiB


# --------------------------------------------------------------------------
# Workers (each runs in its own process)
# --------------------------------------------------------------------------


def worker_jax(model_path, data_path, steps, warmup):
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    import jax
    import jax.numpy as jnp
    import onnx
    from onnx import numpy_helper
    from train_vs_jax import adamw, cross_entropy, evaluate

    model = onnx.load(model_path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    params = {k: jnp.asarray(v) for k, v in inits.items()
              if v.dtype.kind == "f" and v.ndim >= 1}
    # Constants stay numpy arrays, and Constant nodes become such constants
    # before tracing: under jax.jit, the evaluator's jnp.asarray of a Constant
    # node would be a tracer, and Reshape/Split need concrete shapes.
    consts = {k: v for k, v in inits.items() if k not in params}
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    for n in model.graph.node:
        if n.op_type == "Constant":
            value = onnx.helper.get_attribute_value(n.attribute[0])
            consts[n.output[0]] = numpy_helper.to_array(value)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    ins, _ = model_io(model)
    batch = ins[0][1][0]
    batches = [{k: jnp.asarray(v) for k, v in b.items()}
               for b in batch_slices(dict(np.load(data_path)), batch)]

    def loss_fn(p, feed):
        env = {**consts, **{n: feed[n] for n, _, _ in ins}, **p}
        return cross_entropy(evaluate(model, env)[0], feed["labels"])

    @jax.jit
    def train_step(p, s, step, feed):
        loss, g = jax.value_and_grad(loss_fn)(p, feed)
        p, s = adamw(p, g, s, step, LR, BETA1, BETA2, EPS, WD)
        return loss, p, s

    state = {k: (jnp.zeros_like(v), jnp.zeros_like(v)) for k, v in params.items()}
    t0 = time.perf_counter()
    loss, params, state = train_step(params, state, jnp.float32(0), batches[0])
    first_loss = float(loss)
    compile_s = time.perf_counter() - t0
    times = []
    for i in range(1, warmup + steps):
        t0 = time.perf_counter()
        loss, params, state = train_step(params, state, jnp.float32(i),
                                          batches[i % N_BATCHES])
        loss.block_until_ready()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    res = summarize(times, batch)
    res.update(first_loss=first_loss, last_loss=float(loss),
               first_call_s=compile_s, version=jax.__version__,
               backend=jax.default_backend())
    return res


def worker_torch(model_path, data_path, steps, warmup):
    sys.path.insert(0, HERE)
    import onnx
    import torch
    from onnx_torch import cross_entropy, evaluate, split_initializers

    model = onnx.load(model_path)
    np_params, np_consts = split_initializers(model)
    params = {k: torch.nn.Parameter(torch.from_numpy(v.copy()))
              for k, v in np_params.items()}
    consts = {k: torch.from_numpy(np.array(v)) for k, v in np_consts.items()}
    ins, _ = model_io(model)
    batch = ins[0][1][0]
    batches = [{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in b.items()}
               for b in batch_slices(dict(np.load(data_path)), batch)]
    opt = torch.optim.AdamW(params.values(), lr=LR, betas=(BETA1, BETA2), eps=EPS,
                            weight_decay=WD)

    def train_step(feed):
        opt.zero_grad(set_to_none=True)
        env = {**consts, **{n: feed[n] for n, _, _ in ins}, **params}
        loss = cross_entropy(evaluate(model, env)[0], feed["labels"])
        loss.backward()
        opt.step()
        return loss.detach()

    times, first_loss, loss = [], None, None
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        loss = train_step(batches[i % N_BATCHES])
        dt = time.perf_counter() - t0
        if i == 0:
            first_loss = float(loss)
        if i >= warmup:
            times.append(dt)
    res = summarize(times, batch)
    res.update(first_loss=first_loss, last_loss=float(loss), version=torch.__version__,
               threads=torch.get_num_threads(),
               interop_threads=torch.get_num_interop_threads())
    return res


WORKERS = {"jax": worker_jax, "torch": worker_torch}


def worker_main(args):
    try:
        res = WORKERS[args.worker](args.model, args.data, args.steps, args.warmup)
    except ImportError as e:
        res = {"skipped": "%s not importable: %s" % (args.worker, e)}
    print("RESULT " + json.dumps(res), flush=True)
    return 0


# --------------------------------------------------------------------------
# Orchestrator
# --------------------------------------------------------------------------


def best_of(prev, res):
    """Keeps the repetition with the lowest median ms/step (the least
    disturbed by other work on the machine); peak RSS is the largest seen, and
    every repetition's median is kept in `ms_per_step_runs`."""
    if prev is None or "ms_per_step" not in prev:
        if "ms_per_step" in res:
            res["ms_per_step_runs"] = [res["ms_per_step"]]
        return res if prev is None or "error" not in res else prev
    if "ms_per_step" not in res:
        return prev
    runs = prev["ms_per_step_runs"] + [res["ms_per_step"]]
    rss = max(prev["peak_rss_mib"], res["peak_rss_mib"])
    best = res if res["ms_per_step"] < prev["ms_per_step"] else prev
    best.update(ms_per_step_runs=runs, peak_rss_mib=rss)
    return best


def run_child(cmd, log_path, env=None):
    """Runs CMD with stdout+stderr to LOG_PATH; returns (rc, output, peak RSS
    MiB of that process and its waited-for children, wall s)."""
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(log_path) as f:
        out = f.read()
    return p.returncode, out, peak_rss_mib(usage), time.perf_counter() - t0


def failure(what, rc, log_path, out):
    """One line on a failed command: its first `error` line (the cause; a
    compiler may print IR after it), else the end of its output."""
    errors = [l.strip() for l in out.splitlines() if "error" in l.lower()]
    tail = errors[0].split(".onnx: ")[-1] if errors else " ".join(out.split())[-200:]
    return {"error": "%s exit %d (log %s): %s"
            % (what, rc, os.path.relpath(log_path, ROOT), tail[:200])}


def run_python_worker(fw, model_path, data_path, args, log_path):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", fw, "--model",
           model_path, "--data", data_path, "--steps", str(args.steps),
           "--warmup", str(args.warmup)]
    rc, out, rss, wall = run_child(cmd, log_path)
    lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
    if rc != 0 or not lines:
        return failure(fw, rc, log_path, out)
    res = json.loads(lines[-1][len("RESULT "):])
    if "skipped" not in res:
        res["peak_rss_mib"] = rss
        res["wall_s"] = wall
    return res


def _help_text(tool):
    try:
        p = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
        return p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def loom_available(args):
    """None when loomc and loom-run can train, else why not."""
    for tool, flags in ((args.loomc, ("--train", "--target")),
                        (args.loom_run, ("--train", "--metrics", "--steps"))):
        shown = os.path.relpath(tool, ROOT) if tool.startswith(ROOT) else tool
        if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
            return "%s not built" % shown
        text = _help_text(tool)
        missing = [f for f in flags if f not in text]
        if missing:
            return "%s --help lists no %s" % (shown, " ".join(missing))
    return None


def _metric_time(rec):
    """Seconds since the start of the run, if the record has such a field."""
    for k in ("time_s", "elapsed_s", "wall_s", "time", "elapsed", "t"):
        if isinstance(rec.get(k), (int, float)):
            return float(rec[k])
    return None


def _metric_step_s(rec, batch):
    """This step's own duration in seconds, if the record says it."""
    for k, scale in (("step_ms", 1e-3), ("ms_per_step", 1e-3), ("step_time_ms", 1e-3),
                     ("step_s", 1.0), ("step_time_s", 1.0), ("step_time", 1.0)):
        if isinstance(rec.get(k), (int, float)):
            return rec[k] * scale
    for k in ("samples_per_s", "samples_per_sec", "samples/s", "throughput"):
        if isinstance(rec.get(k), (int, float)) and rec[k] > 0:
            return batch / rec[k]
    return None


def loom_step_times(metrics_path, batch, warmup):
    """Per-step seconds of the training steps after WARMUP, from loom-run's
    metrics (its own per-step time, else its samples/s, else differences of
    its timestamps), and the first and last training loss."""
    recs = []
    with open(metrics_path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and "loss" in r and "step" in r \
                    and not any(str(k).startswith("eval") for k in r) \
                    and r.get("kind", r.get("type", "train")) == "train":
                recs.append(r)
    if not recs:
        raise ValueError("no training lines in " + metrics_path)
    recs.sort(key=lambda r: r["step"])
    per = [_metric_step_s(r, batch) for r in recs]
    if all(p is not None for p in per):
        times = [p for r, p in zip(recs, per) if r["step"] > warmup]
    else:
        stamps = [(r["step"], _metric_time(r)) for r in recs]
        if any(t is None for _, t in stamps):
            raise ValueError("metrics lines carry no step time, samples/s or "
                             "timestamp: %s" % json.dumps(recs[0]))
        times = [(t1 - t0) / (s1 - s0) for (s0, t0), (s1, t1)
                 in zip(stamps, stamps[1:]) if s0 >= warmup and s1 > s0]
    if not times:
        raise ValueError("no timed steps after %d warm-up steps" % warmup)
    return times, float(recs[0]["loss"]), float(recs[-1]["loss"])


def run_loom(name, model_path, data_path, batch, args, work):
    art = os.path.join(work, name + ".loom")
    shutil.rmtree(art, ignore_errors=True)
    cmd = [args.loomc, model_path, "--train", "--loss=cross_entropy",
           "--labels=labels", "--optimizer=adamw", "--lr=%r" % LR,
           "--weight-decay=%r" % WD, "--target=cpu", "-o", art]
    log = os.path.join(work, name + ".loomc.log")
    t0 = time.perf_counter()
    rc, out, _, _ = run_child(cmd, log)
    compile_s = time.perf_counter() - t0
    if rc != 0:
        return failure("loomc", rc, log, out)
    metrics = os.path.join(work, name + ".loom.metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.loom_run, art, "--train", "--data", data_path,
           "--steps", str(args.warmup + args.steps), "--batch-size", str(batch),
           "--metrics", metrics]
    log = os.path.join(work, name + ".loom-run.log")
    rc, out, rss, wall = run_child(cmd, log)
    if rc != 0:
        return failure("loom-run", rc, log, out)
    try:
        times, first, last = loom_step_times(metrics, batch, args.warmup)
    except (OSError, ValueError) as e:
        return {"error": "%s (see %s)" % (e, metrics)}
    res = summarize(times, batch)
    res.update(first_loss=first, last_loss=last, compile_s=compile_s,
               peak_rss_mib=rss, wall_s=wall)
    return res


def machine_info():
    info = {"date": datetime.date.today().isoformat(), "nproc": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform(),
            "loadavg_1min_before": os.getloadavg()[0]}
    try:
        info["nproc"] = int(subprocess.run(["nproc"], capture_output=True,
                                           text=True).stdout)
        for line in subprocess.run(["lscpu"], capture_output=True,
                                   text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    except (OSError, ValueError):
        pass
    return info


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def print_table(results, markdown):
    head = ["model", "framework", "ms/step", "samples/s", "peak RSS MiB",
            "Loom speed-up", "Loom RSS ratio", "first loss"]
    rows = []
    for name, per_fw in results.items():
        loom = per_fw.get("loom", {})
        for fw, r in per_fw.items():
            if "ms_per_step" not in r:
                why = r.get("skipped") or r.get("error") or "?"
                label = "not measured" if "skipped" in r else "FAILED"
                rows.append([name, fw, label, why, "", "", "", ""])
                continue
            speed = ratio = "-"
            if fw != "loom" and "ms_per_step" in loom:
                speed = "%.2fx" % (r["ms_per_step"] / loom["ms_per_step"])
                ratio = "%.2f" % (loom["peak_rss_mib"] / r["peak_rss_mib"])
            rows.append([name, fw, fmt(r["ms_per_step"], ".3f"),
                         fmt(r["samples_per_s"], ".0f"), fmt(r["peak_rss_mib"], ".0f"),
                         speed, ratio, fmt(r.get("first_loss"), ".5f")])
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(str(c) for c in r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        for r in [head] + rows:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print("Loom speed-up = other ms/step / Loom ms/step (> 1: Loom is faster); "
          "Loom RSS ratio = Loom peak RSS / other peak RSS.")


def check_losses(results):
    """Same weights, data and step count: every framework's loss at the first
    step should agree to f32 rounding (1e-4), and at the last step closely
    (2e-2: Adam amplifies rounding differences in near-zero gradients)."""
    ok = True
    for name, per_fw in results.items():
        for key, rtol in (("first_loss", 1e-4), ("last_loss", 2e-2)):
            losses = {fw: r[key] for fw, r in per_fw.items()
                      if isinstance(r.get(key), float)}
            if len(losses) < 2:
                continue
            ref_fw = "jax" if "jax" in losses else next(iter(losses))
            for fw, l in losses.items():
                ref = losses[ref_fw]
                if abs(l - ref) > rtol * max(abs(ref), 1e-6):
                    print("warning: %s: %s %s %.6f differs from %s's %.6f"
                          % (name, key.replace("_", " "), fw, l, ref_fw, ref))
                    ok = False
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="short run: 20 timed steps after 3 warm-up steps")
    ap.add_argument("--steps", type=int, help="timed steps (default 300; --quick 20)")
    ap.add_argument("--warmup", type=int, help="untimed first steps (default 20; "
                    "--quick 3)")
    ap.add_argument("--repeat", type=int, help="runs per model and framework, "
                    "the fastest kept (default 3; --quick 1)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--loomc", default=os.path.join(ROOT, "build", "bin", "loomc"))
    ap.add_argument("--loom-run", default=os.path.join(ROOT, "build", "bin", "loom-run"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "out", "bench"))
    ap.add_argument("--json", help="also write the results and the machine here")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    # Worker mode (internal).
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.steps is None:
        args.steps = 20 if args.quick else 300
    if args.warmup is None:
        args.warmup = 3 if args.quick else 20
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.worker:
        return worker_main(args)

    import onnx
    os.makedirs(args.workdir, exist_ok=True)
    info = machine_info()
    info.update(steps=args.steps, warmup=args.warmup)
    frameworks = [f for f in args.frameworks.split(",") if f]
    loom_why = loom_available(args) if "loom" in frameworks else None
    info.update(repeat=args.repeat)
    print("machine: %s, %s cores; %s; %d timed steps after %d warm-up, best of "
          "%d runs; load average %.2f"
          % (info.get("cpu", "?"), info["nproc"], info["date"], args.steps,
             args.warmup, args.repeat, info["loadavg_1min_before"]), flush=True)
    if info["loadavg_1min_before"] > 0.5:
        print("warning: the machine is busy (1-minute load average %.2f): the "
              "times will be noisy" % info["loadavg_1min_before"], flush=True)
    results = {}
    for name in [m for m in args.models.split(",") if m]:
        model_path = os.path.join(ROOT, "examples", "onnx", name + ".onnx")
        data_path = os.path.join(args.workdir, name + ".npz")
        batch = make_data(onnx.load(model_path), data_path)
        results[name] = {}
        for rep in range(args.repeat):
            for fw in frameworks:
                if fw == "loom":
                    res = ({"skipped": loom_why} if loom_why else
                           run_loom(name, model_path, data_path, batch, args,
                                    args.workdir))
                else:
                    log = os.path.join(args.workdir, "%s.%s.log" % (name, fw))
                    res = run_python_worker(fw, model_path, data_path, args, log)
                res["batch"] = batch
                results[name][fw] = best_of(results[name].get(fw), res)
                if "ms_per_step" in res:
                    print("  %-18s %-6s %9.3f ms/step  %8.0f samples/s  %6.0f MiB"
                          % (name, fw, res["ms_per_step"], res["samples_per_s"],
                             res["peak_rss_mib"]), flush=True)
                else:
                    print("  %-18s %-6s %s" % (name, fw, res.get("skipped") or
                                               "FAILED: " + res.get("error", "?")),
                          flush=True)
    for per_fw in results.values():
        for fw in ("jax", "torch"):
            r = per_fw.get(fw, {})
            for key in ("version", "threads", "interop_threads"):
                if key in r:
                    info["%s_%s" % (fw, key)] = r[key]
    print()
    print_table(results, args.markdown)
    extra = ", ".join("%s %s" % (k, v) for k, v in sorted(info.items())
                      if k.startswith(("jax_", "torch_")))
    if extra:
        print(extra)
    consistent = check_losses(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": results}, f, indent=1)
    failed = any("error" in r for per_fw in results.values() for r in per_fw.values())
    return 1 if failed or not consistent else 0


if __name__ == "__main__":
    sys.exit(main())
