#!/usr/bin/env python3
"""Exports the character-level GPT of the charlm demo (scripts/demo_charlm.sh).

The model is transformers' own `GPT2LMHeadModel` in a small configuration
(4 layers, 4 heads, d 128, context 64, a 97-symbol character vocabulary,
dropout 0), with random weights from `torch.manual_seed(0)` (nothing is
downloaded). It is exported with PyTorch's default ONNX exporter, as
utils/export_zoo.py does: eval mode, `optimize=False` (the exporter's
optimizer would constant-fold the parameters, see docs/onnx-import.md),
static shapes:

  input   input_ids  int64   [B, T]      B = 32, T = 64
  output  logits     float32 [B, T, V]   V = 97

Writes, next to this script:

  charlm.onnx   the model (3.8 MB: 0.81 M parameters)
  vocab.json    the vocabulary (make_data.py and sample.py read it)

The vocabulary is fixed here, not taken from the data: "\\n", then the 95
printable ASCII characters " ".."~", then an unknown symbol (id 96) that
every other character maps to. Sampling uses the training artifact's
`predict` entry (batch B, rows padded), so one file serves both training and
sampling.

Needs torch, transformers and onnxscript (not in CI's .venv; the exported
files are checked in). Usage:

  python examples/charlm/export_charlm.py [--out-dir examples/charlm]
"""
import argparse
import json
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH = 32
CONTEXT = 64
N_EMBD = 128
N_LAYER = 4
N_HEAD = 4
CHARS = ["\n"] + [chr(c) for c in range(32, 127)]
UNKNOWN = "<unk>"


class CharGPT(GPT2LMHeadModel):
    """GPT2LMHeadModel that returns the logits tensor only (so the ONNX
    graph has one output, `logits`). Subclassing rather than wrapping keeps
    the parameter names the module's own (`transformer.h.0.attn...`)."""

    def forward(self, input_ids):
        # use_cache stays at its default (True), as in utils/export_zoo.py:
        # with use_cache=False and no attention mask, transformers 5 traces
        # its packed-sequence detection into the causal mask (CumSum,
        # GatherND, And on the position ids), which Loom does not import
        # yet. The cache is not an output, so the graph is the same model.
        return super().forward(input_ids=input_ids).logits


def build():
    vocab = len(CHARS) + 1
    cfg = GPT2Config(vocab_size=vocab, n_positions=CONTEXT, n_embd=N_EMBD,
                     n_layer=N_LAYER, n_head=N_HEAD, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = CharGPT(cfg)
    model.eval()
    return model, cfg


def strip_stack_traces(path):
    """Drops the exporter's per-node Python stack traces (node metadata
    `pkg.torch.onnx.stack_trace`, about 0.5 MB, with this machine's
    paths in it); nothing else changes. Loom does not read node metadata."""
    import onnx
    m = onnx.load(path)
    for node in m.graph.node:
        keep = [p for p in node.metadata_props
                if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    onnx.save(m, path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=here)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    model, cfg = build()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, CONTEXT), generator=g)
    path = os.path.join(args.out_dir, "charlm.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (ids,), path, input_names=["input_ids"],
                          output_names=["logits"], external_data=False,
                          optimize=False)
    strip_stack_traces(path)
    vocab = {
        "chars": CHARS + [UNKNOWN],
        "unknown_id": len(CHARS),
        "batch": BATCH,
        "context": CONTEXT,
        "model": "transformers GPT2LMHeadModel: n_layer %d, n_head %d, "
                 "n_embd %d, n_positions %d, vocab_size %d, dropout 0, "
                 "torch.manual_seed(0)" % (N_LAYER, N_HEAD, N_EMBD, CONTEXT,
                                          cfg.vocab_size),
        "exported_by": "torch %s, transformers %s" % (
            torch.__version__, __import__("transformers").__version__),
    }
    with open(os.path.join(args.out_dir, "vocab.json"), "w") as f:
        json.dump(vocab, f, indent=1)
        f.write("\n")
    nparams = sum(p.numel() for p in model.parameters())
    print("wrote %s (%d bytes, %d parameters, input_ids int64 [%d, %d], "
          "logits [%d, %d, %d]) and vocab.json" %
          (path, os.path.getsize(path), nparams, BATCH, CONTEXT, BATCH,
           CONTEXT, cfg.vocab_size))


if __name__ == "__main__":
    main()
