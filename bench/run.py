#!/usr/bin/env python3
"""Benchmarks one training step (forward, backward, AdamW update) of the
example models in Loom, JAX and PyTorch on the CPU; with --suite real, of
real-size models exported by PyTorch.

Usage (from the repository root, with the set-up script's .venv):
  .venv/bin/python bench/run.py [--quick] [--models mlp,cnn,transformer_block]
      [--frameworks loom,jax,torch] [--steps N] [--warmup W] [--repeat R]
      [--loomc build/bin/loomc] [--loom-run build/bin/loom-run]
      [--workdir out/bench] [--json FILE] [--markdown]
  PY bench/run.py --suite real [--quick] [--models resnet18,mobilenet_v3_small,
      gpt2,llama] [--frameworks loom,torch,torch_compile,jax] [--threads 1,2]
      [--batch 8] [--image-size 224] [--classes 1000] [--steps 10] [--warmup 3]
      [--workdir out/bench_real] [--json FILE] [--markdown]
  (PY: a Python with torch, torchvision, transformers, onnxscript, onnx, jax
  and threadpoolctl, not the project's .venv; see docs/performance.md.)

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

--suite real (bench/real_suite.py; docs/performance.md, "CPU at real sizes")
trains torchvision's ResNet-18 and MobileNetV3-small (dropout removed,
training mode: BatchNormalization on batch statistics; batch 8 x 3 x 224 x 224,
1000 classes) and transformers' GPT2LMHeadModel (4 layers, d 256, 4 heads,
T 128, vocabulary 50304, tied head) and LlamaForCausalLM (4 layers, d 256,
4 heads, MLP 704, vocabulary 32000), batch 8 x 128 tokens, with random weights
from seed 0, each exported once by torch.onnx.export(optimize=False), with
mean cross-entropy and AdamW as above, on one random batch:

- loom:          loomc --train --target=cpu --report (its wall time is the
                 compile time), loom-run --train --threads N.
- torch:         the PyTorch module itself (same weights), eager,
                 torch.optim.AdamW, torch.set_num_threads(N).
- torch_compile: torch.compile(module) (loss and AdamW eager), cold caches;
                 compile time = the first step's wall time.
- jax:           the exported graph through bench/onnx_jax.py (the evaluator
                 of test/e2e/train_vs_jax.py plus the ops PyTorch's exporter
                 writes), value_and_grad + AdamW in one jax.jit; compile time =
                 the first call's wall time.

Every (model, framework, thread count) runs once, in a process of its own;
N threads means pinned to N CPUs (sched_setaffinity) and told to use N
threads (loom-run --threads N, torch.set_num_threads(N); XLA takes no thread
count: the pinning limits it, plus --xla_cpu_multi_thread_eigen=false for
1 thread). Reported: the median ms/step, samples/s, GFLOP/s (3 x
the forward FLOPs of the exported graph's MatMul/Gemm/Conv nodes, the same
count for every framework, over the median step) and its share of the
machine's f32 GEMM peak at that thread count (measured first: the best of
torch.matmul and numpy's OpenBLAS, the latter with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset in its process only, on a 2048^3 GEMM), peak RSS
(wait4), compile time and the first loss (equal across frameworks to ~6
digits: same weights, same batch).

Internal: `run.py --worker jax|torch ...` is the subprocess side (real:
`real_suite.py --worker ...`).
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
# --suite real (bench/real_suite.py): the models and frameworks, and the
# vision models' input (ImageNet's 224 x 224 images, 1000 classes).
REAL_MODELS = ["resnet18", "mobilenet_v3_small", "gpt2", "llama", "qwen2"]
REAL_FRAMEWORKS = ["loom", "torch", "torch_compile", "jax"]
REAL_IMAGE_SIZE, REAL_CLASSES = 224, 1000
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


def timed_steps(step, total, warmup, sync=lambda loss: loss):
    """Calls STEP(i) for i < TOTAL, each call timed up to SYNC(its loss)
    (JAX: block_until_ready). Returns (seconds of the calls from WARMUP on,
    first loss, last loss, seconds of the first call)."""
    times, losses = [], []
    for i in range(total):
        t0 = time.perf_counter()
        loss = sync(step(i))
        times.append(time.perf_counter() - t0)
        if i == 0 or i == total - 1:
            losses.append(float(loss))
    return times[warmup:], losses[0], losses[-1], times[0]


def jax_train_step(model, evaluate, consts, input_names):
    """The training step of the ONNX MODEL as one jax.jit: EVALUATE (an ONNX
    evaluator on JAX) with CONSTS and the batch's INPUT_NAMES, mean softmax
    cross-entropy against the batch's `labels`, jax.value_and_grad, and the
    PyTorch AdamW rule of test/e2e/train_vs_jax.py. (params, state, step,
    batch) -> (loss, params, state)."""
    import jax
    from train_vs_jax import adamw, cross_entropy

    def loss_fn(p, feed):
        env = {**consts, **{n: feed[n] for n in input_names}, **p}
        return cross_entropy(evaluate(model, env)[0], feed["labels"])

    @jax.jit
    def train_step(p, s, step, feed):
        loss, g = jax.value_and_grad(loss_fn)(p, feed)
        p, s = adamw(p, g, s, step, LR, BETA1, BETA2, EPS, WD)
        return loss, p, s

    return train_step


def run_jax_steps(train_step, params, batches, steps, warmup, batch):
    """WARMUP + STEPS calls of TRAIN_STEP (jax_train_step) from PARAMS (JAX
    arrays) on BATCHES (cycled); the first call compiles. Returns the
    summary, with the first call's seconds as first_call_s."""
    import jax
    import jax.numpy as jnp
    cur = {"p": params,
           "s": {k: (jnp.zeros_like(v), jnp.zeros_like(v)) for k, v in params.items()}}

    def step(i):
        loss, cur["p"], cur["s"] = train_step(cur["p"], cur["s"], jnp.float32(i),
                                              batches[i % len(batches)])
        return loss

    times, first, last, first_s = timed_steps(
        step, warmup + steps, warmup, lambda loss: loss.block_until_ready())
    res = summarize(times, batch)
    res.update(first_loss=first, last_loss=last, first_call_s=first_s,
               version=jax.__version__, backend=jax.default_backend())
    return res


