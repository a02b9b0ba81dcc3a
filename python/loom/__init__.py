"""Loom from Python: compile a model for training, run and train it.

    import loom
    art = loom.compile("examples/onnx/digits_mlp.onnx", loss="cross_entropy",
                       optimizer="adamw", lr=1e-2)
    metrics = art.train({"x": x, "labels": y}, steps=1000)
    probs = art.run("predict", x=x_batch)["logits"]

docs/python.md documents the API.
"""

from . import passes
from ._artifact import Artifact, TensorInfo
from ._compile import compile, ir
from ._errors import CompileError, Error, PassError, RunError
from ._loom import runtime_version

__all__ = ["Artifact", "CompileError", "Error", "PassError", "RunError",
           "TensorInfo", "compile", "ir", "passes", "runtime_version"]
__version__ = runtime_version()
