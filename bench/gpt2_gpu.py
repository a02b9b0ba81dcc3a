#!/usr/bin/env python3
"""Benchmarks one training step of a GPT-2-small-shaped model on a GPU: Loom
against PyTorch eager and torch.compile.

Usage (from the repository root, with the set-up script's .venv):
  .venv/bin/python bench/gpt2_gpu.py [--batch 8] [--steps 20] [--warmup 5]
      [--frameworks loom,torch,torch_compile] [--device cuda|cpu]
      [--target cuda:sm_90] [--layers 12 --d 768 --heads 12 --seq 1024
      --vocab 50304] [--tf32] [--torch-attention sdpa|math]
      [--torch-adamw default|foreach|fused|single] [--compile-mode MODE]
      [--precision fp32|bf16] [--workdir out/bench_gpt2] [--json FILE]
      [--markdown]
  .venv/bin/python bench/gpt2_gpu.py --self-test     # CPU, tiny model

The step: forward, mean softmax cross-entropy over all B x T tokens (logits
[B, T, V], labels [B, T]), backward, AdamW (lr 1e-3, betas 0.9/0.999, eps
1e-8, weight decay 0.01), all f32; with --precision bf16, mixed precision:
Loom's `loomc --precision=bf16` (bf16 GEMMs and their activations, f32
master weights, AdamW state and softmax/normalization statistics; the
attention and the LM head fused) against PyTorch's
`torch.autocast("cuda", torch.bfloat16)` around the forward and the loss
(the optimizer on the f32 parameters). The model is the GPT of
utils/gen_onnx_models.py (build_gpt: the examples' gpt2.onnx at any size):
pre-LN blocks, causal softmax attention, exact (Erf) GELU, MLP width 4d,
untied lm_head without bias. Default: 12 layers, d 768, 12 heads, T 1024,
vocab 50304 (GPT-2 small's shape; 163M parameters with the untied lm_head).
It is written once to WORKDIR/gpt_<shape>/model.onnx, its weights as ONNX
external data (model.onnx.data), and reused while the generator is unchanged.
Every framework starts from those weights and trains on the same random batch
at every step (data.npz there; one batch, as bench/run.py does, so that
loom-run's shuffling changes nothing and all frameworks compute the same
losses):

- loom:  `loomc model.onnx --train --loss=cross_entropy ... --target=TARGET
         --report` (its wall time is the compile time), then `loom-run
         --train --steps W+N --metrics ... --quiet`; ms/step is the median
         of the per-step times in the metrics file after W warm-up steps.
- torch: a native nn.Module GPT-2 (below) holding the ONNX initializers,
         eager autograd, torch.optim.AdamW (fused on CUDA by default).
- torch_compile: the same module through torch.compile (the optimizer step
         stays eager); its compile time is the wall time of the first step
         (compilation included), with empty Inductor and Triton caches.

Times on CUDA come from CUDA events around each step (median of the timed
steps); on the CPU from perf_counter. Each framework runs in a subprocess of
its own. Peak memory on CUDA: nvidia-smi's memory.used sampled in a
background thread while the framework's process runs (its maximum minus the
reading before the process started, so it includes the CUDA context and the
allocator's cache) for every framework, and for PyTorch also
torch.cuda.max_memory_allocated. On the CPU: the process's peak RSS.

Achieved TFLOP/s uses the usual model-FLOPs count (Kaplan et al. 2020; PaLM's
MFU): 6 N + 12 L d T FLOPs per token for forward + backward, N the parameters
but the token and position embedding tables (gathers, no FLOPs; the untied
lm_head's matrix counts), L layers, d width, T
the sequence length (attention scores and their weighted sum, causal mask not
discounted).

--self-test checks, on the CPU, that the native module is the ONNX model:
its losses (two AdamW steps) and gradients against bench/onnx_torch.py's
evaluation of the ONNX graph, on a tiny configuration.

Internal: `gpt2_gpu.py --worker torch|torch_compile --worker-config JSON`
is the subprocess side.
"""
import argparse
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "utils"))

# Shared with the CPU benchmark: the optimizer's settings, the data file, the
# child-process runner (peak RSS from wait4), loom-run's metrics parser and
# the cross-framework loss check.
from run import (BETA1, BETA2, EPS, LR, WD, check_losses, failure,  # noqa: E402
                 loom_available, loom_step_times, machine_info, make_data,
                 run_child)

# PyTorch is imported only where it is used (the workers, --self-test; see
# import_torch): the orchestrator stays small, which matters because a child
# process's peak RSS (wait4) starts from what it shares with its parent when
# it is forked.
torch = F = nn = None

FRAMEWORKS = ["loom", "torch", "torch_compile"]
LABELS = {"loom": "Loom", "torch": "PyTorch eager", "torch_compile": "PyTorch torch.compile"}
# GPT-2 small's shape; the vocabulary padded to a multiple of 64 (nanoGPT's 50304).
DEFAULT_SHAPE = dict(layers=12, d=768, heads=12, seq=1024, vocab=50304)
# A tiny shape for the self-test (and CPU runs).
TINY_SHAPE = dict(layers=2, d=64, heads=4, seq=32, vocab=128)
SMI_INTERVAL_S = 0.05


