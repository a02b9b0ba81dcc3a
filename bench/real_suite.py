#!/usr/bin/env python3
"""The real-size suite of bench/run.py (`run.py --suite real`): torchvision's
ResNet-18 and MobileNetV3-small and transformers' GPT-2 and Llama, exported
by PyTorch, trained by Loom, PyTorch eager, torch.compile and JAX (jit) on
the CPU with 1 and 2 threads. run.py's docstring and docs/performance.md
("CPU at real sizes: `bench/run.py --suite real`") describe the method.

Needs (not the project's CI): torch, torchvision, transformers, onnxscript,
onnx, jax and numpy in the Python that runs it, and the built loomc and
loom-run. Internal: `real_suite.py --worker KIND --worker-config JSON` is a
subprocess's side.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "utils"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

import run  # noqa: E402  (the toy suite: data, timing, child processes, Loom)

FRAMEWORKS = run.REAL_FRAMEWORKS
MODELS = run.REAL_MODELS
LABELS = {"loom": "Loom", "torch": "PyTorch eager", "torch_compile": "torch.compile",
          "jax": "JAX jit"}
# The language models: issue 15's GPT-2 shape (4 layers, d 256, 4 heads, T 128;
# vocabulary 50304 as in docs/performance.md's GPT section), and a Llama of
# about the same size with Llama's own 32000-token vocabulary (untied head,
# SwiGLU MLP of width 704 ~ 8/3 d, RMSNorm, rotary positions).
SEQ = 128
GPT2 = dict(vocab_size=50304, n_positions=SEQ, n_embd=256, n_layer=4, n_head=4,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
LLAMA = dict(vocab_size=32000, hidden_size=256, intermediate_size=704,
             num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
             max_position_embeddings=SEQ)
# docs/PERF-NOTES' Qwen2 (grouped-query attention: 8 query, 4 key/value
# heads), trained at --seq up to 4096 (the fused attention's benchmark).
QWEN2 = dict(vocab_size=8192, hidden_size=512, intermediate_size=1408,
             num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4)
# GPT-2 small itself (124 M parameters with its 50257-token vocabulary,
# padded to 50304 as in docs/performance.md): the LM head's benchmark
# (bench/long_context.py), not a member of the timed suite.
GPT2_SMALL = dict(vocab_size=50304, n_embd=768, n_layer=12, n_head=12,
                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
GEMM_N = 2048  # the roofline's square sgemm


# --------------------------------------------------------------------------
# The models (PyTorch side; in the workers only)
# --------------------------------------------------------------------------


def build_module(name, opts):
    """The model, with random weights from seed 0, in training mode; its
    forward takes the batch's input tensor and returns the logits."""
    import torch
    if name in ("resnet18", "mobilenet_v3_small"):
        from vision_cpu import build_model  # dropout removed, seed 0
        return build_model(name, opts["classes"]).train()
    from export_zoo import LogitsOnly
    import transformers
    torch.manual_seed(0)
    seq = opts.get("seq", SEQ)
    if name == "gpt2":
        inner = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            **dict(GPT2, n_positions=seq)))
    elif name == "llama":
        inner = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            **dict(LLAMA, max_position_embeddings=seq)))
    elif name == "gpt2_small":
        inner = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            **dict(GPT2_SMALL, n_positions=seq)))
    elif name == "qwen2":
        inner = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
            **QWEN2, max_position_embeddings=seq))
    else:
        raise ValueError("unknown model " + name)
    return LogitsOnly(inner).train()


def example_input(name, opts):
    """(input name, a zero batch of the input's shape and dtype) for export."""
    import torch
    if name in ("gpt2", "gpt2_small", "llama", "qwen2"):
        return "input_ids", torch.zeros(opts["batch"], opts.get("seq", SEQ),
                                        dtype=torch.int64)
    return "input", torch.zeros(opts["batch"], 3, opts["image_size"], opts["image_size"])


