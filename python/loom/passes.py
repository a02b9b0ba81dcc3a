"""loom.passes: run Loom's (and MLIR's) passes from Python, and write passes
in Python.

    import loom
    ir = loom.ir("examples/onnx/mlp.onnx", emit="autodiff")
    fused = loom.passes.run(ir, "loom-fuse,canonicalize")

A pipeline is the text loom-opt takes (`--pass-pipeline`): pass arguments
with their options, separated by commas, optionally wrapped in
`builtin.module(...)`; every pass and pipeline loom-opt knows is there
(`loom-opt --help` lists them). It can also be a list whose items are such
texts or Python passes: functions that take a `Module` and rewrite it in
place.

`parse(ir)` gives the `Module` itself: `walk()` its operations, read an
operation's name, location, attributes, operands and results, replace a
value's uses, erase operations, create new ones (`Module.create_op`).
Types and attributes are their printed text. Upstream MLIR's Python
bindings are not packaged for LLVM 22 here, so this is Loom's own small
binding (docs/python.md); examples/python/fold_identities.py is a pass
written with it.

Pipelines on IR text run in a forked child process: a pass that crashes
raises PassError (`crashed`, `signal`) instead of ending Python
(LOOM_NO_FORK=1: in this process). Pipelines on a Module run in this
process, on the module itself: a crash there ends the process.
"""

import os

from . import _loom
from ._loom import Module, Operation, Value

__all__ = ["Module", "Operation", "Value", "parse", "run"]


def parse(ir):
    """The IR text `ir` as a Module to walk and rewrite. Raises
    loom.PassError with the diagnostics when it does not parse."""
    if not isinstance(ir, str):
        raise TypeError("loom.passes.parse: ir must be IR text (str), not %s"
                        % type(ir).__name__)
    return _loom.parse_ir(ir)


def _isolated():
    return os.environ.get("LOOM_NO_FORK", "") in ("", "0")


def run(ir, pipeline):
    """Runs `pipeline` on `ir`.

    `ir` is IR text (the result is the new text) or a Module (rewritten in
    place and returned). `pipeline` is pipeline text, a Python pass (a
    function of a Module) or a list of both, run in order. Raises
    loom.PassError with the diagnostics (and their line and column in the
    text) when parsing or a pass fails; a Python pass's own exceptions
    propagate.

    Text with pipeline text only runs in a child process, each step
    parsed, run and printed there: a crash raises loom.PassError (its
    `crashed` True) and this process goes on. A Module, or a list with
    Python passes, runs in this process."""
    steps = pipeline if isinstance(pipeline, (list, tuple)) else [pipeline]
    for step in steps:
        if not isinstance(step, str) and not callable(step):
            raise TypeError("loom.passes.run: a pipeline step must be a str "
                            "or a function of a Module, not %s"
                            % type(step).__name__)
    if isinstance(ir, str):
        if all(isinstance(step, str) for step in steps):
            for step in steps:
                ir = _loom.run_passes(ir, step, isolated=_isolated())
            return ir
        return str(run(parse(ir), steps))
    if not isinstance(ir, Module):
        raise TypeError("loom.passes.run: ir must be IR text (str) or a "
                        "loom.passes.Module, not %s" % type(ir).__name__)
    for step in steps:
        if isinstance(step, str):
            _loom.run_passes_on(ir, step)
        else:
            step(ir)
    return ir