# --------------------------------------------------------------------------
# The PyTorch model: GPT-2 as a native module, weights from the ONNX file
# --------------------------------------------------------------------------


def import_torch():
    """Imports PyTorch into this module's globals (torch, nn, F) and defines
    the model's classes; False when PyTorch is not installed."""
    global torch, nn, F, GPT
    if torch is not None:
        return True
    try:
        import torch as torch_
        import torch.nn.functional as F_
        from torch import nn as nn_
    except ImportError:
        return False
    torch, nn, F = torch_, nn_, F_
    GPT = _define_model()
    return True


def _define_model():
    """The nn.Module classes (defined once torch is imported); returns GPT."""
    class CausalSelfAttention(nn.Module):
        """Multi-head causal self-attention with one fused qkv projection.

        attention="sdpa": F.scaled_dot_product_attention(is_causal=True), what a
        PyTorch user writes (flash / memory-efficient kernels where they apply);
        "math": the ONNX graph's ops exactly (scores * 1/sqrt(hd), masked to -1e9
        above the diagonal, softmax, weighted sum)."""

        def __init__(self, d, heads, seq, attention):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.heads = heads
            self.attention = attention
            if attention == "math":
                mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
                self.register_buffer("causal_mask", mask, persistent=False)

        def forward(self, x):
            B, T, D = x.shape
            hd = D // self.heads
            q, k, v = self.c_attn(x).split(D, dim=2)
            q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
            if self.attention == "sdpa":
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
                s = s.masked_fill(~self.causal_mask[:T, :T], -1e9)
                o = torch.softmax(s, dim=-1) @ v
            return self.c_proj(o.transpose(1, 2).reshape(B, T, D))

    class MLP(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.c_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="none"))  # Erf GELU

    class Block(nn.Module):
        """Pre-LN transformer block (GPT-2)."""

        def __init__(self, d, heads, seq, attention):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d, eps=1e-5)
            self.attn = CausalSelfAttention(d, heads, seq, attention)
            self.ln_2 = nn.LayerNorm(d, eps=1e-5)
            self.mlp = MLP(d)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        """The GPT of utils/gen_onnx_models.py's _build_gpt. Its parameter names
        are the ONNX initializers' (wte.weight <- wte, wpe.weight <- wpe, the rest
        the same), so that load_onnx_weights can map them one to one."""

        def __init__(self, layers, d, heads, seq, vocab, attention="sdpa"):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(seq, d)
            self.h = nn.ModuleList(Block(d, heads, seq, attention) for _ in range(layers))
            self.ln_f = nn.LayerNorm(d, eps=1e-5)
            self.lm_head = nn.Linear(d, vocab, bias=False)  # untied, as in the ONNX model
            self.register_buffer("position_ids", torch.arange(seq), persistent=False)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe(self.position_ids[:ids.shape[1]])
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT


GPT = None  # set by import_torch()


def onnx_name(key):
    """The ONNX initializer holding the module's state-dict entry KEY."""
    return {"wte.weight": "wte", "wpe.weight": "wpe"}.get(key, key)


def linear_weights(module):
    """State-dict keys of nn.Linear weights: stored [out, in] by PyTorch and
    [in, out] (MatMul operands) in the ONNX model."""
    return {name + ".weight" for name, m in module.named_modules()
            if isinstance(m, nn.Linear)}


def load_onnx_weights(module, params):
    """Copies PARAMS (ONNX float initializers by name) into MODULE; every
    parameter of either side must be used exactly once."""
    transposed = linear_weights(module)
    state = {}
    for key in module.state_dict():
        a = params[onnx_name(key)]
        # A copy: arrays read from external data may be read-only views.
        state[key] = torch.from_numpy(np.array(a.T if key in transposed else a, order="C"))
    unused = set(params) - {onnx_name(k) for k in state}
    if unused:
        raise ValueError("ONNX parameters without a place in the module: "
                         + ", ".join(sorted(unused)))
    module.load_state_dict(state, strict=True)