def worker_prepare(opts):
    """Exports the model (weights as ONNX external data, so that the
    orchestrator can read the graph without them) and saves its state dict."""
    import torch
    name = opts["name"]
    model = build_module(name, opts)
    torch.save(model.state_dict(), opts["weights"])
    input_name, x = example_input(name, opts)
    t0 = time.perf_counter()
    with torch.no_grad():
        # optimize=False: the exporter's optimizer would fold BatchNormalization
        # into the convolutions with the running statistics (docs/performance.md).
        torch.onnx.export(model, (x,), opts["onnx"], input_names=[input_name],
                          output_names=["logits"], external_data=True, optimize=False)
    return {"export_s": time.perf_counter() - t0, "torch_version": torch.__version__,
            "parameters": sum(p.numel() for p in model.parameters())}


def worker_torch(opts, compiled):
    """PyTorch eager (or torch.compile of the module; loss and AdamW eager)."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(opts["threads"])
    model = build_module(opts["name"], opts)
    model.load_state_dict(torch.load(opts["weights"]))
    data = np.load(opts["data"])
    x = torch.from_numpy(data[opts["input"]])
    y = torch.from_numpy(data["labels"])
    opt = torch.optim.AdamW(model.parameters(), lr=run.LR, betas=(run.BETA1, run.BETA2),
                            eps=run.EPS, weight_decay=run.WD)
    forward = torch.compile(model) if compiled else model

    def step(_):
        opt.zero_grad(set_to_none=True)
        logits = forward(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    times, first, last, first_s = run.timed_steps(step, opts["warmup"] + opts["steps"],
                                                  opts["warmup"])
    res = run.summarize(times, x.shape[0])
    res.update(first_loss=first, last_loss=last, version=torch.__version__,
               threads=torch.get_num_threads())
    if compiled:
        res["compile_s"] = first_s  # the first step: compilation + one step
    return res


def worker_jax(opts):
    """The exported graph on JAX (bench/onnx_jax.py), AdamW, one jax.jit."""
    import jax.numpy as jnp
    import onnx
    import onnx_jax
    model = onnx.load(opts["onnx"])  # with its external data
    params, consts = onnx_jax.split_initializers(model)
    ins, _ = run.model_io(model)
    data = dict(np.load(opts["data"]))
    train_step = run.jax_train_step(model, onnx_jax.evaluate, consts,
                                    [n for n, _, _ in ins])
    res = run.run_jax_steps(train_step, {k: jnp.asarray(v) for k, v in params.items()},
                            [{k: jnp.asarray(v) for k, v in data.items()}],
                            opts["steps"], opts["warmup"], ins[0][1][0])
    res["compile_s"] = res["first_call_s"]  # tracing + XLA compilation + one step
    return res


def worker_roofline(opts):
    """The best GFLOP/s of a GEMM_N^3 f32 GEMM on opts["threads"] threads:
    torch.matmul, or numpy's (OpenBLAS, limited by threadpoolctl)."""
    n, reps = GEMM_N, 10
    if opts["lib"] == "torch":
        import torch
        torch.set_num_threads(opts["threads"])
        a, b = torch.randn(n, n), torch.randn(n, n)
        mm, info = (lambda: torch.matmul(a, b)), {"version": torch.__version__}
    else:
        from threadpoolctl import threadpool_info, threadpool_limits
        threadpool_limits(opts["threads"])
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        mm = lambda: a @ b  # noqa: E731
        info = {"version": np.__version__, "blas": [
            {k: p.get(k) for k in ("internal_api", "version", "architecture",
                                   "num_threads")} for p in threadpool_info()]}
    times = []
    for _ in range(reps + 2):
        t0 = time.perf_counter()
        mm()
        times.append(time.perf_counter() - t0)
    info["gflops"] = 2 * n ** 3 / min(times[2:]) / 1e9
    return info


WORKERS = {"prepare": worker_prepare, "jax": worker_jax, "roofline": worker_roofline,
           "torch": lambda o: worker_torch(o, False),
           "torch_compile": lambda o: worker_torch(o, True)}


