"""loom.passes: run Loom's (and MLIR's) passes on IR text from Python.

    import loom
    ir = loom.ir("examples/onnx/mlp.onnx", emit="autodiff")
    fused = loom.passes.run(ir, "loom-fuse,canonicalize")

The pipeline is the text loom-opt takes (`--pass-pipeline`): pass arguments
with their options, separated by commas, optionally wrapped in
`builtin.module(...)`; every pass and pipeline loom-opt knows is there
(`loom-opt --help` lists them). Upstream MLIR's Python bindings are not
packaged by Debian for LLVM 22, so walking and rewriting the IR from
Python is done on the text for now (docs/python.md).
"""

from . import _loom

__all__ = ["run"]


def run(ir, pipeline):
    """Parses `ir`, runs the pass pipeline `pipeline` on it and returns the
    resulting IR text. Raises loom.PassError with the diagnostics (and their
    line and column in `ir`) when parsing or a pass fails."""
    if not isinstance(ir, str):
        raise TypeError("loom.passes.run: ir must be IR text (str), not %s"
                        % type(ir).__name__)
    if not isinstance(pipeline, str):
        raise TypeError("loom.passes.run: pipeline must be a str, not %s"
                        % type(pipeline).__name__)
    return _loom.run_passes(ir, pipeline)
