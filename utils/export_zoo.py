#!/usr/bin/env python3
"""Exports Loom's model zoo with PyTorch's default ONNX exporter and records
PyTorch's own training numbers for each model.

Every model is built from torchvision's or transformers' own classes in a
small configuration, with random weights (torch.manual_seed; nothing is
downloaded), and exported with `torch.onnx.export(model, args, path)` (the
default exporter of the installed PyTorch). For a fixed batch and labels it
then records, in `<name>.npz` beside `<name>.onnx`:

  in.<input name>      the batch, as the ONNX graph's inputs name it
  labels               the class labels of the cross-entropy loss
  loss0                the loss at the initial weights
  grad.<initializer>   d loss / d parameter, keyed by the ONNX initializer name
  losses               the loss before each of STEPS AdamW steps
  buffer1.<name>       (training-mode models) each BatchNorm running
                       statistic after the first step's forward
  buffer.<name>        (training-mode models) the same after STEPS steps
  meta.*               lr, weight decay, steps, class axis

so that `test/e2e/zoo_vs_torch.py` can check Loom against PyTorch without
PyTorch installed (zoo-text.test and zoo-vision.test); zoo-live.test runs
this script for two models with the PyTorch scripts/setup.sh installs and
checks Loom against the numbers it records then. Regenerate with

  python utils/export_zoo.py --out test/e2e/zoo [--only NAME]

in an environment with torch, torchvision, transformers and onnxscript.

Models are exported, and their reference numbers computed, in eval mode:
dropout is the identity and BatchNorm uses its running statistics, so that
the reference is deterministic. The exception is the models of TRAIN_MODE
(ResNet-18 again, as `resnet18_train`), exported and trained in training
mode: BatchNorm normalizes with each batch's statistics and updates its
running statistics, which Loom must reproduce (the default exporter writes
BatchNormalization in inference form even then; Loom recognises the
training-mode node from the exporter's metadata). They are exported with `optimize=False`, as docs/onnx-import.md
advises for training: the exporter's default ONNX optimizer constant-folds
computations on parameters (transposed weights, position-embedding lookups,
BatchNorm folded into the convolution before it, one copy per use of a tied
weight), which gives an inference graph whose initializers are no longer the
model's parameters.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 20
LR = 1e-3
WEIGHT_DECAY = 0.01


# --------------------------------------------------------------------------
# The models: each returns (module, example inputs as a dict, labels, class
# axis). Modules return the logits only.
# --------------------------------------------------------------------------

class LogitsOnly(nn.Module):
    """Wraps a transformers model so that it returns the logits tensor."""

    def __init__(self, inner, arg_names=("input_ids",)):
        super().__init__()
        self.inner = inner
        self.arg_names = arg_names

    def forward(self, *args):
        return self.inner(**dict(zip(self.arg_names, args))).logits


def images(batch, size=32):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, 3, size, size, generator=g)


def class_labels(shape, classes):
    g = torch.Generator().manual_seed(2)
    return torch.randint(0, classes, shape, generator=g)


def tokens(shape, vocab, seed=3, low=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, vocab, shape, generator=g)


def resnet18_small(batch=4):
    # ResNet-18's topology (torchvision's BasicBlock, [2, 2, 2, 2], stem conv
    # 7x7/2 + max pool, global average pool, fc) at 1/8 of its widths, so the
    # checked-in file stays small: torchvision's ResNet class fixes the widths
    # at 64..512, so the same blocks are assembled here with 8..64.
    from torchvision.models.resnet import BasicBlock, ResNet

    class SmallResNet(ResNet):
        def __init__(self, num_classes):
            nn.Module.__init__(self)
            self._norm_layer = nn.BatchNorm2d
            self.inplanes, self.dilation = 8, 1
            self.groups, self.base_width = 1, 64
            self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(BasicBlock, 8, 2)
            self.layer2 = self._make_layer(BasicBlock, 16, 2, stride=2)
            self.layer3 = self._make_layer(BasicBlock, 32, 2, stride=2)
            self.layer4 = self._make_layer(BasicBlock, 64, 2, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(64, num_classes)

    m = SmallResNet(10)
    randomize_bn(m)
    return m, {"x": images(batch)}, class_labels((batch,), 10), 1


def resnet18_small_train():
    # Batch 8: with 4 images, the last stage's BatchNorm normalizes over 4
    # values per channel and training is chaotic (PyTorch's own float32 and
    # float64 runs differ by 5% after 20 steps); with 8 they agree to 3e-6.
    return resnet18_small(batch=8)


def mobilenet_v3_small():
    from torchvision.models import mobilenet_v3_small as make
    m = make(num_classes=10, width_mult=0.25)
    randomize_bn(m)
    return m, {"x": images(2, 64)}, class_labels((2,), 10), 1


def squeezenet():
    # SqueezeNet 1.1: its max pools round their output size up
    # (ceil_mode=True); no BatchNorm. Its dropout is off in eval mode.
    from torchvision.models import squeezenet1_1 as make
    m = make(num_classes=10)
    return m, {"x": images(8, 64)}, class_labels((8,), 10), 1


def efficientnet_b0():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25,
                                       depth_mult=0.25)
    m = EfficientNet(setting, dropout=0.0, last_channel=last, num_classes=10,
                     stochastic_depth_prob=0.0)
    randomize_bn(m)
    return m, {"x": images(2, 64)}, class_labels((2,), 10), 1


def vit_small():
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                          num_heads=2, hidden_dim=32, mlp_dim=64,
                          num_classes=10)
    return m, {"x": images(2)}, class_labels((2,), 10), 1


def gpt2_small():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2,
                     n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    m = LogitsOnly(GPT2LMHeadModel(cfg))
    ids = tokens((2, 16), 256)
    return m, {"input_ids": ids}, tokens((2, 16), 256, seed=4), -1


def llama_small():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64)
    m = LogitsOnly(LlamaForCausalLM(cfg))
    ids = tokens((2, 16), 256)
    return m, {"input_ids": ids}, tokens((2, 16), 256, seed=4), -1


def bert_small():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=64, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    m = LogitsOnly(BertForSequenceClassification(cfg))
    # BERT's word embedding has padding_idx = 0, whose row PyTorch never
    # gives a gradient; an ONNX Gather has no such notion (the exporter
    # drops it), so the batch avoids token 0.
    ids = tokens((2, 16), 256, low=1)
    return m, {"input_ids": ids}, class_labels((2,), 3), -1


def t5_small():
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128,
                   num_layers=2, num_decoder_layers=2, num_heads=4,
                   dropout_rate=0.0, decoder_start_token_id=0)
    m = LogitsOnly(T5ForConditionalGeneration(cfg),
                   ("input_ids", "decoder_input_ids"))
    ids = tokens((2, 16), 256)
    dec = tokens((2, 8), 256, seed=5)
    return (m, {"input_ids": ids, "decoder_input_ids": dec},
            tokens((2, 8), 256, seed=4), -1)


MODELS = {
    "resnet18": resnet18_small,
    "resnet18_train": resnet18_small_train,
    "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0,
    "squeezenet": squeezenet,
    "vit": vit_small,
    "gpt2": gpt2_small,
    "llama": llama_small,
    "bert": bert_small,
    "t5": t5_small,
}


# Exported and trained in training mode (BatchNorm with batch statistics).
TRAIN_MODE = {"resnet18_train"}


def randomize_bn(model):
    """Gives BatchNorm layers non-trivial running statistics and affine
    parameters (fresh ones are 0/1, which would hide mistakes)."""
    g = torch.Generator().manual_seed(7)
    for mod in model.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            n = mod.num_features
            with torch.no_grad():
                mod.running_mean.copy_(0.1 * torch.randn(n, generator=g))
                mod.running_var.copy_(1 + 0.2 * torch.rand(n, generator=g))
                mod.weight.copy_(1 + 0.1 * torch.randn(n, generator=g))
                mod.bias.copy_(0.1 * torch.randn(n, generator=g))


# --------------------------------------------------------------------------
# Reference numbers
# --------------------------------------------------------------------------

def loss_of(model, inputs, labels, class_axis):
    logits = model(*inputs.values())
    if class_axis == 1 or logits.dim() == 2:
        return F.cross_entropy(logits, labels)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           labels.reshape(-1))


def initializer_names(onnx_path):
    import onnx
    m = onnx.load(onnx_path, load_external_data=False)
    return {i.name for i in m.graph.initializer}


def aliases(model):
    """Each distinct parameter tensor with all the names it goes by."""
    out = {}
    for k, p in model.named_parameters(remove_duplicate=False):
        out.setdefault(id(p), []).append(k)
    return out


def onnx_parameters(model, onnx_path, name):
    """The model's parameters by the name of the ONNX initializer that holds
    each (torch.export names them after the module path; a tied weight,
    GPT-2's embedding and head, is one initializer under one of its names).
    Exits when a parameter has no initializer or several."""
    inits = initializer_names(onnx_path)
    params = {}
    for _, names in aliases(model).items():
        found = [k for k in names if k in inits]
        if len(found) != 1:
            sys.exit("%s: parameter %s has %d ONNX initializers" %
                     (name, names, len(found)))
        params[found[0]] = dict(model.named_parameters())[names[0]]
    return params


def running_stats(model, inits):
    """The BatchNorm running statistics, by ONNX initializer name."""
    return {k: v.detach().clone().numpy().astype(np.float32)
            for k, v in model.named_buffers()
            if k in inits and ("running_mean" in k or "running_var" in k)}


def export_one(name, out_dir):
    torch.manual_seed(0)
    model, inputs, labels, class_axis = MODELS[name]()
    train_mode = name in TRAIN_MODE
    model.train(train_mode)
    path = os.path.join(out_dir, name + ".onnx")
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs.values()), path,
                          input_names=list(inputs), output_names=["logits"],
                          external_data=False, optimize=False)
    model.load_state_dict(initial)  # tracing must not have moved anything
    inits = initializer_names(path)

    params = onnx_parameters(model, path, name)

    loss = loss_of(model, inputs, labels, class_axis)
    grads = torch.autograd.grad(loss, list(params.values()))
    rec = {"in." + k: v.numpy() for k, v in inputs.items()}
    rec["labels"] = labels.numpy()
    rec["loss0"] = np.array(loss.item(), np.float32)
    for (k, _), g in zip(params.items(), grads):
        rec["grad." + k] = g.numpy().astype(np.float32)
    if train_mode:
        # That forward updated the running statistics once; the trajectory
        # starts again from the exported state.
        for k, v in running_stats(model, inits).items():
            rec["buffer1." + k] = v
        model.load_state_dict(initial)

    opt = torch.optim.AdamW(model.parameters(), lr=LR,
                            weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        step_loss = loss_of(model, inputs, labels, class_axis)
        losses.append(step_loss.item())
        step_loss.backward()
        opt.step()
    rec["losses"] = np.array(losses, np.float32)
    if train_mode:
        for k, v in running_stats(model, inits).items():
            rec["buffer." + k] = v
    rec["meta.lr"] = np.array(LR)
    rec["meta.weight_decay"] = np.array(WEIGHT_DECAY)
    rec["meta.class_axis"] = np.array(class_axis)
    np.savez_compressed(os.path.join(out_dir, name + ".npz"), **rec)
    nparams = sum(p.numel() for p in params.values())
    print("%-20s %8d parameters  loss0 %.5f  loss%d %.5f  %s" %
          (name, nparams, losses[0], STEPS, losses[-1], path))
    return {"name": name, "parameters": nparams,
            "onnx_bytes": os.path.getsize(path),
            "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="test/e2e/zoo")
    ap.add_argument("--only", action="append", choices=sorted(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    record = os.path.join(args.out, "exported-by.json")
    info = {}
    if args.only and os.path.exists(record):  # keep the others' entries
        with open(record) as f:
            info = {e["name"]: e for e in json.load(f)}
    for name in args.only or MODELS:
        info[name] = export_one(name, args.out)
    with open(record, "w") as f:
        json.dump([info[k] for k in MODELS if k in info], f, indent=1)


if __name__ == "__main__":
    main()
