#!/usr/bin/env python3
"""Exports small models as users do, for what loomc says about them.

    export_diagnostics.py OUTDIR

Writes, with the installed PyTorch's default exporter:
  cnn_folded.onnx   a conv / batch-norm / ReLU net in training mode, exported
                    with the exporter's optimizer on (its default): the
                    batch norms are folded into the convolutions;
  cnn_kept.onnx     the same with optimize=False: the batch norms are kept;
  ln_merged.onnx    two fresh LayerNorms (weights all ones) with the
                    optimizer on: their equal weights become one initializer;
  tied.onnx         an embedding whose table is also the output projection
                    (tied weights, as GPT-2's), optimize=False.
"""
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(4)
        self.c2 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.b2(self.c2(x)))
        return self.fc(x.mean((2, 3)))


class TwoNorms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 8)
        self.n1 = torch.nn.LayerNorm(8)
        self.l2 = torch.nn.Linear(8, 8)
        self.n2 = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.n2(self.l2(self.n1(self.l1(x))))


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)

    def forward(self, ids):
        return self.emb(ids) @ self.emb.weight.t()


def export(model, args, path, optimize):
    with torch.no_grad():
        torch.onnx.export(model, args, path, optimize=optimize,
                          external_data=False)


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    cnn = Cnn().train()
    x = torch.randn(2, 3, 8, 8)
    export(cnn, (x,), os.path.join(out, "cnn_folded.onnx"), True)
    export(cnn, (x,), os.path.join(out, "cnn_kept.onnx"), False)
    export(TwoNorms().train(), (torch.randn(2, 8),),
           os.path.join(out, "ln_merged.onnx"), True)
    export(Tied().train(), (torch.randint(0, 16, (2, 5)),),
           os.path.join(out, "tied.onnx"), False)


if __name__ == "__main__":
    main()