def load_initializers(model_path):
    """(params, consts) of an ONNX file whose weights may be external data:
    float initializers of rank >= 1 are parameters (Loom's rule; see
    bench/onnx_torch.py's split_initializers), the rest constants."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(model_path, load_external_data=False)
    base = os.path.dirname(os.path.abspath(model_path))
    inits = {t.name: numpy_helper.to_array(t, base_dir=base) for t in model.graph.initializer}
    params = {k: v for k, v in inits.items() if v.dtype.kind == "f" and v.ndim >= 1}
    return params, {k: v for k, v in inits.items() if k not in params}


def make_adamw(params, impl):
    """torch.optim.AdamW with the benchmark's settings; IMPL picks PyTorch's
    implementation (default: PyTorch's own choice, foreach on CUDA)."""
    kw = dict(lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD)
    if impl == "fused":
        kw["fused"] = True
    elif impl in ("foreach", "single"):
        kw["foreach"] = impl == "foreach"
    return torch.optim.AdamW(params, **kw)


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy over all tokens, classes on the last axis."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


# --------------------------------------------------------------------------
# PyTorch worker (its own process)
# --------------------------------------------------------------------------


def worker_torch(opts):
    """Trains OPTS["warmup"] + OPTS["steps"] steps; returns the timings."""
    device = torch.device(opts["device"])
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        return {"error": "torch.cuda.is_available() is False (torch %s, built for CUDA "
                         "%s)" % (torch.__version__, torch.version.cuda)}
    # Strict f32 unless --tf32 (PyTorch's default for matmuls; Loom's too).
    torch.backends.cuda.matmul.allow_tf32 = opts["tf32"]
    torch.backends.cudnn.allow_tf32 = opts["tf32"]
    s = opts["shape"]
    params, _ = load_initializers(opts["model"])
    model = GPT(s["layers"], s["d"], s["heads"], s["seq"], s["vocab"], opts["attention"])
    load_onnx_weights(model, params)
    del params
    model.to(device)
    data = np.load(opts["data"])
    ids = torch.from_numpy(data["input_ids"]).to(device)
    labels = torch.from_numpy(data["labels"]).to(device)
    opt = make_adamw(model.parameters(), opts["adamw"])
    forward = model
    if opts["compile"]:
        forward = torch.compile(model, mode=opts["compile_mode"])

    bf16 = opts.get("precision", "fp32") == "bf16"

    def step():
        opt.zero_grad(set_to_none=True)
        # Mixed precision as PyTorch users train: autocast around the
        # forward and the loss, the gradients and AdamW in f32.
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = cross_entropy(forward(ids), labels)
        loss.backward()
        opt.step()
        return loss.detach()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # First step on its own: for torch.compile, its wall time is the
    # compilation (plus one step).
    sync()
    t0 = time.perf_counter()
    loss = step()
    sync()
    first_step_s = time.perf_counter() - t0
    first_loss = float(loss)
    for _ in range(1, opts["warmup"]):
        loss = step()
    sync()
    # Timed steps: CUDA events around each step, read after the last one (no
    # host synchronisation in between), or the host clock on the CPU.
    times = []
    t0 = time.perf_counter()
    for _ in range(opts["steps"]):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step()
            end.record()
            times.append((start, end))
        else:
            t = time.perf_counter()
            loss = step()
            times.append(time.perf_counter() - t)
    sync()
    wall_s = time.perf_counter() - t0
    if cuda:
        times = [a.elapsed_time(b) / 1e3 for a, b in times]
    res = {"ms_per_step": statistics.median(times) * 1e3,
           "ms_min": min(times) * 1e3, "ms_mean": statistics.fmean(times) * 1e3,
           "ms_wall_mean": wall_s / len(times) * 1e3, "timed_steps": len(times),
           "first_step_s": first_step_s, "first_loss": first_loss, "last_loss": float(loss),
           "torch_version": torch.__version__,
           "adamw": opts["adamw"], "attention": opts["attention"], "tf32": opts["tf32"],
           "precision": opts.get("precision", "fp32")}
    if opts["compile"]:
        res.update(compile_s=first_step_s, compile_mode=opts["compile_mode"])
    if cuda:
        res.update(torch_max_allocated_mib=torch.cuda.max_memory_allocated() / 2**20,
                   torch_max_reserved_mib=torch.cuda.max_memory_reserved() / 2**20,
                   gpu=torch.cuda.get_device_name(), torch_cuda=torch.version.cuda)
    else:
        res.update(threads=torch.get_num_threads())
    return res


def worker_main(args):
    opts = json.loads(args.worker_config)
    opts["compile"] = args.worker == "torch_compile"
    if not import_torch():
        res = {"skipped": "torch not importable"}
    else:
        res = worker_torch(opts)
    print("RESULT " + json.dumps(res), flush=True)
    return 0


# --------------------------------------------------------------------------
# Orchestrator: model, data, GPU memory, the frameworks' runs
# --------------------------------------------------------------------------


def shape_of(args):
    return {k: getattr(args, k) for k in DEFAULT_SHAPE}


def ensure_model(shape, batch, workdir):
    """WORKDIR/gpt_<shape>/model.onnx for SHAPE and BATCH, generated by
    utils/gen_onnx_models.py unless an identical one (same shape, same
    generator source) is already there. Returns the model's path."""
    import gen_onnx_models as gen
    folder = os.path.join(workdir, "gpt_L%(layers)d_d%(d)d_h%(heads)d_T%(seq)d_V%(vocab)d"
                          % shape + "_B%d" % batch)
    path = os.path.join(folder, "model.onnx")
    with open(gen.__file__, "rb") as f:
        stamp = {"shape": shape, "batch": batch,
                 "generator_sha256": hashlib.sha256(f.read()).hexdigest()}
    stamp_path = os.path.join(folder, "stamp.json")
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp and os.path.exists(path):
                return path
    except (OSError, ValueError):
        pass
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    gen.gen_gpt(folder, n_layer=shape["layers"], d_model=shape["d"], n_head=shape["heads"],
                seq=shape["seq"], vocab=shape["vocab"], batch=batch)
    print("generated the model in %.1f s" % (time.perf_counter() - t0), flush=True)
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return path


def flop_model(model_path, shape, batch):
    """The model-FLOPs count per training step (see the module's doc)."""
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    floats = [t for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) >= 1]
    n_params = sum(int(np.prod(t.dims)) for t in floats)
    n_matmul = sum(int(np.prod(t.dims)) for t in floats if t.name not in ("wte", "wpe"))
    tokens = batch * shape["seq"]
    attention = 12 * shape["layers"] * shape["d"] * shape["seq"]
    return {"n_params": n_params, "n_matmul_params": n_matmul, "tokens_per_step": tokens,
            "flops_per_token": 6 * n_matmul + attention,
            "flops_per_step": (6 * n_matmul + attention) * tokens,
            "formula": "6*N*tokens + 12*L*d*T*tokens, N = %d parameters (all %d but "
                       "the wte/wpe embedding tables, which are gathers; the untied "
                       "lm_head counts), L=%d, d=%d, T=%d, tokens = %d x %d"
                       % (n_matmul, n_params, shape["layers"], shape["d"], shape["seq"],
                          batch, shape["seq"])}