def worker_jax(model_path, data_path, steps, warmup):
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    import jax.numpy as jnp
    import onnx
    from onnx import numpy_helper
    from train_vs_jax import evaluate

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
    train_step = jax_train_step(model, evaluate, consts, [n for n, _, _ in ins])
    return run_jax_steps(train_step, params, batches, steps, warmup, batch)


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

    times, first_loss, last_loss, _ = timed_steps(
        lambda i: train_step(batches[i % N_BATCHES]), warmup + steps, warmup)
    res = summarize(times, batch)
    res.update(first_loss=first_loss, last_loss=last_loss, version=torch.__version__,
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


def run_child(cmd, log_path, env=None, cpus=None):
    """Runs CMD with stdout+stderr to LOG_PATH (pinned to the CPUs of the set
    CPUS, if given); returns (rc, output, peak RSS MiB of that process and
    its waited-for children, wall s)."""
    t0 = time.perf_counter()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                             preexec_fn=pin)
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


def compile_loom(loomc, model_path, art, log, extra=()):
    """LOOMC --train (cross-entropy, AdamW) of MODEL_PATH into ART; returns
    (None, loomc's output, wall s) or (failure dict, None, None)."""
    shutil.rmtree(art, ignore_errors=True)
    cmd = [loomc, model_path, "--train", "--loss=cross_entropy",
           "--labels=labels", "--optimizer=adamw", "--lr=%r" % LR,
           "--weight-decay=%r" % WD, "--target=cpu", "-o", art] + list(extra)
    rc, out, _, compile_s = run_child(cmd, log)
    if rc != 0:
        return failure("loomc", rc, log, out), None, None
    return None, out, compile_s


