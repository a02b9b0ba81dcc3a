#!/usr/bin/env python3
"""Samples text from the charlm demo's trained GPT with loom-run.

Generation runs entirely in Loom: each new character is one call of

  loom-run ARTIFACT --entry=predict --input input_ids=FILE.npy \\
      --params TRAINED.safetensors --output-dir DIR

on the training artifact's `predict` entry (the model before the loss:
input_ids int64 [B, T] -> logits [B, T, V]), with the parameters that
`loom-run --train --save-params` wrote (a checkpoint of --checkpoint-dir
works as well: --params takes any safetensors file with the param tensors).
This script only builds the batches and draws the characters.

Each sample is one row of the batch (at most B samples, the rest of the rows
are padding). A row holds the last T characters of its sample, left-aligned;
the model is causal, so the logits at the row's last character do not
depend on the padding after it. The next character is drawn from
softmax(logits / temperature) with NumPy's generator seeded by --seed, so the
same parameters and options always give the same text.

Usage:
  python3 examples/charlm/sample.py ARTIFACT --params TRAINED.safetensors
      [--prompt TEXT ...] [--length 120] [--temperature 0.8] [--seed 0]
      [--loom-run build/bin/loom-run] [--vocab examples/charlm/vocab.json]

Needs numpy only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_PROMPTS = ["This License", "You may not", "THE SOFTWARE IS", "Copyright"]


def predict_shape(loom_run, artifact):
    """(B, T) of the predict entry's input_ids, from `loom-run --info`."""
    info = subprocess.run([loom_run, artifact, "--info"], check=True,
                          capture_output=True, text=True).stdout
    entry = None
    for line in info.splitlines():
        m = re.match(r"entry (\S+):", line)
        if m:
            entry = m.group(1)
            continue
        m = re.match(r"\s+input\s+input\s+input_ids\s+i64\s+\[(\d+), (\d+)\]", line)
        if entry == "predict" and m:
            return int(m.group(1)), int(m.group(2))
    sys.exit("sample: %s has no entry 'predict' taking input_ids i64 [B, T]"
             % artifact)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("artifact", help="the training artifact (loomc --train --target=cpu)")
    ap.add_argument("--params", help="trained parameters (--save-params or a "
                    "checkpoint); default: the artifact's own (untrained)")
    ap.add_argument("--prompt", action="append",
                    help="start of a sample (repeat for several); default: %s"
                    % ", ".join(repr(p) for p in DEFAULT_PROMPTS))
    ap.add_argument("--length", type=int, default=120,
                    help="characters to generate per sample")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", default=os.path.join(HERE, "vocab.json"))
    ap.add_argument("--loom-run", default=os.path.join(REPO_ROOT, "build", "bin", "loom-run"))
    args = ap.parse_args(argv)
    if args.temperature <= 0:
        ap.error("--temperature must be > 0")

    with open(args.vocab) as f:
        vocab = json.load(f)
    chars, unknown = vocab["chars"], int(vocab["unknown_id"])
    table = {c: i for i, c in enumerate(chars) if i != unknown}
    shown = list(chars)
    shown[unknown] = "?"
    batch, context = predict_shape(args.loom_run, args.artifact)

    prompts = args.prompt or DEFAULT_PROMPTS
    if len(prompts) > batch:
        sys.exit("sample: %d prompts, but the artifact's batch is %d" % (len(prompts), batch))
    seqs = [[table.get(c, unknown) for c in p] or [table["\n"]] for p in prompts]
    rng = np.random.default_rng(args.seed)
    work = tempfile.mkdtemp(prefix="charlm-sample-")
    cmd = [args.loom_run, args.artifact, "--entry=predict",
           "--input", "input_ids=" + os.path.join(work, "input_ids.npy"),
           "--output-dir", work]
    if args.params:
        cmd += ["--params", args.params]
    try:
        for _ in range(args.length):
            ids = np.zeros((batch, context), dtype=np.int64)
            last = []
            for r, s in enumerate(seqs):
                window = s[-context:]
                ids[r, :len(window)] = window
                last.append(len(window) - 1)
            np.save(os.path.join(work, "input_ids.npy"), ids)
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                sys.stderr.write(run.stdout + run.stderr)
                sys.exit("sample: %s failed (exit status %d)"
                         % (" ".join(cmd), run.returncode))
            logits = np.load(os.path.join(work, "logits.npy"))
            for r, s in enumerate(seqs):
                z = logits[r, last[r]].astype(np.float64) / args.temperature
                p = np.exp(z - z.max())
                s.append(int(rng.choice(len(p), p=p / p.sum())))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for p, s in zip(prompts, seqs):
        text = "".join(shown[i] for i in s)
        print("--- prompt %r, %d characters, temperature %g:" %
              (p, args.length, args.temperature))
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
