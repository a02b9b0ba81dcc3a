#!/usr/bin/env python3
"""A torch.nn.Module compiled by Loom, trained by Loom, checked in PyTorch.

    PYTHONPATH=build/python python3 examples/python/torch_module.py

loom.compile exports the module with torch.onnx.export. Every step trains
on the whole (shuffled) data set, one batch of 32, so plain SGD in Loom and
in PyTorch take the same steps: the weights Loom trains are loaded back
into the module and compared with PyTorch's own training, and the module's
outputs with Loom's. Without PyTorch it says so and exits 0.
"""
import copy
import sys

try:
    import torch
except ImportError:
    print("torch_module.py: PyTorch is not installed; nothing to do "
          "(pip install torch)")
    sys.exit(0)

import loom


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
model = MLP()
reference = copy.deepcopy(model)  # trained by PyTorch below
x = torch.randn(32, 16)
labels = torch.randint(0, 4, (32,))
STEPS, LR = 50, 0.1

# --- the user's code -------------------------------------------------------
art = loom.compile(model, example_inputs=(x,), loss="cross_entropy",
                   optimizer="sgd", lr=LR)
metrics = art.train({"x": x.numpy(), "labels": labels.numpy()}, steps=STEPS)
trained = {k: torch.from_numpy(v) for k, v in art.parameters().items()}
missing, unexpected = model.load_state_dict(trained, strict=False)
# ---------------------------------------------------------------------------
if missing or unexpected:
    sys.exit("parameter names differ: missing %s, unexpected %s"
             % (missing, unexpected))

opt = torch.optim.SGD(reference.parameters(), lr=LR)
for _ in range(STEPS):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(reference(x), labels)
    loss.backward()
    opt.step()

worst = max((model.state_dict()[k] - v).abs().max().item()
            for k, v in reference.state_dict().items())
with torch.no_grad():
    ours = torch.from_numpy(art.predict(x.numpy())["logits"])
    output_gap = (ours - model(x)).abs().max().item()
print("loss %.4f -> %.4f in Loom, %.4f in PyTorch" %
      (metrics[0]["loss"], metrics[-1]["loss"], loss.item()))
print("largest weight difference Loom vs PyTorch: %.2e" % worst)
print("largest output difference Loom vs the module with Loom's weights: %.2e"
      % output_gap)
sys.exit(0 if worst < 1e-4 and output_gap < 1e-4 else 1)
