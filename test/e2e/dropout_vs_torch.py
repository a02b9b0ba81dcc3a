#!/usr/bin/env python3
"""Models exported in training mode, with their dropout and drop path, against
PyTorch.

For each model (torchvision's ConvNeXt with stochastic depth, EfficientNet
with stochastic depth and dropout, MobileNetV3 with dropout, transformers'
GPT-2 with dropout on the embeddings, the attention probabilities and the
residuals; torchvision's SqueezeNet 1.1 and Swin, transformers' BERT and
RoBERTa; small widths, random weights, distinct parameters,
`model.train()`), exported by PyTorch's default exporter (`--exporter
dynamo`, optimize=False) or its TorchScript one (`--exporter torchscript`,
training=TRAINING: Dropout nodes with their mask output), this:
  1. `--dropout=off`: compiles the training step with every dropout and
     drop path the identity, and checks the loss and every gradient of the
     reference interpreter (f64) and of the compiled CPU artifact (f32)
     against PyTorch's in float64 with every dropout probability set to 0,
     in training mode (BatchNorm with batch statistics), within --rtol
     (interpreter) and --compiled-rtol;
  2. the evaluation entry: `@predict` of the artifact compiled with dropout
     on takes no seed and gives PyTorch's `model.eval()` output;
  3. dropout on, at a fixed seed: the compiled @forward_backward gives the
     same loss and gradients run twice, another loss under another seed, and
     the interpreter's numbers at that seed (the masks are the same function
     of the seed in both); and the gradient is the derivative of the loss
     with that seed's masks: the directional derivative along a random
     direction by central differences of the interpreter's loss (f64)
     matches <gradient, direction>;
  4. with --steps N, loom-run --train at a learning rate of ~0 on one batch:
     a new mask every step, the same losses from the same --seed, one loss
     with dropout off;
  5. for GPT-2 and BERT, both attention layers are reported fused (with their
     dropout, where the file has it: transformers' eager attention), and at
     one seed the fused step equals the unfused chain's
     (--attention=unfused), interpreted and compiled: the fused op draws
     the mask the chain's loom.dropout draws.
Prints one line per check and `N models, M failures`; exit status 0 when
everything agrees.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "utils"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "Interp", "Inputs"))
import export_zoo as ez  # noqa: E402
from attention_vs_torch import fname, norm_rel, run  # noqa: E402
from compiled_vs_interp import read_safetensors  # noqa: E402
from ref import write_safetensors  # noqa: E402

# PyTorch computes the references (small models, in float64) on one thread:
# its OpenMP threads spin at every parallel region, and beside the other
# tests lit runs on the same cores a forward that takes 0.04 s alone took
# 6-10 s with two threads. One thread also keeps the references' summation
# order fixed.
torch.set_num_threads(1)


def convnext():
    # layer_scale 0.5, not torchvision's 1e-6: with 1e-6 each residual branch
    # (and so its drop path) changes the loss by about 1e-6.
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    m = ConvNeXt([CNBlockConfig(16, 32, 2), CNBlockConfig(32, None, 2)],
                 stochastic_depth_prob=0.5, layer_scale=0.5, num_classes=10)
    return m, ez.images(4, 32), ez.class_labels((4,), 10)


def efficientnet():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25,
                                       depth_mult=0.25)
    m = EfficientNet(setting, dropout=0.3, last_channel=last, num_classes=10,
                     stochastic_depth_prob=0.5)
    ez.randomize_bn(m)
    return m, ez.images(8, 64), ez.class_labels((8,), 10)


def mobilenet():
    from torchvision.models import mobilenet_v3_small as make
    m = make(num_classes=10, width_mult=0.25, dropout=0.3)
    ez.randomize_bn(m)
    return m, ez.images(8, 64), ez.class_labels((8,), 10)


def gpt2():
    import transformers
    c = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64,
                                n_positions=32, resid_pdrop=0.2,
                                embd_pdrop=0.2, attn_pdrop=0.2)
    m = ez.LogitsOnly(transformers.GPT2LMHeadModel(c), ("input_ids",))
    return m, ez.tokens((2, 16), 64), ez.tokens((2, 16), 64, seed=4)


def gpt2_eager():
    # transformers' eager attention: the dropout on the probabilities is a
    # module (PyTorch's exporter writes SDPA's own dropout_p as a Dropout
    # without training_mode: the identity, by ONNX's default).
    import transformers
    c = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64,
                                n_positions=32, resid_pdrop=0.2,
                                embd_pdrop=0.2, attn_pdrop=0.2)
    c._attn_implementation = "eager"
    m = ez.LogitsOnly(transformers.GPT2LMHeadModel(c), ("input_ids",))
    return m, ez.tokens((2, 16), 64), ez.tokens((2, 16), 64, seed=4)


def swin():
    # torchvision's Swin: shifted windows (their attention masks built with
    # index assignments, ScatterND, and Mod), a relative position bias
    # gathered by GatherND, drop path.
    from torchvision.models.swin_transformer import SwinTransformer
    m = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                        num_heads=[2, 2], window_size=[4, 4],
                        stochastic_depth_prob=0.3, num_classes=10)
    return m, ez.images(2, 32), ez.class_labels((2,), 10)


def masked_lm(kind, max_positions, low):
    """transformers' BERT or RoBERTa (`kind`) with its masked-LM head, two
    small layers, dropout 0.2 everywhere, eager attention; token ids from
    `low` (below it, the padding index, whose embedding row PyTorch never
    updates; the exported Gather does not say so)."""
    import transformers
    config, model = {"bert": (transformers.BertConfig,
                              transformers.BertForMaskedLM),
                     "roberta": (transformers.RobertaConfig,
                                 transformers.RobertaForMaskedLM)}[kind]
    c = config(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
               intermediate_size=64, vocab_size=64,
               max_position_embeddings=max_positions, hidden_dropout_prob=0.2,
               attention_probs_dropout_prob=0.2)
    c._attn_implementation = "eager"
    m = ez.LogitsOnly(model(c), ("input_ids",))
    return m, ez.tokens((2, 16), 64, low=low), ez.tokens((2, 16), 64, seed=4)


def bert():
    # From the TorchScript exporter its token-type ids are a GatherElements
    # of an expanded buffer; padding id 0.
    return masked_lm("bert", 32, low=1)


def roberta():
    # Position ids count the tokens that are not padding (a CumSum of a mask
    # computed from the input ids); padding id 1, and a padding token's
    # position id is 1.
    return masked_lm("roberta", 40, low=2)


def squeezenet():
    # torchvision's SqueezeNet 1.1: MaxPool with ceil_mode=True, dropout
    # before its convolutional classifier.
    from torchvision.models import squeezenet1_1
    m = squeezenet1_1(num_classes=10, dropout=0.5)
    return m, ez.images(2, 64), ez.class_labels((2,), 10)


MODELS = {"convnext": convnext, "efficientnet": efficientnet,
          "mobilenet": mobilenet, "gpt2": gpt2, "gpt2_eager": gpt2_eager,
          "swin": swin, "bert": bert, "squeezenet": squeezenet,
          "roberta": roberta}


def set_dropout(model, p):
    """Every dropout and stochastic depth of `model` to probability p."""
    from torchvision.ops import StochasticDepth
    for m in model.modules():
        if isinstance(m, (torch.nn.Dropout, StochasticDepth)):
            m.p = p


def loss_of(model, x, labels):
    logits = model(x)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def check_model(args, name):
    torch.manual_seed(0)
    model, x, labels = MODELS[name]()
    model.train(True)
    d = os.path.join(args.workdir, "%s_%s" % (name, args.exporter))
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        if args.exporter == "dynamo":
            torch.onnx.export(model, (x,), path, input_names=["x"],
                              output_names=["logits"], external_data=False,
                              optimize=False)
        else:
            torch.onnx.export(model, (x,), path, input_names=["x"],
                              output_names=["logits"], dynamo=False,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
    model.load_state_dict(initial)
    if args.exporter == "torchscript":
        # Its trace ran the forward in training mode, which moved the
        # BatchNorm running statistics: the file holds the moved ones.
        import onnx
        from onnx import numpy_helper
        stored = {i.name: numpy_helper.to_array(i)
                  for i in onnx.load(path).graph.initializer}
        with torch.no_grad():
            for k, b in model.named_buffers():
                if k in stored and b.is_floating_point():
                    b.copy_(torch.from_numpy(stored[k].copy()))
        initial = {k: v.clone() for k, v in model.state_dict().items()}
    params = ez.onnx_parameters(model, path, name)

    # PyTorch in float64: training mode without dropout, and eval mode.
    model.double()
    set_dropout(model, 0.0)
    x64 = x.double() if x.is_floating_point() else x
    loss = loss_of(model, x64, labels)
    grads = torch.autograd.grad(loss, list(params.values()))
    want = {k: g.detach().numpy() for k, g in zip(params, grads)}
    want_loss = loss.item()
    model.load_state_dict(initial)  # the forward moved the running stats
    model.double()
    model.eval()
    with torch.no_grad():
        want_eval = model(x64).numpy()

    failures = []

    def check(what, err, tol=args.rtol):
        ok = err <= tol
        print("%-4s %-12s %-52s rel err %.2e" % ("ok" if ok else "FAIL", name,
                                                 what, err))
        if not ok:
            failures.append("%s %s" % (name, what))

    def fact(what, ok):
        print("%-4s %-12s %s" % ("ok" if ok else "FAIL", name, what))
        if not ok:
            failures.append("%s %s" % (name, what))

    feed_dir = os.path.join(d, "in")
    os.makedirs(feed_dir, exist_ok=True)
    np.save(os.path.join(feed_dir, "x.npy"), x.numpy())
    np.save(os.path.join(feed_dir, "labels.npy"), labels.numpy())
    feed = ["--input", "x=" + os.path.join(feed_dir, "x.npy"),
            "--input", "labels=" + os.path.join(feed_dir, "labels.npy")]
    flags = ["--train", "--loss=cross_entropy", "--optimizer=sgd"]
    # A gradient that is zero in exact arithmetic (the bias of a BatchNorm
    # whose output the next train-mode BatchNorm re-centres) is rounding
    # noise in each implementation (f32's about 1e-8 of the largest
    # gradient): it is compared relative to 1e-3 of the largest gradient's
    # norm instead of its own.
    floor = 1e-3 * max(np.linalg.norm(g) for g in want.values())

    def grads_of(out):
        return {k: np.load(os.path.join(out, fname(k) + ".npy"))
                for k in want
                if os.path.exists(os.path.join(out, fname(k) + ".npy"))}

    def compare_grads(what, got, tol):
        worst, worst_name = 0.0, ""
        for k, g in want.items():
            err = norm_rel(got[k], g, floor) if k in got else np.inf
            if err > worst:
                worst, worst_name = err, k
        check("%s %d gradients (worst: %s)" % (what, len(want),
                                               worst_name[-24:]), worst, tol)

    # The artifacts: with --steps, compiled at check_steps' learning rate of
    # ~0 so that they serve its training runs too (the learning rate is a
    # constant of @apply_optimizer and @train_step only: @forward_backward
    # and @predict, which the checks before it run, are the same at any
    # rate); for GPT-2 and BERT with --report, which
    # check_fused_attention reads (the report is printed after the
    # artifact is written: the same artifact).
    lr = ["--lr=1e-30"] if args.steps else []
    attention = name.startswith("gpt2") or name in ("bert", "roberta")

    # 1. Dropout off against PyTorch with p = 0.
    ir_off = os.path.join(d, "off.mlir")
    art_off = os.path.join(d, "off.loom")
    run([args.loomc, path] + flags + ["--dropout=off", "-o", ir_off])
    run([args.loomc, path] + flags + lr + ["--dropout=off", "--target=cpu",
                                           "-o", art_off])
    fact("--dropout=off leaves no dropout or random draw",
         "loom.dropout" not in open(ir_off).read() and
         "loom.random" not in open(ir_off).read())
    for how in ("interp", "compiled"):
        out = os.path.join(d, "off_" + how)
        if how == "interp":
            run([args.interp, ir_off, "--entry=forward_backward", "--f64",
                 "--output-dir", out] + feed)
        else:
            run([args.loom_run, art_off, "--entry=forward_backward",
                 "--output-dir", out] + feed)
        tol = args.rtol if how == "interp" else args.compiled_rtol
        check("off %s loss" % how,
              norm_rel(np.load(os.path.join(out, "loss.npy")), want_loss), tol)
        compare_grads("off " + how, grads_of(out), tol)

    # 2. The evaluation entry against model.eval().
    ir_on = os.path.join(d, "on.mlir")
    art_on = os.path.join(d, "on.loom")
    run([args.loomc, path] + flags + ["-o", ir_on])
    report = run([args.loomc, path] + flags + lr + ["--target=cpu"] +
                 (["--report"] if attention else []) + ["-o", art_on])
    text = open(ir_on).read()
    predict = text[text.index("func.func @predict"):]
    predict = predict[:predict.index("\n  }\n")]
    fact("@predict has no dropout and no seed",
         "loom.dropout" not in predict and "loom.rng_seed" not in predict and
         "loom.random" not in predict)
    for how in ("interp", "compiled"):
        out = os.path.join(d, "eval_" + how)
        if how == "interp":
            run([args.interp, ir_on, "--entry=predict", "--f64",
                 "--output-dir", out, feed[0], feed[1]])
        else:
            run([args.loom_run, art_on, "--entry=predict", "--output-dir",
                 out, feed[0], feed[1]])
        check("@predict %s = eval()" % how,
              norm_rel(np.load(os.path.join(out, "logits.npy")), want_eval),
              args.rtol if how == "interp" else args.compiled_rtol)

    # 3. Dropout on: reproducible from the seed, the same in the
    # interpreter and compiled, and the gradient of that seed's loss.
    def compiled_fb(seed, tag):
        out = os.path.join(d, "on_%s" % tag)
        f = os.path.join(feed_dir, "seed_%d.npy" % seed)
        np.save(f, np.array(seed, np.int64))
        run([args.loom_run, art_on, "--entry=forward_backward",
             "--input", "seed=" + f, "--output-dir", out] + feed)
        return float(np.load(os.path.join(out, "loss.npy"))), grads_of(out)

    seed_a, seed_b = 1234, 98765
    loss_a, grads_a = compiled_fb(seed_a, "a")
    loss_a2, grads_a2 = compiled_fb(seed_a, "a2")
    loss_b, _ = compiled_fb(seed_b, "b")
    fact("the same seed gives the same loss and gradients",
         loss_a == loss_a2 and
         all(np.array_equal(grads_a[k], grads_a2[k]) for k in grads_a))
    fact("another seed another loss (%.6f, %.6f)" % (loss_a, loss_b),
         abs(loss_a - loss_b) > 1e-6 * abs(loss_a))
    fact("dropout on changes the loss (%.6f, off %.6f)" % (loss_a, want_loss),
         abs(loss_a - want_loss) > 1e-6 * abs(want_loss))
    out = os.path.join(d, "on_interp")
    run([args.interp, ir_on, "--entry=forward_backward", "--f64",
         "--seed", str(seed_a), "--output-dir", out] + feed)
    interp_loss = float(np.load(os.path.join(out, "loss.npy")))
    interp_grads = grads_of(out)
    check("seeded compiled loss = interp", norm_rel(loss_a, interp_loss),
          args.compiled_rtol)
    worst = max(norm_rel(grads_a[k], interp_grads[k], floor) for k in want)
    check("seeded compiled gradients = interp", worst, args.compiled_rtol)

    # Central differences along a random direction, in f64 (the masks are
    # fixed by the seed), with a step of --fd-step of the parameters' norm:
    # small, so that few ReLU or hardswish kinks lie within it.
    params_file = os.path.join(d, "on.safetensors")
    theta = read_safetensors(params_file)
    rng = np.random.RandomState(5)
    direction = {k: rng.standard_normal(theta[k].shape) for k in want}
    scale = np.sqrt(sum(float(np.sum(theta[k].astype(np.float64) ** 2))
                        for k in want))
    dnorm = np.sqrt(sum(float(np.sum(v ** 2)) for v in direction.values()))
    eps = args.fd_step * scale / dnorm
    losses = []
    for sign in (1, -1):
        shifted = dict(theta)
        for k in want:
            shifted[k] = (theta[k].astype(np.float64) +
                          sign * eps * direction[k])
        p = os.path.join(d, "shift_%d.safetensors" % sign)
        write_safetensors(p, {k: np.asarray(v, np.float64)
                              for k, v in shifted.items()})
        o = os.path.join(d, "shift_%d" % sign)
        run([args.interp, ir_on, "--entry=forward_backward", "--f64",
             "--seed", str(seed_a), "--params", p, "--output-dir", o] + feed)
        losses.append(float(np.load(os.path.join(o, "loss.npy"))))
    fd = (losses[0] - losses[1]) / (2 * eps)
    analytic = sum(float(np.sum(interp_grads[k].astype(np.float64) *
                                direction[k])) for k in want)
    check("seeded gradient = central differences", norm_rel(fd, analytic),
          args.fd_rtol)
    if attention:
        check_fused_attention(args, name, path, d, feed, seed_a, loss_a,
                              grads_a, interp_loss, interp_grads, check,
                              fact, floor, report)
    if args.steps:
        check_steps(args, name, d, x, labels, fact, art_on, art_off)
    return failures


def check_fused_attention(args, name, path, d, feed, seed, loss, grads,
                          interp_loss, interp_grads, check, fact, floor,
                          report):
    """The attention layers are fused (with their dropout where the file
    has it), and at one seed the fused step equals the unfused chain's
    (--attention=unfused): the fused op draws the same mask. `report`:
    loomc --report of the fused artifact (check_model's on.loom)."""
    import re
    flags = ["--train", "--loss=cross_entropy", "--optimizer=sgd"]
    fused = re.findall(r"^\s+fused attention: \S+ \((.*)\)$", report, re.M)
    with_dropout = sum("dropout" in f for f in fused)
    fact("report: %d fused attention layers, %d with dropout" %
         (len(fused), with_dropout), len(fused) == 2)
    ir = os.path.join(d, "unfused.mlir")
    art = os.path.join(d, "unfused.loom")
    run([args.loomc, path] + flags + ["--attention=unfused", "-o", ir])
    run([args.loomc, path] + flags + ["--attention=unfused", "--target=cpu",
                                      "-o", art])
    f = os.path.join(d, "in", "seed_%d.npy" % seed)
    out = os.path.join(d, "unfused_compiled")
    run([args.loom_run, art, "--entry=forward_backward", "--input",
         "seed=" + f, "--output-dir", out] + feed)
    got = {k: np.load(os.path.join(out, fname(k) + ".npy")) for k in grads}
    check("seeded fused = unfused, compiled loss",
          norm_rel(loss, float(np.load(os.path.join(out, "loss.npy")))),
          args.compiled_rtol)
    check("seeded fused = unfused, compiled gradients",
          max(norm_rel(grads[k], got[k], floor) for k in grads),
          args.compiled_rtol)
    out = os.path.join(d, "unfused_interp")
    run([args.interp, ir, "--entry=forward_backward", "--f64", "--seed",
         str(seed), "--output-dir", out] + feed)
    got = {k: np.load(os.path.join(out, fname(k) + ".npy")) for k in grads}
    check("seeded fused = unfused, interp loss",
          norm_rel(interp_loss, float(np.load(os.path.join(out, "loss.npy")))))
    check("seeded fused = unfused, interp gradients",
          max(norm_rel(interp_grads[k], got[k], floor) for k in grads))


def check_steps(args, name, d, x, labels, fact, on, off):
    """loom-run --train with a learning rate of 1e-30 (loomc refuses 0: the
    parameters move below f32's resolution, the loss by about 1e-30) on one
    batch: each step's
    loss differs with dropout on (a new mask each step), two runs with one
    --seed give the same losses, and with dropout off every step's loss is
    the same. `on` and `off`: check_model's artifacts, compiled with
    --lr=1e-30 (dropout on and --dropout=off)."""
    import json
    # The data set is the one batch: each step reads all of it (in a
    # shuffled order, which moves the loss by rounding only).
    data = os.path.join(d, "one_batch.npz")
    np.savez(data, x=x.numpy(), labels=labels.numpy())

    def losses(art, seed, tag):
        metrics = os.path.join(d, "metrics_%s.jsonl" % tag)
        if os.path.exists(metrics):
            os.remove(metrics)
        run([args.loom_run, art, "--train", "--data", data, "--steps",
             str(args.steps), "--seed", str(seed), "--metrics", metrics, "--progress=none"])
        return [json.loads(l)["loss"] for l in open(metrics)
                if '"loss"' in l and '"eval' not in l]

    first, again, other = (losses(on, 7, "a"), losses(on, 7, "b"),
                           losses(on, 8, "c"))
    plain = losses(off, 7, "off")
    print("     %-12s losses on  %s" % (name, np.round(first, 6).tolist()))
    print("     %-12s losses off %s" % (name, np.round(plain, 6).tolist()))
    def spread(v):
        return (max(v) - min(v)) / abs(np.mean(v)) if v else np.inf

    gaps = [abs(a - b) / abs(b) for i, a in enumerate(first)
            for b in first[:i]]
    fact("%d steps: each step draws new masks" % args.steps,
         len(first) == args.steps and min(gaps) > 1e-6)
    fact("%d steps: the same --seed, the same losses" % args.steps,
         first == again)
    fact("%d steps: another --seed, other losses" % args.steps,
         first != other)
    fact("%d steps: dropout off, one loss (spread %.1e)" %
         (args.steps, spread(plain)),
         len(plain) == args.steps and spread(plain) < 1e-6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", choices=sorted(MODELS))
    ap.add_argument("--exporter", choices=["dynamo", "torchscript"],
                    default="dynamo")
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--interp", required=True)
    ap.add_argument("--loom-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol", type=float, default=1e-5,
                    help="the interpreter's (f64) relative error")
    ap.add_argument("--compiled-rtol", type=float, default=1e-4,
                    help="the compiled artifact's (f32; measured <= 2e-5 on "
                    "EfficientNet's 96 gradients through 16 train-mode "
                    "BatchNorms)")
    ap.add_argument("--fd-rtol", type=float, default=1e-5)
    ap.add_argument("--fd-step", type=float, default=1e-6)
    ap.add_argument("--steps", type=int, default=0,
                    help="also train this many steps at lr 0 (check_steps)")
    args = ap.parse_args()
    failures = []
    for m in args.models:
        failures += check_model(args, m)
    for f in failures:
        print("FAIL", f)
    print("%d models, %d failures" % (len(args.models), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
