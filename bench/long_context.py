#!/usr/bin/env python3
"""Peak memory of Loom's training step against the sequence length: the
fused attention and the fused language-model head, each on and off.

For each --seq, exports --model (bench/real_suite.py's configurations:
qwen2, gpt2, llama, gpt2_small; random weights, training mode, PyTorch's
default exporter) at --batch x T, compiles it with `loomc --train
--target=cpu --report` four ways (everything fused; --attention=unfused;
--lm-head=unfused; both unfused) and prints @train_step's planned arena
(loom.arena_bytes: every activation, gradient and scratch buffer of the
step, parameters excluded) and its growth from the first T. Nothing is
run: the arena is what the memory plan reserves. A compilation that fails
is printed with its reason and counts as a failure (exit status 1).

    .venv/bin/python bench/long_context.py --model qwen2 --seqs 512,1024,2048,4096
    .venv/bin/python bench/long_context.py --model gpt2_small --batch 8 --seqs 1024 \\
        --variants fused,unfused_head
    .venv/bin/python bench/long_context.py --seqs 512,2048 \\
        --flags="--precision=bf16 --target=cuda:sm_90"

--flags adds loomc flags to every compilation (a later --target wins over
the default --target=cpu).
"""
import argparse
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import real_suite  # noqa: E402
import run  # noqa: E402

VARIANTS = {
    "fused": [],
    "unfused_attention": ["--attention=unfused"],
    "unfused_head": ["--lm-head=unfused"],
    "unfused": ["--attention=unfused", "--lm-head=unfused"],
}


def arena_of(report):
    m = re.search(r"@train_step: .* arena (\d+) bytes", report)
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2",
                    choices=["qwen2", "gpt2", "llama", "gpt2_small"])
    ap.add_argument("--seqs", default="512,1024,2048,4096")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated, of: " + ", ".join(VARIANTS))
    ap.add_argument("--loomc", default=os.path.join(
        real_suite.ROOT, "build", "bin", "loomc"))
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--flags", default="",
                    help="more loomc flags for every compilation, e.g. "
                         "--precision=bf16 or --target=cuda:sm_90")
    args = ap.parse_args()
    variants = args.variants.split(",")
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error("unknown variant %s" % ", ".join(bad))
    work = args.workdir or tempfile.mkdtemp(prefix="long-context-")
    os.makedirs(work, exist_ok=True)
    info = run.machine_info()
    print("machine: %s, %s cores; %s; model %s, batch %d%s" %
          (info.get("cpu", "?"), info["nproc"], info["date"], args.model,
           args.batch, "; loomc " + args.flags if args.flags else ""),
          flush=True)
    # What prepare() reads of run.py's options.
    opts = argparse.Namespace(batch=args.batch, image_size=0, classes=0,
                              seq=0)
    rows, failed = [], False
    for seq in [int(t) for t in args.seqs.split(",")]:
        opts.seq = seq
        sub = os.path.join(work, "T%d" % seq)
        os.makedirs(sub, exist_ok=True)
        paths = real_suite.prepare(args.model, opts, sub)
        if "opts" not in paths:
            print("T=%d: export failed: %s" % (seq, paths), flush=True)
            failed = True
            continue
        row = {"seq": seq}
        for v in variants:
            art = os.path.join(sub, v + ".loom")
            fail, out, secs = run.compile_loom(
                args.loomc, paths["opts"]["onnx"], art,
                os.path.join(sub, v + ".loomc.log"),
                ["--report"] + VARIANTS[v] + args.flags.split())
            if fail:
                print("T=%d %s: %s" % (seq, v, fail.get("error")), flush=True)
                failed = True
                continue
            row[v] = arena_of(out)
            heads = re.findall(r"lm head: (.*)", out)
            print("T=%-5d %-18s arena %14s bytes  loomc %.1f s  %s" %
                  (seq, v, "{:,}".format(row[v] or 0), secs,
                   "; ".join(heads)), flush=True)
        rows.append(row)
    print()
    print("| T | " + " | ".join("%s arena (MiB)" % v for v in variants) +
          " | fused growth from T=%d |" % rows[0]["seq"] if rows else "")
    print("|" + " ---: |" * (len(variants) + 2))
    for r in rows:
        cells = ["%.1f" % (r[v] / 2**20) if r.get(v) else "failed"
                 for v in variants]
        growth = ("%.2fx" % (r["fused"] / rows[0]["fused"])
                  if r.get("fused") and rows[0].get("fused") else "")
        print("| %d | %s | %s |" % (r["seq"], " | ".join(cells), growth))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