def run_loom_artifact(art, data_path, batch, args, stem, threads=None, cpus=None):
    """loom-run --train of ART for --warmup + --steps steps (with --threads
    THREADS, pinned to CPUS, when given); the summary of its metrics. Its
    files are STEM.metrics.jsonl and STEM.log."""
    metrics = stem + ".metrics.jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.loom_run, art, "--train", "--data", data_path,
           "--steps", str(args.warmup + args.steps), "--batch-size", str(batch),
           "--metrics", metrics]
    if threads is not None:
        cmd += ["--threads", str(threads), "--quiet"]
    log = stem + ".log"
    rc, out, rss, wall = run_child(cmd, log, cpus=cpus)
    if rc != 0:
        return failure("loom-run", rc, log, out)
    try:
        times, first, last = loom_step_times(metrics, batch, args.warmup)
    except (OSError, ValueError) as e:
        return {"error": "%s (see %s)" % (e, metrics)}
    res = summarize(times, batch)
    res.update(first_loss=first, last_loss=last, peak_rss_mib=rss, wall_s=wall)
    return res


def run_loom(name, model_path, data_path, batch, args, work):
    art = os.path.join(work, name + ".loom")
    fail, _, compile_s = compile_loom(args.loomc, model_path, art,
                                      os.path.join(work, name + ".loomc.log"))
    if fail:
        return fail
    res = run_loom_artifact(art, data_path, batch, args,
                            os.path.join(work, name + ".loom-run"))
    res["compile_s"] = compile_s
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
    ap.add_argument("--suite", choices=["toy", "real"], default="toy",
                    help="toy: the example models (default); real: ResNet-18, "
                    "MobileNetV3-small, GPT-2 and Llama exported by PyTorch "
                    "(needs torch, torchvision, transformers, onnxscript)")
    ap.add_argument("--quick", action="store_true",
                    help="short run: 20 timed steps after 3 warm-up steps (real: 3 "
                    "after 1)")
    ap.add_argument("--steps", type=int, help="timed steps (default 300, real 10; "
                    "--quick 20, real 3)")
    ap.add_argument("--warmup", type=int, help="untimed first steps (default 20, "
                    "real 3; --quick 3, real 1)")
    ap.add_argument("--repeat", type=int, help="runs per model and framework, "
                    "the fastest kept (default 3; --quick 1; real: always 1)")
    ap.add_argument("--models", help="default: %s; real: %s"
                    % (",".join(MODELS), ",".join(REAL_MODELS)))
    ap.add_argument("--frameworks", help="default: %s; real: %s"
                    % (",".join(FRAMEWORKS), ",".join(REAL_FRAMEWORKS)))
    ap.add_argument("--threads", default="1,2",
                    help="real: thread counts to run each framework with (default 1,2)")
    ap.add_argument("--batch", type=int, default=8, help="real: samples per step "
                    "(images, or sequences of 128 tokens; default 8)")
    ap.add_argument("--seq", type=int, default=128,
                    help="real: the language models' sequence length (128)")
    ap.add_argument("--image-size", type=int, default=REAL_IMAGE_SIZE,
                    help="real: image side (default %d)" % REAL_IMAGE_SIZE)
    ap.add_argument("--classes", type=int, default=REAL_CLASSES,
                    help="real: classes of the vision models (default %d)" % REAL_CLASSES)
    ap.add_argument("--loomc", default=os.path.join(ROOT, "build", "bin", "loomc"))
    ap.add_argument("--loom-run", default=os.path.join(ROOT, "build", "bin", "loom-run"))
    ap.add_argument("--workdir", help="default out/bench (real: out/bench_real)")
    ap.add_argument("--json", help="also write the results and the machine here")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    # Worker mode (internal).
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    real = args.suite == "real"
    if args.steps is None:
        args.steps = (3 if real else 20) if args.quick else (10 if real else 300)
    if args.warmup is None:
        args.warmup = (1 if real else 3) if args.quick else (3 if real else 20)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.models is None:
        args.models = ",".join(REAL_MODELS if real else MODELS)
    if args.frameworks is None:
        args.frameworks = ",".join(REAL_FRAMEWORKS if real else FRAMEWORKS)
    if args.workdir is None:
        args.workdir = os.path.join(ROOT, "out", "bench_real" if real else "bench")
    if args.worker:
        return worker_main(args)
    if real:
        if args.warmup < 1 or args.steps < 1:
            ap.error("--steps and --warmup must be at least 1 (the first step is "
                     "never timed)")
        import real_suite
        return real_suite.main(args)

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