def gpu_index():
    """The GPU the frameworks use, as nvidia-smi -i takes it: the first entry
    of CUDA_VISIBLE_DEVICES (an index or a UUID), else 0."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return first or "0"


def smi_query(fields, gpu):
    """nvidia-smi's CSV values of FIELDS for GPU, or None without a working
    nvidia-smi or GPU."""
    try:
        p = subprocess.run(["nvidia-smi", "-i", str(gpu), "--query-gpu=" + fields,
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
    return [v.strip() for v in line.split(",")] if p.returncode == 0 and line else None


class GpuMemorySampler:
    """Samples nvidia-smi's memory.used for one GPU every SMI_INTERVAL_S in a
    background thread while the `with` body runs. result()'s smi_peak_mib: the
    largest sample minus the reading before the body started (MiB; the whole
    GPU's: every process on it counts, so nothing else should run there)."""

    def __init__(self, gpu):
        self.gpu = gpu
        self.baseline = self.peak = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _used(self):
        v = smi_query("memory.used", self.gpu)
        try:
            return int(v[0]) if v else None
        except ValueError:
            return None

    def _loop(self):
        while True:
            used = self._used()
            if used is not None:
                self.peak = used if self.peak is None else max(self.peak, used)
                self.samples += 1
            if self._stop.wait(SMI_INTERVAL_S):
                return

    def __enter__(self):
        self.baseline = self._used()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False

    def result(self):
        if self.baseline is None or self.peak is None:
            return {"smi_error": "nvidia-smi gave no memory.used readings"}
        return {"smi_peak_mib": float(self.peak - self.baseline),
                "smi_baseline_mib": float(self.baseline), "smi_samples": self.samples}


def measured(cmd, log, args, env=None):
    """run_child(CMD), with the GPU's memory sampled around it on CUDA.
    Returns (rc, output, peak RSS MiB, wall s, memory facts)."""
    if args.device != "cuda":
        rc, out, rss, wall = run_child(cmd, log, env)
        return rc, out, rss, wall, {}
    with GpuMemorySampler(gpu_index()) as mem:
        rc, out, rss, wall = run_child(cmd, log, env)
    return rc, out, rss, wall, mem.result()


def parse_report(text):
    """`loomc --report`'s text, and from its @train_step line the kernel
    steps, arena bytes and Loom's own FLOP estimate (those it states)."""
    report = [l for l in text.splitlines() if l.startswith(("loomc report", "  "))]
    for line in report:
        if line.strip().startswith("@train_step:"):
            facts = {"loom_report": "\n".join(report),
                     "loom_report_train_step": line.strip()}
            for key, pat in (("loom_arena_bytes", r"arena (\d+) bytes"),
                             ("loom_flops_estimate", r"(\d+) FLOPs"),
                             ("loom_kernel_steps", r"(\d+) kernel steps")):
                m = re.search(pat, line)
                if m:
                    facts[key] = int(m.group(1))
            return facts
    return {}


def compile_loom(model_path, art, args):
    """loomc on the model into ART; returns (None, report text, compile s) or
    (failure dict, None, None). Also writes ART/compile.json (the wall time
    and the report), which --loom-prebuilt reads on another machine."""
    shutil.rmtree(art, ignore_errors=True)
    cmd = [args.loomc, model_path, "--train", "--loss=cross_entropy", "--labels=labels",
           "--optimizer=adamw", "--lr=%r" % LR, "--beta1=%r" % BETA1, "--beta2=%r" % BETA2,
           "--eps=%r" % EPS, "--weight-decay=%r" % WD, "--target=" + args.target,
           "--precision=" + args.precision,
           "-o", art, "--report"] + args.loomc_flags.split()
    log = os.path.join(os.path.dirname(model_path), "loomc.log")
    print("  loom: loomc --target=%s" % args.target, flush=True)
    rc, out, _, compile_s = run_child(cmd, log)
    if rc != 0:
        return failure("loomc", rc, log, out), None, None
    with open(os.path.join(art, "compile.json"), "w") as f:
        json.dump({"compile_s": compile_s, "report": out, "target": args.target,
                   "precision": args.precision}, f)
    return None, out, compile_s


def write_params_from_model(model_path, art):
    """ART/params.safetensors from the model's initializers (the optimizer
    state zero, as loomc writes it) by the plan's param and state bindings:
    the weights of a prebuilt artifact are not carried between machines."""
    import onnx
    from onnx import numpy_helper
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    from compiled_vs_interp import NP_DTYPES, write_safetensors
    plan = json.load(open(os.path.join(art, "plan.json")))
    model = onnx.load(model_path)
    init = {t.name: t for t in model.graph.initializer}
    tensors = {}
    for e in plan["entries"]:
        for b in e["inputs"]:
            if b["kind"] not in ("param", "state", "buffer") or b["name"] in tensors:
                continue
            buf = e["buffers"][b["buffer"]]
            dt = NP_DTYPES[buf["dtype"]]
            if b["name"] in init:
                tensors[b["name"]] = numpy_helper.to_array(init[b["name"]]).astype(dt)
            else:
                tensors[b["name"]] = np.zeros(buf["shape"], dt)
    write_safetensors(os.path.join(art, "params.safetensors"), tensors)


def run_loom(model_path, data_path, batch, args):
    work = os.path.dirname(model_path)
    if args.loom_prebuilt:
        art = args.loom_prebuilt
        with open(os.path.join(art, "compile.json")) as f:
            facts = json.load(f)
        out, compile_s = facts["report"], facts["compile_s"]
        if facts.get("precision", "fp32") != args.precision:
            return {"error": "%s was compiled with --precision=%s, not %s" % (
                art, facts.get("precision", "fp32"), args.precision)}
        if not os.path.exists(os.path.join(art, "params.safetensors")):
            write_params_from_model(model_path, art)
    else:
        art = os.path.join(work, "gpt.loom")
        fail, out, compile_s = compile_loom(model_path, art, args)
        if fail:
            return fail
    metrics = os.path.join(work, "loom.metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.loom_run, art, "--train", "--data", data_path,
           "--steps", str(args.warmup + args.steps), "--batch-size", str(batch),
           "--metrics", metrics, "--quiet"]
    env = dict(os.environ)
    if args.tf32:
        env["LOOMRT_CUDA_ALLOW_TF32"] = "1"
    log = os.path.join(work, "loom-run.log")
    rc, out2, rss, wall, mem = measured(cmd, log, args, env)
    if rc != 0:
        return failure("loom-run", rc, log, out2)
    try:
        times, first, last = loom_step_times(metrics, batch, args.warmup)
    except (OSError, ValueError) as e:
        return {"error": "%s (see %s)" % (e, metrics)}
    res = {"ms_per_step": statistics.median(times) * 1e3, "ms_min": min(times) * 1e3,
           "ms_mean": statistics.fmean(times) * 1e3, "timed_steps": len(times),
           "first_loss": first, "last_loss": last, "compile_s": compile_s,
           "peak_rss_mib": rss, "wall_s": wall, "target": args.target,
           "precision": args.precision}
    res.update(mem)
    res.update(parse_report(out))
    return res


def run_torch(fw, model_path, data_path, args):
    opts = {"model": model_path, "data": data_path, "steps": args.steps,
            "warmup": args.warmup, "device": args.device, "shape": shape_of(args),
            "attention": args.torch_attention, "tf32": args.tf32,
            "precision": args.precision,
            "adamw": args.torch_adamw, "compile_mode": args.compile_mode}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", fw,
           "--worker-config", json.dumps(opts)]
    work = os.path.dirname(model_path)
    log = os.path.join(work, fw + ".log")
    env = dict(os.environ)
    if fw == "torch_compile":
        # Empty Inductor and Triton caches, so that the compile time is a cold
        # compilation's, not a cache hit from an earlier run.
        cache = os.path.join(work, "torch_compile_cache")
        shutil.rmtree(cache, ignore_errors=True)
        env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    print("  %s: running" % fw, flush=True)
    rc, out, rss, wall, mem = measured(cmd, log, args, env)
    lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
    if rc != 0 or not lines:
        return failure(fw, rc, log, out)
    res = json.loads(lines[-1][len("RESULT "):])
    if "ms_per_step" in res:
        res.update(peak_rss_mib=rss, wall_s=wall, **mem)
    return res


