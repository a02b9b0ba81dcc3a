#!/usr/bin/env python3
"""Training-step speed of torchvision models on the CPU: Loom vs PyTorch.

For each model (torchvision's own classes, random weights from a fixed seed,
dropout layers removed, training mode so BatchNormalization uses batch
statistics: `loomc --batch-norm=batch`), the script
exports it with torch.onnx.export, compiles the ONNX file with `loomc --train
--target=cpu` (cross-entropy, SGD) and times `loom-run --train` on one fixed
batch; PyTorch eager and torch.compile train the same module, from the same
weights, on the same batch with the same optimizer. Each framework and thread
count runs in a process of its own. Reported: the median ms per step after the
warm-up steps, samples/s, compile time (loomc; torch.compile's first step) and
the first loss (equal to ~6 digits when both compute the same thing).

Needs torch and torchvision (not the project's CI: `pip install torch
torchvision onnxscript` in any venv) and the built loomc and loom-run.

    python3 bench/vision_cpu.py --models resnet18,mobilenet_v3_small \\
        --threads 1,2 --markdown
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
LR = 0.01


def build_model(name, classes):
    """The torchvision model with its dropout layers removed (identity): in
    training mode they export as RandomUniformLike, which Loom does not
    import, and random masks would make the two sides differ anyway."""
    import torch
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=classes)
    for parent in model.modules():
        for child_name, child in parent.named_children():
            if isinstance(child, torch.nn.Dropout):
                setattr(parent, child_name, torch.nn.Identity())
    return model


def batch_arrays(args):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32)
    y = rng.integers(0, args.classes, (args.batch,)).astype(np.int64)
    return x, y


def prepare(name, args, work):
    """Exports the model (training mode) and saves its weights and the
    batch; returns (onnx path, weights path, data path)."""
    import numpy as np
    import torch
    model = build_model(name, args.classes).train()
    weights = os.path.join(work, name + ".pt")
    torch.save(model.state_dict(), weights)
    x, y = batch_arrays(args)
    path = os.path.join(work, name + ".onnx")
    with torch.no_grad():
        # optimize=False: the exporter's optimizer folds BatchNormalization
        # into the convolutions with the running statistics (inference
        # semantics) even for a model in training mode.
        torch.onnx.export(model, (torch.from_numpy(x),), path,
                          input_names=["input"], output_names=["logits"],
                          external_data=False, optimize=False)
    data = os.path.join(work, name + ".npz")
    np.savez(data, input=x, labels=y)
    return path, weights, data


def worker(args):
    """One PyTorch run (a child process): prints a JSON line."""
    import numpy as np
    import torch
    torch.set_num_threads(args.threads_one)
    model = build_model(args.model, args.classes).train()
    model.load_state_dict(torch.load(args.weights))
    d = np.load(args.data)
    x, y = torch.from_numpy(d["input"]), torch.from_numpy(d["labels"])
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if args.framework == "torch_compile":
        step = torch.compile(step)
    times, losses = [], []
    for _ in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        losses.append(float(step()))
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_ms": 1e3 * statistics.median(times[args.warmup:]),
                      "first_loss": losses[0],
                      "compile_s": times[0] if args.framework == "torch_compile" else None}))


def run_child(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def run_torch(framework, name, weights, data, threads, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker",
           "--framework", framework, "--model", name, "--weights", weights,
           "--data", data, "--threads-one", str(threads),
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--classes", str(args.classes)]
    rc, out, err = run_child(cmd)
    if rc != 0:
        return {"error": (err or out).strip().splitlines()[-1:]}
    return json.loads(out.strip().splitlines()[-1])


def compile_loom(path, art, args):
    shutil.rmtree(art, ignore_errors=True)
    cmd = [args.loomc, path, "--train", "--loss=cross_entropy",
           "--labels=labels", "--optimizer=sgd", "--lr=%r" % LR,
           "--batch-norm=batch", "--target=cpu", "-o", art]
    t0 = time.perf_counter()
    rc, out, err = run_child(cmd)
    if rc != 0:
        return None, (err or out).strip()
    return time.perf_counter() - t0, None


def run_loom(art, data, threads, compile_s, args, work):
    from run import loom_step_times
    metrics = os.path.join(work, "loom-%d.jsonl" % threads)
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.loom_run, art, "--train", "--data", data, "--steps",
           str(args.warmup + args.steps), "--batch-size", str(args.batch),
           "--threads", str(threads), "--metrics", metrics, "--quiet"]
    rc, out, err = run_child(cmd)
    if rc != 0:
        return {"error": (err or out).strip().splitlines()[-1:]}
    times, first, _ = loom_step_times(metrics, args.batch, args.warmup)
    return {"step_ms": 1e3 * statistics.median(times), "first_loss": first,
            "compile_s": compile_s}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v3_small")
    ap.add_argument("--frameworks", default="loom,torch,torch_compile")
    ap.add_argument("--threads", default="1,2",
                    help="thread counts to run each framework with")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--size", type=int, default=32, help="image side")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--loomc", default=os.path.join(ROOT, "build", "bin", "loomc"))
    ap.add_argument("--loom-run", default=os.path.join(ROOT, "build", "bin", "loom-run"))
    ap.add_argument("--workdir", help="keep the models and artifacts here")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="write the results here")
    # Child-process mode (internal).
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--framework", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    work = args.workdir or tempfile.mkdtemp(prefix="loom-vision-")
    os.makedirs(work, exist_ok=True)
    threads = [int(t) for t in args.threads.split(",")]
    frameworks = args.frameworks.split(",")
    results = []
    for name in args.models.split(","):
        print("== %s: exporting" % name, file=sys.stderr)
        path, weights, data = prepare(name, args, work)
        art = os.path.join(work, name + ".loom")
        compile_s = err = None
        if "loom" in frameworks:
            print("== %s: loomc" % name, file=sys.stderr)
            compile_s, err = compile_loom(path, art, args)
        for fw in frameworks:
            for n in threads:
                print("== %s: %s, %d thread(s)" % (name, fw, n), file=sys.stderr)
                if fw == "loom":
                    r = ({"error": err} if err else
                         run_loom(art, data, n, compile_s, args, work))
                else:
                    r = run_torch(fw, name, weights, data, n, args)
                r.update(model=name, framework=fw, threads=n)
                results.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    rows = [("model", "framework", "threads", "ms/step", "samples/s",
             "compile s", "first loss")]
    for r in results:
        if "error" in r:
            rows.append((r["model"], r["framework"], str(r["threads"]),
                         "error: %s" % r["error"], "", "", ""))
            continue
        rows.append((r["model"], r["framework"], str(r["threads"]),
                     "%.1f" % r["step_ms"],
                     "%.1f" % (1e3 * args.batch / r["step_ms"]),
                     "" if r.get("compile_s") is None else "%.1f" % r["compile_s"],
                     "%.6f" % r["first_loss"]))
    if args.markdown:
        print("| " + " | ".join(rows[0]) + " |")
        print("|" + " --- |" * len(rows[0]))
        for row in rows[1:]:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print("  ".join("%-18s" % c for c in row))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
