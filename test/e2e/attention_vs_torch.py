#!/usr/bin/env python3
"""Fused attention against PyTorch in f64, on causal language models as users
export them.

For each model (transformers' Qwen2, Llama, GPT-2, T5 (encoder-decoder,
its relative position bias a learned bias on the scores; the decoder reads
--seq / 2 tokens), BLOOM (ALiBi, its scores on merged batch and heads), and
with --pad BERT; small widths, random weights,
distinct parameters, training mode) at sequence length --seq, this:
  1. exports it with the installed PyTorch's default exporter
     (torch.onnx.export, optimize=False); with --pad it takes an
     attention_mask input too, and the batch is padded (row 0 on the left,
     row 1 on the right, the padded positions' labels -100, as users
     train), so the padding mask is computed from an input at run time;
  2. computes PyTorch's loss (mean token cross-entropy) and every
     parameter's gradient in float64 (the module converted with .double());
  3. compiles it with `loomc --train --loss=cross_entropy --report` and
     checks that the report says every attention layer became fused
     attention (with --pad: with a mask from the inputs; T5's with the
     bias, whose gradient reaches the bias table) and the LM head a
     fused linear + cross-entropy (BERT's head, a transform and a biased
     decoder, is not one; on CUDA, computed in chunks of rows);
  4. runs @forward_backward in Loom's reference interpreter in f64
     (`loom-interp --f64`; T5 in f32, see check_model) and, unless
     --no-compiled, the compiled CPU
     artifact (f32, `loom-run`), and compares the loss and every gradient
     with PyTorch's (norm-wise relative error <= --rtol).
Prints one line per comparison and `N models, M failures`; exit status 0
when everything agrees.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "utils"))
import export_zoo as ez  # noqa: E402


def build(name, seq, batch, pad):
    import transformers as tf
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128,
                  num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=max(seq, 64))
    if name == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(num_key_value_heads=2,
                                                   **common))
    elif name == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(num_key_value_heads=1,
                                                   **common))
    elif name == "t5":
        model = tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2,
            num_decoder_layers=2, num_heads=4, dropout_rate=0.0))
    elif name == "roberta":
        # Its position ids count the tokens that are not padding (a CumSum
        # on run-time values).
        model = tf.RobertaForMaskedLM(tf.RobertaConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=max(seq, 64) + 2, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    elif name == "bert":
        model = tf.BertForMaskedLM(tf.BertConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=max(seq, 64), hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    elif name == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=256, n_positions=max(seq, 64), n_embd=64, n_layer=2,
            n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    elif name == "bloom":
        # ALiBi: a per-head linear bias of the key position, added to the
        # scores (baddbmm: beta * alibi + alpha * q k^T).
        model = tf.BloomForCausalLM(tf.BloomConfig(
            vocab_size=256, hidden_size=64, n_layer=2, n_head=4,
            hidden_dropout=0.0, attention_dropout=0.0))
    elif name == "gpt2_dropout":
        # transformers' eager attention with dropout on the probabilities
        # (the file has it; the fused op draws it): compared with PyTorch
        # under --dropout=off, and at one seed with the interpreter.
        config = tf.GPT2Config(
            vocab_size=256, n_positions=max(seq, 64), n_embd=64, n_layer=2,
            n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.2)
        config._attn_implementation = "eager"
        model = tf.GPT2LMHeadModel(config)
    else:
        raise SystemExit("unknown model " + name)
    # Distinct parameters: no two initializers equal (the exporter merges
    # equal ones), and no all-ones norms hiding a wrong scale.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    # Token ids from 1: BERT's word embedding has padding_idx 0, whose row
    # PyTorch never updates; the ONNX Gather it exports does not say so.
    # (RoBERTa's padding id is 1: its tokens start at 2.)
    ids = ez.tokens((batch, seq), 256,
                    low={"bert": 1, "roberta": 2}.get(name, 0))
    if name == "t5":
        dec = ez.tokens((batch, seq // 2), 256, seed=5)
        labels = ez.tokens((batch, seq // 2), 256, seed=4)
        return (ez.LogitsOnly(model, ("input_ids", "decoder_input_ids")),
                (ids, dec), labels)
    labels = ez.tokens((batch, seq), 256, seed=4)
    if not pad:
        return ez.LogitsOnly(model), (ids,), labels
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, :3] = 0
    if batch > 1:
        mask[1, seq - 5:] = 0
    labels[mask == 0] = -100
    return (ez.LogitsOnly(model, ("input_ids", "attention_mask")),
            (ids, mask), labels)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        raise SystemExit("command failed (%d): %s\n%s" %
                         (r.returncode, " ".join(cmd), r.stdout[-4000:]))
    return r.stdout


def norm_rel(got, want, floor=1e-300):
    """||got - want|| / max(||want||, floor)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.linalg.norm(got - want) /
                 max(np.linalg.norm(want), floor))