def worker_main(kind, config):
    opts = json.loads(config)
    try:
        res = WORKERS[kind](opts)
    except ImportError as e:
        res = {"skipped": "%s: %s" % (kind, e)}  # e.g. "prepare: No module named 'torch'"
    print("RESULT " + json.dumps(res), flush=True)
    return 0


# --------------------------------------------------------------------------
# Orchestrator (numpy and onnx only: a child's peak RSS starts from this
# process's size when it is forked)
# --------------------------------------------------------------------------


def model_flops(model):
    """Training FLOPs per step: 3 x the forward FLOPs of the graph's MatMul,
    Gemm and Conv nodes (2 per multiply-add; the backward pass computes two
    such products, the input's and the weight's gradients, per forward one).
    Elementwise ops, normalizations and the optimizer are not counted."""
    import onnx
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    for vi in list(model.graph.value_info) + list(model.graph.input) + \
            list(model.graph.output):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for t in model.graph.initializer:
        shapes[t.name] = list(t.dims)
    fwd = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            out, w = shapes[node.output[0]], shapes[node.input[1]]
            fwd += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
        elif node.op_type in ("MatMul", "Gemm"):
            lhs, out = shapes[node.input[0]], shapes[node.output[0]]
            k = lhs[0] if node.op_type == "Gemm" and any(
                at.name == "transA" and at.i for at in node.attribute) else lhs[-1]
            fwd += 2 * int(np.prod(out)) * k
    return 3 * fwd


def python_worker(kind, opts, log, cpus=None, env=None):
    """Runs this file's worker KIND in a subprocess; its result dict, with its
    peak RSS and wall time."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind,
           "--worker-config", json.dumps(opts)]
    rc, out, rss, wall = run.run_child(cmd, log, env=env, cpus=cpus)
    lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
    if rc != 0 or not lines:
        return run.failure(kind, rc, log, out)
    res = json.loads(lines[-1][len("RESULT "):])
    res.update(peak_rss_mib=rss, wall_s=wall)
    return res


def first_cpus(n):
    """The first N CPUs this process may run on: an N-thread run is pinned
    to them (on a 2-core machine, 2 threads = both cores)."""
    return set(sorted(os.sched_getaffinity(0))[:n])


def roofline(work):
    """Peak f32 GEMM GFLOP/s per thread count (the best of torch.matmul and
    numpy's OpenBLAS, the latter with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
    unset, in its own process only)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    peaks = {}
    for threads in (1, 2):
        cpus = first_cpus(threads)
        per = {}
        for lib in ("torch", "numpy"):
            per[lib] = python_worker("roofline", {"lib": lib, "threads": threads},
                                     os.path.join(work, "roofline-%s-%d.log" % (lib, threads)),
                                     cpus=cpus, env=env if lib == "numpy" else None)
        best = max((r.get("gflops", 0.0), lib) for lib, r in per.items())
        peaks[threads] = {"gflops": best[0], "library": best[1], "runs": per}
        print("  roofline, %d thread(s): %s" % (threads, ", ".join(
            "%s%s %.1f GFLOP/s" % (lib, "".join(
                " (%s %s)" % (b["internal_api"], b["architecture"])
                for b in r.get("blas", [])), r["gflops"]) if "gflops" in r else
            "%s %s" % (lib, r.get("error") or r.get("skipped"))
            for lib, r in per.items())), flush=True)
    return peaks