def add_rates(res, flops, batch):
    """tokens/s and achieved TFLOP/s from the median step time."""
    if "ms_per_step" in res:
        s = res["ms_per_step"] / 1e3
        res.update(tokens_per_s=flops["tokens_per_step"] / s,
                   samples_per_s=batch / s, tflops=flops["flops_per_step"] / s / 1e12)


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def peak_mem(r, device):
    """The memory figure that is compared across frameworks: nvidia-smi's
    on CUDA, the process's peak RSS on the CPU."""
    return r.get("smi_peak_mib") if device == "cuda" else r.get("peak_rss_mib")


def table(results, device, markdown):
    mem_head = "peak GPU MiB (nvidia-smi)" if device == "cuda" else "peak RSS MiB"
    head = ["framework", "ms/step", "tokens/s", "TFLOP/s", mem_head]
    if device == "cuda":
        head.append("torch max allocated MiB")
    head += ["compile s", "Loom speed-up", "Loom mem ratio", "first loss"]
    loom = results.get("loom", {})
    rows, whys = [], []
    for fw, r in results.items():
        if "ms_per_step" not in r:
            whys.append("%s: %s" % (LABELS[fw], r.get("skipped") or r.get("error") or "?"))
            label = "not measured" if "skipped" in r else "FAILED"
            rows.append([LABELS[fw], "%s (%d)" % (label, len(whys))] + [""] * (len(head) - 2))
            continue
        speed = ratio = "-"
        if fw != "loom" and "ms_per_step" in loom:
            speed = "%.2fx" % (r["ms_per_step"] / loom["ms_per_step"])
            a, b = peak_mem(loom, device), peak_mem(r, device)
            if isinstance(a, float) and isinstance(b, float) and b > 0:
                ratio = "%.2f" % (a / b)
        row = [LABELS[fw], fmt(r["ms_per_step"], ".2f"), fmt(r.get("tokens_per_s"), ",.0f"),
               fmt(r.get("tflops"), ".2f" if r.get("tflops", 0) >= 1 else ".3g"),
               fmt(peak_mem(r, device), ",.0f")]
        if device == "cuda":
            row.append(fmt(r.get("torch_max_allocated_mib"), ",.0f"))
        row += [fmt(r.get("compile_s"), ".1f"), speed, ratio, fmt(r.get("first_loss"), ".5f")]
        rows.append(row)
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + " --- |" * len(head))
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
                  for r in [head] + rows]
    if whys and markdown:
        lines.append("")  # ends the Markdown table
    lines += ["(%d) %s" % (i + 1, why) for i, why in enumerate(whys)]
    return "\n".join(lines)


