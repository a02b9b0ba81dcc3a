#!/usr/bin/env python3
"""Training from a large token stream: peak memory, speed against .npz, and
the first step's loss against the same windows.

Makes (or reuses) a file of --gigabytes of random uint16 tokens in
--workdir, the small GPT-2 of test/e2e/token_stream.py (batch 4 x T 16),
and compiles it for the CPU. Then:
  1. `loom-run --train --tokens=uint16` for --steps steps over the big file,
     in a child process whose peak RSS (ru_maxrss) is reported: the corpus
     is read window by window, so it must stay far below the file's size;
  2. the step-1 loss of that run against `loom-run --entry=forward` on
     the same windows (taken from --data-trace) given as .npy arrays, and
     against one training step on them given as an .npz: they must be
     equal (1e-6: the .npz batch's rows are shuffled);
  3. samples per second (median over the steps after the first; the best
     of --repeats alternated runs) from a --small-tokens prefix of the file
     as a token stream and the same windows as an .npz (the .npz is read
     whole, the stream window by window).

    .venv/bin/python bench/token_stream.py --gigabytes 4 --steps 200
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import token_stream as ts  # noqa: E402


def child_rss(cmd):
    """Runs cmd in a child Python that reports the child's peak RSS."""
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(r.returncode)")
    out = subprocess.run([sys.executable, "-c", code] + cmd, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return int(out.strip().splitlines()[-1]) * 1024


def make_tokens(path, gigabytes, vocab):
    n = int(gigabytes * (1 << 30)) // 2
    if os.path.exists(path) and os.path.getsize(path) == 2 * n:
        return n
    rng = np.random.default_rng(0)
    chunk = 1 << 26
    with open(path, "wb") as f:
        for start in range(0, n, chunk):
            rng.integers(0, vocab, min(chunk, n - start)).astype(
                "<u2").tofile(f)
    return n


def metrics_of(path):
    with open(path) as f:
        return [json.loads(l) for l in f if '"loss"' in l]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gigabytes", type=float, default=4.0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--small-tokens", type=int, default=1 << 22)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp/loom-token-bench")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    w = args.workdir
    os.makedirs(w, exist_ok=True)
    loomc = os.path.join(args.bin, "loomc")
    run = os.path.join(args.bin, "loom-run")
    if not os.path.exists(os.path.join(w, "gpt.onnx")):
        ts.make(w)
    art = os.path.join(w, "gpt.loom")
    subprocess.run([loomc, os.path.join(w, "gpt.onnx"), "--train",
                    "--loss=cross_entropy", "--optimizer=sgd", "--target=cpu",
                    "-o", art], check=True)
    big = os.path.join(w, "big.bin")
    n = make_tokens(big, args.gigabytes, ts.VOCAB)
    print("token file: %s, %d tokens (%.2f GiB), %d windows of %d" %
          (big, n, 2 * n / (1 << 30), (n - 1) // ts.T, ts.T + 1))

    # 1. Peak RSS over the big file.
    trace, met = os.path.join(w, "big.trace"), os.path.join(w, "big.jsonl")
    for f in (trace, met):
        if os.path.exists(f):
            os.remove(f)
    rss = child_rss([run, art, "--train", "--data", big, "--tokens=uint16",
                     "--steps", str(args.steps), "--progress=none",
                     "--metrics", met, "--data-trace", trace])
    rows = metrics_of(met)
    print("peak RSS training %d steps from the %.2f GiB file: %.1f MiB" %
          (args.steps, 2 * n / (1 << 30), rss / (1 << 20)))

    # 2. Step 1's loss against the same windows through --entry=forward.
    tokens = np.memmap(big, "<u2", mode="r")
    with open(trace) as f:
        samples = json.loads(f.readline())["samples"]
    feeds = []
    for name, off in (("input_ids", 0), ("labels", 1)):
        a = np.stack([np.asarray(tokens[s * ts.T + off:
                                        s * ts.T + off + ts.T], np.int64)
                      for s in samples])
        p = os.path.join(w, name + ".npy")
        np.save(p, a)
        feeds += ["--input", "%s=%s" % (name, p)]
    out = os.path.join(w, "fw")
    subprocess.run([run, art, "--entry=forward", "--output-dir", out] +
                   feeds, check=True, stdout=subprocess.DEVNULL)
    fw = float(np.load(os.path.join(out, "loss.npy")))
    print("step-1 loss %.8f; --entry=forward on its windows %.8f (%s)" %
          (rows[0]["loss"], fw,
           "equal" if abs(rows[0]["loss"] - fw) <= 1e-6 * abs(fw)
           else "DIFFER"))
    # The same windows as an .npz of one batch, trained one step.
    npz1 = os.path.join(w, "step1.npz")
    np.savez(npz1, **{k: np.load(os.path.join(w, k + ".npy"))
                      for k in ("input_ids", "labels")})
    met1 = os.path.join(w, "step1.jsonl")
    if os.path.exists(met1):
        os.remove(met1)
    subprocess.run([run, art, "--train", "--data", npz1, "--steps", "1",
                    "--progress=none", "--metrics", met1], check=True)
    l1 = metrics_of(met1)[0]["loss"]
    print("step-1 loss from those windows as an .npz: %.8f (%s; the batch's "
          "rows in another order)" %
          (l1, "equal" if abs(rows[0]["loss"] - l1) <= 1e-6 * abs(l1)
           else "DIFFER"))

    # 3. Speed: a prefix as a stream and as an .npz.
    small = os.path.join(w, "small.bin")
    k = args.small_tokens
    np.asarray(tokens[:k]).tofile(small)
    m = (k - 1) // ts.T
    idx = np.arange(m)[:, None] * ts.T + np.arange(ts.T)[None, :]
    tk = np.asarray(tokens[:k], np.int64)
    npz = os.path.join(w, "small.npz")
    np.savez(npz, input_ids=tk[idx], labels=tk[idx + 1])
    # Alternated, --repeats times each; the best median counts (this small
    # model's step is a fraction of a millisecond, so the machine's noise
    # is large against it).
    speeds, rss_of = {}, {}
    for _ in range(args.repeats):
        for name, data in (("token stream", ["--data", small,
                                             "--tokens=uint16"]),
                           (".npz", ["--data", npz])):
            met = os.path.join(w, "speed.jsonl")
            if os.path.exists(met):
                os.remove(met)
            rss_of[name] = child_rss([run, art, "--train"] + data +
                                     ["--steps", str(args.steps),
                                      "--progress=none", "--metrics", met])
            sps = statistics.median(r["samples_per_sec"]
                                    for r in metrics_of(met)[1:])
            speeds[name] = max(speeds.get(name, 0), sps)
    for name in speeds:
        print("%-12s %d windows: %.0f samples/s (best of %d medians), "
              "peak RSS %.1f MiB" % (name, m, speeds[name], args.repeats,
                                     rss_of[name] / (1 << 20)))
    print("token stream / .npz speed: %.2f" %
          (speeds["token stream"] / speeds[".npz"]))


if __name__ == "__main__":
    main()