def run_one(fw, name, threads, paths, args, work, loom_art):
    """One (model, framework, thread count) run in a process of its own."""
    cpus = first_cpus(threads)
    stem = os.path.join(work, "%s.%s.%dt" % (name, fw, threads))
    if fw == "loom":
        if "error" in loom_art or "skipped" in loom_art:
            return dict(loom_art)
        res = run.run_loom_artifact(loom_art["art"], paths["data"], paths["batch"],
                                    args, stem, threads=threads, cpus=cpus)
        if "ms_per_step" in res:
            res["compile_s"] = loom_art["compile_s"]
        return res
    opts = dict(paths["opts"], threads=threads, steps=args.steps, warmup=args.warmup)
    env = dict(os.environ)
    if fw == "jax" and threads == 1:
        # XLA takes no thread count: the pinning to one CPU is what keeps it
        # to one thread; the flag only stops Eigen's own thread pool.
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            " --xla_cpu_multi_thread_eigen=false").strip()
    if fw == "torch_compile":  # a cold compilation, not a cache hit
        cache = tempfile.mkdtemp(prefix="inductor-", dir=work)
        env.update(TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
    return python_worker(fw, opts, stem + ".log", cpus=cpus, env=env)


def prepare(name, args, work):
    """Exports NAME (in a subprocess) and writes its batch; the paths and
    the worker options, or a failure dict."""
    import onnx
    opts = {"name": name, "batch": args.batch, "image_size": args.image_size,
            "classes": args.classes, "seq": args.seq,
            "onnx": os.path.join(work, name + ".onnx"),
            "weights": os.path.join(work, name + ".pt"),
            "data": os.path.join(work, name + ".npz")}
    res = python_worker("prepare", opts, os.path.join(work, name + ".export.log"))
    if "export_s" not in res:
        return res
    graph = onnx.load(opts["onnx"], load_external_data=False)
    batch = run.make_data(graph, opts["data"])
    opts["input"] = run.model_io(graph)[0][0][0]
    return {"opts": opts, "batch": batch, "data": opts["data"],
            "flops": model_flops(graph), "parameters": res["parameters"],
            "torch_version": res["torch_version"]}


def compile_for_loom(name, paths, args, work):
    why = run.loom_available(args)
    if why:
        return {"skipped": why}
    art = os.path.join(work, name + ".loom")
    fail, out, compile_s = run.compile_loom(args.loomc, paths["opts"]["onnx"], art,
                                            os.path.join(work, name + ".loomc.log"),
                                            ["--report"])
    if fail:
        return fail
    from gpt2_gpu import parse_report
    facts = parse_report(out)
    return {"art": art, "compile_s": compile_s,
            "loom_flops_estimate": facts.get("loom_flops_estimate")}


def add_rates(res, flops, peak):
    if "ms_per_step" in res:
        res["gflops"] = flops / (res["ms_per_step"] / 1e3) / 1e9
        if peak:
            res["pct_of_peak"] = 100.0 * res["gflops"] / peak


def table(rows, markdown):
    head = ["model", "framework", "threads", "ms/step", "samples/s", "GFLOP/s",
            "% of peak", "peak RSS MiB", "compile s", "first loss"]
    lines, body = [], []
    for r in rows:
        lead = [r["model"], LABELS.get(r["framework"], r["framework"]), str(r["threads"])]
        if "ms_per_step" not in r:
            label = "not measured" if "skipped" in r else "FAILED"
            why = (r.get("skipped") or r.get("error") or "?").replace("|", "/")
            body.append(lead + ["%s: %s" % (label, why)] + [""] * (len(head) - 4))
            continue
        body.append(lead + [run.fmt(r["ms_per_step"], ".1f"),
                            run.fmt(r["samples_per_s"], ".1f"),
                            run.fmt(r.get("gflops"), ".1f"),
                            run.fmt(r.get("pct_of_peak"), ".1f"),
                            run.fmt(r["peak_rss_mib"], ".0f"),
                            run.fmt(r.get("compile_s"), ".1f"),
                            run.fmt(r.get("first_loss"), ".6f")])
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + " --- |" * len(head))
        lines += ["| " + " | ".join(b) + " |" for b in body]
    else:
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip()
                  for b in [head] + body]
    return "\n".join(lines)