def notes(results, flops, args, batch):
    """The lines under the table: what each column means and how it was measured."""
    shape = dict(shape_of(args), batch=batch, steps=args.steps, warmup=args.warmup,
                 n_params=flops["n_params"], n_matmul=flops["n_matmul_params"],
                 precision="f32" if args.precision == "fp32"
                 else "bf16 mixed precision")
    n = ["Model: GPT, {layers} layers, d {d}, {heads} heads, T {seq}, vocab {vocab}, "
         "batch {batch}, {precision}; {n_params:,} parameters ({n_matmul:,} without the embedding "
         "tables). {steps} timed steps after {warmup} warm-up; ms/step = median."
         .format(**shape),
         "TFLOP/s = model FLOPs / median step time, model FLOPs per step = %s = %.4g TFLOP."
         % (flops["formula"], flops["flops_per_step"] / 1e12)]
    if args.device == "cuda":
        n.append("Peak GPU memory: nvidia-smi memory.used sampled every %d ms while the "
                 "framework's process ran, minus the reading before it started (CUDA "
                 "context and allocator caches included), for every framework; torch "
                 "max allocated: torch.cuda.max_memory_allocated (tensors only). Loom mem "
                 "ratio = Loom's nvidia-smi peak / the other's." % (SMI_INTERVAL_S * 1e3))
        n.append("Times: Loom from loom-run's per-step metrics (the host's wall time of "
                 "each step); PyTorch from CUDA events around each step.")
    else:
        n.append("Peak RSS: the process's ru_maxrss (interpreter and libraries "
                 "included). Loom mem ratio = Loom's peak RSS / the other's.")
    n.append("Loom speed-up = other ms/step / Loom ms/step (> 1: Loom is faster). "
             "compile s: Loom's loomc wall time; torch.compile's first step (compiling it, "
             "with empty Inductor/Triton caches).")
    t = [r for fw, r in results.items() if fw != "loom" and "ms_per_step" in r]
    if t:
        n.append("PyTorch %s: attention %s, AdamW %s, TF32 %s%s." % (
            t[0]["torch_version"], args.torch_attention, args.torch_adamw,
            "on" if args.tf32 else "off",
            ", torch.compile mode %s" % args.compile_mode if "torch_compile" in results else ""))
    loom = results.get("loom", {})
    if "loom_flops_estimate" in loom:
        n.append("Loom target %s; loomc --report: %s" % (loom["target"],
                                                         loom["loom_report_train_step"]))
    return "\n".join(n)


# --------------------------------------------------------------------------
# Self-test: the native module against the ONNX graph's evaluation (CPU)
# --------------------------------------------------------------------------