def fname(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def check_model(args, name):
    torch.manual_seed(0)
    model, inputs, labels = build(name, args.seq, args.batch, args.pad)
    input_names = (["input_ids", "decoder_input_ids"] if name == "t5" else
                   ["input_ids", "attention_mask"])[:len(inputs)]
    model.train(True)
    d = os.path.join(args.workdir, "%s_T%d%s" % (name, args.seq,
                                                 "_pad" if args.pad else ""))
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        torch.onnx.export(model, inputs, path, input_names=input_names,
                          output_names=["logits"], external_data=False,
                          optimize=False)
    model.load_state_dict(initial)
    params = ez.onnx_parameters(model, path, name)

    # PyTorch in float64 (without dropout: loomc --dropout=off).
    model.double()
    dropout = name == "gpt2_dropout"
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    logits = model(*inputs)
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    grads = torch.autograd.grad(loss, list(params.values()))
    want = {k: g.detach().numpy() for k, g in zip(params, grads)}
    want_loss = loss.item()

    failures = []

    def check(what, err):
        ok = err <= args.rtol
        print("%-4s %-8s %-52s rel err %.2e" % ("ok" if ok else "FAIL", name,
                                                what, err))
        if not ok:
            failures.append("%s %s" % (name, what))

    flags = ["--train", "--loss=cross_entropy", "--optimizer=sgd",
             "--precision=" + args.precision] + (
        ["--dropout=off"] if dropout else [])
    ir = os.path.join(d, "train.mlir")
    art = os.path.join(d, "train.loom")
    run([args.loomc, path] + flags + ["-o", ir])
    tp = ["--tp=%d" % args.tp] if args.tp > 1 else []
    target = ["--target=" + args.target] + (
        args.target_flags.split())
    report = run([args.loomc, path] + flags + tp + target +
                 ["--report", "-o", art])
    arena = re.search(r"@train_step: .* arena (\d+) bytes", report)
    print("     %-8s @train_step arena %s bytes" %
          (name, arena.group(1) if arena else "?"))
    fused = re.findall(r"^\s+fused attention: (\S+)", report, re.M)
    kept = re.findall(r"^\s+kept attention: (\S+)", report, re.M)
    layers = 6 if name == "t5" else 2  # T5: self, self and cross per layer
    ok = len(fused) == layers and not kept
    if args.pad:
        ok &= all("mask from the inputs" in d for d in
                  re.findall(r"^\s+fused attention: \S+ \((.*)\)$", report,
                             re.M))
    if name == "t5":
        ok &= sum("bias from the inputs" in d for d in re.findall(
            r"^\s+fused attention: \S+ \((.*)\)$", report, re.M)) == 4
    print("%-4s %-8s report: %d fused attention layers, %d kept" %
          ("ok" if ok else "FAIL", name, len(fused), len(kept)))
    if not ok:
        failures.append("%s report" % name)
        print(report)
    if args.tp > 1:
        # What was split (the test pins the counts) and why layers stayed
        # whole.
        summary = re.search(r"^\s+tensor parallel: (.*)$", report, re.M)
        print("     %-8s tp: %s" % (name, summary.group(1) if summary
                                     else "no tensor-parallel report"))
        for why in re.findall(r"^\s+whole: (.*)$", report, re.M):
            print("     %-8s tp whole: %s" % (name, why))
    heads = re.findall(r"^\s+lm head: (\S+)", report, re.M)
    # With --tp the head is vocabulary-parallel instead (not fused). On
    # CUDA, and in 16 bits on the CPU, it is computed in chunks of rows.
    fused_head = name not in ("bert", "roberta") and args.tp == 1
    ok = heads == (["fused"] if fused_head else [])
    print("%-4s %-8s report: lm head %s" % ("ok" if ok else "FAIL", name,
                                            ",".join(heads) or "absent"))
    if not ok:
        failures.append("%s lm head" % name)
    chunks = re.findall(r"^\s+lm head in chunks \(.*\): \S+: (.*)$",
                        report, re.M)
    if (args.target != "cpu" or args.precision != "fp32") and fused_head:
        print("%-4s %-8s report: lm head in %s" % (
            "ok" if chunks else "FAIL", name, ",".join(chunks) or "no chunks"))
        if not chunks:
            failures.append("%s lm head chunks" % name)

    feed_dir = os.path.join(d, "in")
    os.makedirs(feed_dir, exist_ok=True)
    feed = []
    for k, v in list(zip(input_names, inputs)) + [("labels", labels)]:
        f = os.path.join(feed_dir, k + ".npy")
        np.save(f, v.numpy())
        feed += ["--input", "%s=%s" % (k, f)]
    hows = ["interp"] + ([] if args.no_compiled else ["compiled"])
    for how in hows:
        out = os.path.join(d, "fb_" + how)
        if how == "interp":
            # T5 computes its relative-position buckets in float32 (a log,
            # then a cast to int): promoted to f64, a position on a bucket
            # boundary lands in the next bucket, as PyTorch's float32 does
            # not. Its graph is interpreted in its own precision.
            f64 = [] if name == "t5" else ["--f64"]
            run([args.interp, ir, "--entry=forward_backward"] + f64 +
                ["--output-dir", out] + feed)
        else:
            launch = (args.mpirun.split() + [str(args.tp)]
                      if args.tp > 1 else [])
            run(launch + [args.loom_run, art, "--entry=forward_backward",
                          "--threads", "1", "--output-dir", out] + feed)
        check("%s loss" % how,
              norm_rel(np.load(os.path.join(out, "loss.npy")), want_loss))
        # A gradient that is zero in exact arithmetic (BERT's key bias:
        # softmax does not change when a row's scores all move by q.b) is
        # rounding noise in both (f32's about 1e-10 of the largest); it is
        # compared relative to 1e-5 of the largest gradient's norm instead
        # of its own.
        floor = 1e-5 * max(np.linalg.norm(g) for g in want.values())
        worst, worst_name = 0.0, ""
        for k, g in want.items():
            f = os.path.join(out, fname(k) + ".npy")
            err = (norm_rel(np.load(f), g, floor) if os.path.exists(f)
                   else np.inf)
            if err > worst:
                worst, worst_name = err, k
        check("%s %d gradients (worst: %s)" % (how, len(want),
                                               worst_name[-30:]), worst)
    if dropout:
        failures += check_seeded_dropout(args, name, path, d, feed, want,
                                         target, check)
    return failures


def check_seeded_dropout(args, name, path, d, feed, want, target, check):
    """Dropout on: the compiled step at one seed equals the interpreter's
    (f64) at that seed, and differs from the step without dropout."""
    flags = ["--train", "--loss=cross_entropy", "--optimizer=sgd"]
    ir = os.path.join(d, "on.mlir")
    art = os.path.join(d, "on.loom")
    run([args.loomc, path] + flags + ["-o", ir])
    report = run([args.loomc, path] + flags + target +
                 ["--report", "-o", art])
    fused = re.findall(r"^\s+fused attention: \S+ \((.*)\)$", report, re.M)
    with_dropout = sum("dropout" in f for f in fused)
    print("%-4s %-8s report: %d of %d fused attention layers with dropout" %
          ("ok" if with_dropout == 2 else "FAIL", name, with_dropout,
           len(fused)))
    failures = [] if with_dropout == 2 else ["%s dropout report" % name]
    seed = 4321
    f = os.path.join(d, "in", "seed.npy")
    np.save(f, np.array(seed, np.int64))
    got = os.path.join(d, "on_compiled")
    run([args.loom_run, art, "--entry=forward_backward", "--threads", "1",
         "--input", "seed=" + f, "--output-dir", got] + feed)
    ref = os.path.join(d, "on_interp")
    run([args.interp, ir, "--entry=forward_backward", "--f64", "--seed",
         str(seed), "--output-dir", ref] + feed)
    load = lambda o, k: np.load(os.path.join(o, fname(k) + ".npy"))
    floor = 1e-5 * max(np.linalg.norm(load(ref, k)) for k in want)
    check("seeded dropout: compiled loss = interp",
          norm_rel(load(got, "loss"), load(ref, "loss")))
    check("seeded dropout: compiled gradients = interp",
          max(norm_rel(load(got, k), load(ref, k), floor) for k in want))
    off = float(np.load(os.path.join(d, "fb_interp", "loss.npy")))
    on = float(load(ref, "loss"))
    ok = abs(on - off) > 1e-6 * abs(off)
    print("%-4s %-8s dropout changes the loss (%.6f, off %.6f)" %
          ("ok" if ok else "FAIL", name, on, off))
    if not ok:
        failures.append("%s dropout changes nothing" % name)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+",
                    choices=["qwen2", "llama", "gpt2", "gpt2_dropout",
                             "bert", "roberta", "t5", "bloom"])
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--interp", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--precision", default="fp32",
                    help="loomc --precision (bf16, fp16: mixed precision; "
                         "the reference stays PyTorch in f64, so pass an "
                         "--rtol that 16-bit GEMMs meet)")
    ap.add_argument("--pad", action="store_true",
                    help="an attention_mask input and a padded batch")
    ap.add_argument("--no-compiled", action="store_true",
                    help="check the interpreter only")
    ap.add_argument("--target", default="cpu",
                    help="loomc's --target for the compiled run (cuda:sm_90 "
                    "with loomc-emu and the fake driver runs the CUDA "
                    "kernels in the emulator)")
    ap.add_argument("--target-flags", default="",
                    help="more loomc flags for the compiled run (the "
                    "emulator's library)")
    ap.add_argument("--tp", type=int, default=1,
                    help="compile with --tp=N and run the compiled "
                    "artifact on N ranks (--mpirun)")
    ap.add_argument("--mpirun", default="mpirun --oversubscribe -np",
                    help="the launcher, followed by the rank count")
    args = ap.parse_args()
    torch.set_num_threads(2)
    failures = []
    for name in args.models:
        failures += check_model(args, name)
    for f in failures:
        print("FAIL:", f)
    print("%d models, %d failures" % (len(args.models), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