def main(args):
    """`run.py --suite real` (ARGS: run.py's parsed options)."""
    work = args.workdir
    os.makedirs(work, exist_ok=True)
    models = [m for m in args.models.split(",") if m]
    frameworks = [f for f in args.frameworks.split(",") if f]
    bad = [m for m in models if m not in MODELS] + \
        [f for f in frameworks if f not in FRAMEWORKS]
    if bad:
        print("error: unknown model or framework %s (models: %s; frameworks: %s)"
              % (", ".join(bad), ", ".join(MODELS), ", ".join(FRAMEWORKS)))
        return 2
    thread_counts = [int(t) for t in args.threads.split(",")]
    info = run.machine_info()
    info.update(suite="real", steps=args.steps, warmup=args.warmup, batch=args.batch,
                image_size=args.image_size, classes=args.classes, seq=args.seq,
                gpt2=GPT2, llama=LLAMA, qwen2=QWEN2, threads=thread_counts,
                uptime_before=run_uptime(), env={k: os.environ[k] for k in os.environ
                                                 if k.startswith(("OPENBLAS_", "OMP_"))})
    print("machine: %s, %s cores; %s; %d timed steps after %d warm-up; load %s"
          % (info.get("cpu", "?"), info["nproc"], info["date"], args.steps, args.warmup,
             info["uptime_before"]), flush=True)
    peaks = roofline(work)
    info["roofline"] = peaks
    rows = []
    for name in models:
        print("== %s: export" % name, flush=True)
        paths = prepare(name, args, work)
        if "opts" not in paths:
            rows += [dict(paths, model=name, framework=fw, threads=t)
                     for fw in frameworks for t in thread_counts]
            continue
        info.setdefault("models", {})[name] = {
            k: paths[k] for k in ("batch", "flops", "parameters", "torch_version")}
        loom_art = {}
        if "loom" in frameworks:
            print("== %s: loomc" % name, flush=True)
            loom_art = compile_for_loom(name, paths, args, work)
            info["models"][name]["loom_flops_estimate"] = loom_art.get(
                "loom_flops_estimate")
        for t in thread_counts:
            for fw in frameworks:
                res = run_one(fw, name, t, paths, args, work, loom_art)
                add_rates(res, paths["flops"], peaks.get(t, {}).get("gflops"))
                res.update(model=name, framework=fw, threads=t, batch=paths["batch"])
                rows.append(res)
                print("  %-18s %-14s %dt %s" % (name, fw, t, (
                    "%9.1f ms/step %8.1f GFLOP/s %6.0f MiB first loss %.6f"
                    % (res["ms_per_step"], res["gflops"], res["peak_rss_mib"],
                       res["first_loss"]) if "ms_per_step" in res else
                    res.get("skipped") or "FAILED: " + str(res.get("error")))), flush=True)
    info["uptime_after"] = run_uptime()
    print()
    print(table(rows, args.markdown))
    print()
    print("GFLOP/s: 3 x the forward FLOPs of the exported graph's MatMul/Gemm/Conv "
          "nodes per step (%s) / median step time; %% of peak: of the measured f32 "
          "GEMM peak at that thread count (%s). N threads: pinned to N CPUs." % (
              ", ".join("%s %.2f GFLOP" % (m, v["flops"] / 1e9)
                        for m, v in info.get("models", {}).items()),
              ", ".join("%d: %.1f GFLOP/s (%s)" % (t, p["gflops"], p["library"])
                        for t, p in peaks.items())))
    print("load: before %s; after %s" % (info["uptime_before"], info["uptime_after"]))
    # Same weights, batch and steps: the first losses must agree.
    consistent = run.check_losses({"%s, %d thread(s)" % (m, t): {
        r["framework"]: r for r in rows if r["model"] == m and r["threads"] == t}
        for m in models for t in thread_counts})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": rows}, f, indent=1)
    failed = any("error" in r for r in rows)
    return 1 if failed or not consistent else 0


def run_uptime():
    """The 1-, 5- and 15-minute load averages, as `uptime` prints them."""
    return "load average: %.2f, %.2f, %.2f" % os.getloadavg()


def _worker_cli():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=sorted(WORKERS), required=True)
    ap.add_argument("--worker-config", required=True)
    args = ap.parse_args()
    return worker_main(args.worker, args.worker_config)


if __name__ == "__main__":
    sys.exit(_worker_cli())