def _two_steps(params, forward, labels):
    """Two AdamW steps: ([loss 1, loss 2], the first step's gradients)."""
    opt = make_adamw(params.values(), "default")
    losses, grads = [], None
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss = cross_entropy(forward(), labels)
        loss.backward()
        if grads is None:
            grads = {k: p.grad.detach().clone() for k, p in params.items()}
        opt.step()
        losses.append(float(loss.detach()))
    return losses, grads


def self_test(args):
    """Compares the native module (both attention forms) with
    bench/onnx_torch.py's evaluation of the ONNX model: the first two losses
    (rel. 1e-5) and the first step's gradients (rel. L2 1e-4)."""
    if not import_torch():
        print("error: --self-test needs PyTorch")
        return 2
    import onnx
    from onnx_torch import evaluate
    torch.manual_seed(0)
    shape, batch = shape_of(args), args.batch
    with tempfile.TemporaryDirectory() as tmp:
        path = ensure_model(shape, batch, tmp)
        model = onnx.load(path)  # with its external data, for the evaluator
        params, consts = load_initializers(path)
        make_data(onnx.load(path, load_external_data=False), os.path.join(tmp, "data.npz"))
        data = np.load(os.path.join(tmp, "data.npz"))
        ids, labels = torch.from_numpy(data["input_ids"]), torch.from_numpy(data["labels"])

    ref_params = {k: nn.Parameter(torch.from_numpy(v.copy())) for k, v in params.items()}
    env = {k: torch.from_numpy(np.array(v)) for k, v in consts.items()}
    ref_losses, ref_grads = _two_steps(
        ref_params, lambda: evaluate(model, {**env, "input_ids": ids, **ref_params})[0], labels)
    print("self-test: %(layers)d layers, d %(d)d, %(heads)d heads, T %(seq)d, vocab %(vocab)d"
          % shape + ", batch %d, CPU" % batch)
    print("  ONNX graph (bench/onnx_torch.py): losses %.7f %.7f" % tuple(ref_losses))
    ok = True
    for attention in ("math", "sdpa"):
        gpt = GPT(shape["layers"], shape["d"], shape["heads"], shape["seq"], shape["vocab"],
                  attention)
        load_onnx_weights(gpt, params)
        named = dict(gpt.named_parameters())
        losses, grads = _two_steps(named, lambda: gpt(ids), labels)
        transposed = linear_weights(gpt)
        worst = 0.0
        for key, g in grads.items():
            ref = ref_grads[onnx_name(key)]
            ref = ref.t() if key in transposed else ref
            worst = max(worst, float((g - ref).norm() / ref.norm().clamp_min(1e-30)))
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
        good = loss_err <= 1e-5 and worst <= 1e-4
        ok &= good
        print("  native GPT, attention %-4s: losses %.7f %.7f; loss rel. diff %.1e, worst "
              "gradient rel. L2 diff %.1e: %s"
              % (attention, losses[0], losses[1], loss_err, worst, "ok" if good else "FAIL"))
    print("self-test %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int,
                    help="sequences per step (default 8; --self-test: 2)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=5,
                    help="untimed first steps, at least 1 (default 5)")
    ap.add_argument("--layers", type=int, help="default %d" % DEFAULT_SHAPE["layers"])
    ap.add_argument("--d", type=int, help="model width (default %d)" % DEFAULT_SHAPE["d"])
    ap.add_argument("--heads", type=int, help="default %d" % DEFAULT_SHAPE["heads"])
    ap.add_argument("--seq", type=int, help="sequence length T (default %d)"
                    % DEFAULT_SHAPE["seq"])
    ap.add_argument("--vocab", type=int, help="default %d" % DEFAULT_SHAPE["vocab"])
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: for small tests only")
    ap.add_argument("--target", help="loomc's --target (default cuda:sm_90 with --device "
                    "cuda, cpu with --device cpu)")
    ap.add_argument("--tf32", action="store_true",
                    help="allow TF32 matmuls (PyTorch's allow_tf32, Loom's "
                         "LOOMRT_CUDA_ALLOW_TF32=1); default: strict f32")
    ap.add_argument("--torch-attention", choices=["sdpa", "math"], default="sdpa",
                    help="F.scaled_dot_product_attention (default) or the ONNX graph's "
                         "matmul/mask/softmax/matmul")
    ap.add_argument("--torch-adamw", choices=["default", "foreach", "fused", "single"],
                    help="torch.optim.AdamW implementation (default: fused on CUDA, "
                         "PyTorch's default on the CPU)")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode (default, reduce-overhead, max-autotune)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: mixed precision (loomc --precision=bf16; "
                         "PyTorch's autocast to bf16); default: f32")
    ap.add_argument("--loomc", default=os.path.join(ROOT, "build", "bin", "loomc"))
    ap.add_argument("--loom-run", default=os.path.join(ROOT, "build", "bin", "loom-run"))
    ap.add_argument("--loomc-flags", default="",
                    help="more loomc flags for Loom's artifact, e.g. --cuda-fuse-rows=false")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "out", "bench_gpt2"))
    ap.add_argument("--loom-compile-only", metavar="DIR",
                    help="only generate the model and compile Loom's artifact into DIR "
                         "(no GPU needed; DIR/compile.json keeps the compile time and "
                         "report), for --loom-prebuilt on a GPU machine without MLIR")
    ap.add_argument("--loom-prebuilt", metavar="DIR",
                    help="run the artifact in DIR (from --loom-compile-only, same shape "
                         "and batch) instead of calling loomc; without "
                         "DIR/params.safetensors it is written from the model's weights")
    ap.add_argument("--json", help="also write the results, configuration and machine here")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--self-test", action="store_true",
                    help="check the PyTorch module against the ONNX graph on the CPU "
                         "(tiny shape unless overridden) and exit")
    # Worker mode (internal).
    ap.add_argument("--worker", choices=["torch", "torch_compile"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-config", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    base = TINY_SHAPE if args.self_test else DEFAULT_SHAPE
    for k, v in base.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.batch is None:
        args.batch = 2 if args.self_test else 8
    if args.target is None:
        args.target = "cuda:sm_90" if args.device == "cuda" else "cpu"
    if args.torch_adamw is None:
        args.torch_adamw = "fused" if args.device == "cuda" else "default"
    if args.warmup < 1 or args.steps < 1:
        ap.error("--steps and --warmup must be at least 1 (the first step is never timed)")
    if args.d % args.heads:
        ap.error("--d %d is not a multiple of --heads %d" % (args.d, args.heads))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.self_test:
        return self_test(args)
    frameworks = [f for f in args.frameworks.split(",") if f]
    bad = [f for f in frameworks if f not in FRAMEWORKS]
    if bad:
        print("error: unknown framework(s) %s (known: %s)" % (", ".join(bad),
                                                              ", ".join(FRAMEWORKS)))
        return 2
    if args.loom_compile_only:
        os.makedirs(args.workdir, exist_ok=True)
        model_path = ensure_model(shape_of(args), args.batch, args.workdir)
        fail, _, compile_s = compile_loom(model_path, args.loom_compile_only, args)
        if fail:
            print("loomc failed: %s" % fail.get("error"))
            return 1
        print("compiled %s in %.1f s" % (args.loom_compile_only, compile_s))
        return 0
    info = machine_info()
    if args.device == "cuda":
        gpu = smi_query("name,driver_version,memory.total", gpu_index())
        if gpu is None:
            print("error: --device cuda needs an NVIDIA GPU, and nvidia-smi finds none "
                  "here. This benchmark is meant for a GPU machine; on the CPU, use "
                  "--device cpu with a small shape (e.g. --layers 2 --d 64 --heads 4 "
                  "--seq 32 --vocab 128 --batch 2), or --self-test.")
            return 2
        info.update(gpu=gpu[0], gpu_driver=gpu[1], gpu_memory_mib=gpu[2])
    elif args.target != "cpu":
        print("error: --device cpu runs Loom with --target=cpu, not %s" % args.target)
        return 2

    os.makedirs(args.workdir, exist_ok=True)
    import onnx
    shape = shape_of(args)
    model_path = ensure_model(shape, args.batch, args.workdir)
    data_path = os.path.join(os.path.dirname(model_path), "data.npz")
    batch = make_data(onnx.load(model_path, load_external_data=False), data_path)
    flops = flop_model(model_path, shape, batch)
    print("%s; %s; %d timed steps after %d warm-up; model %s"
          % (info.get("gpu", info.get("cpu", "?")), info["date"], args.steps, args.warmup,
             os.path.relpath(model_path, ROOT)), flush=True)

    results = {}
    loom_why = loom_available(args) if "loom" in frameworks and not args.loom_prebuilt \
        else None
    for fw in frameworks:
        if fw == "loom":
            res = {"skipped": loom_why} if loom_why else \
                run_loom(model_path, data_path, batch, args)
        else:
            res = run_torch(fw, model_path, data_path, args)
        add_rates(res, flops, batch)
        results[fw] = res
        if "ms_per_step" in res:
            print("  %-14s %9.2f ms/step  %10.0f tokens/s  %7.3g TFLOP/s"
                  % (fw, res["ms_per_step"], res["tokens_per_s"], res["tflops"]), flush=True)
        else:
            print("  %-14s %s" % (fw, res.get("skipped") or "FAILED: " + res.get("error", "?")),
                  flush=True)

    print()
    print(table(results, args.device, args.markdown))
    print()
    print(notes(results, flops, args, batch))
    # Same weights, data and steps: the losses must agree (to f32 rounding
    # without TF32; with it, the check only warns).
    consistent = check_losses({"gpt": results}) or args.tf32
    if args.json:
        info.update(shape=shape, batch=batch, steps=args.steps, warmup=args.warmup,
                    device=args.device, target=args.target, tf32=args.tf32,
                    torch_attention=args.torch_attention, torch_adamw=args.torch_adamw,
                    compile_mode=args.compile_mode)
        with open(args.json, "w") as f:
            json.dump({"machine": info, "flops": flops, "results": results}, f, indent=1)
    failed = any("error" in r for r in results.values())
    return 1 if failed or not consistent else 0


if __name__ == "__main__":
    sys.exit(main())
