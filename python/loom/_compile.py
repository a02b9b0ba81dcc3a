"""loom.compile and loom.ir: run Loom's compiler (loomc) from Python.

loomc's driver runs in a forked child of this process, so that a crash in
the compiler raises CompileError rather than ending Python
(LOOM_NO_FORK=1: in this process).

A model may be an ONNX file, an `onnx.ModelProto`, a JSON graph (a file or a
dict, docs/json-format.md) or a `torch.nn.Module` with `example_inputs`
(exported with `torch.onnx.export`). Keyword options become loomc flags:
`memory_budget="64M"` is `--memory-budget=64M`, `lr=0.01` is `--lr=0.01`,
`True` a bare flag, a list the flag repeated; `loomc --help` lists them.
"""

import json
import os
import shutil
import sys
import tempfile

from . import _loom
from ._errors import CompileError

__all__ = ["compile", "ir"]


# Flags LLVM's parser answers by printing and exiting the process.
_EXITING_FLAGS = {"help", "help-hidden", "help-list", "help-list-hidden",
                  "version", "print-options", "print-all-options"}


def _flags(options):
    """loomc flags for keyword options, in the order given."""
    args = []
    for key, value in options.items():
        if value is None:
            continue
        if key.replace("_", "-") in _EXITING_FLAGS:
            raise ValueError("loom: '%s' is not a compiler option here (it "
                             "would end the process); run `loomc --help` "
                             "in a shell for the options" % key)
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False:
            args.append(flag + "=false")
        elif isinstance(value, (list, tuple)):
            args.extend("%s=%s" % (flag, v) for v in value)
        else:
            args.append("%s=%s" % (flag, value))
    return args


def _is_torch_module(model):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _export_torch(module, example_inputs, path, input_names):
    import torch

    if example_inputs is None:
        raise ValueError("loom.compile: a torch.nn.Module needs example_inputs "
                         "(a tensor or a tuple of tensors of the shapes to "
                         "compile for)")
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if input_names is None:
        input_names = (["x"] if len(example_inputs) == 1 else
                       ["input_%d" % i for i in range(len(example_inputs))])
    kwargs = dict(input_names=list(input_names), output_names=["logits"])
    with torch.no_grad():
        try:
            # The options of the exporter Loom's model zoo is checked with
            # (docs/onnx-import.md); older PyTorch lacks them.
            torch.onnx.export(module, example_inputs, path, external_data=False,
                              optimize=False, **kwargs)
        except TypeError:
            torch.onnx.export(module, example_inputs, path, **kwargs)


def _is_model_proto(model):
    return (hasattr(model, "SerializeToString") and hasattr(model, "graph")
            and hasattr(model, "opset_import"))


def _materialize(model, directory, example_inputs=None, input_names=None):
    """A path loomc can read for `model`, written into `directory` when the
    model is not a file already."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise FileNotFoundError("loom: model file '%s' does not exist" % path)
        if os.path.isdir(path):
            raise IsADirectoryError("loom: model '%s' is a directory, not an "
                                    ".onnx or .json file" % path)
        if os.path.splitext(path)[1].lower() not in (".onnx", ".json"):
            raise ValueError("loom: cannot tell the format of '%s': expected "
                             "a .onnx or .json file" % path)
        return os.path.abspath(path)
    os.makedirs(directory, exist_ok=True)
    if isinstance(model, dict):
        path = os.path.join(directory, "model.json")
        with open(path, "w") as f:
            json.dump(model, f)
        return path
    if _is_model_proto(model):
        path = os.path.join(directory, "model.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return path
    if _is_torch_module(model):
        path = os.path.join(directory, "model.onnx")
        _export_torch(model, example_inputs, path, input_names)
        return path
    kind = type(model).__module__ + "." + type(model).__name__
    if kind.startswith("torch."):
        raise TypeError("loom: cannot compile a %s: pass a torch.nn.Module "
                        "with example_inputs" % kind)
    raise TypeError("loom: cannot compile a %s: expected a path to an .onnx "
                    "or .json file, an onnx.ModelProto, a JSON graph as a "
                    "dict, or a torch.nn.Module (with PyTorch installed)" % kind)


def _isolated():
    """Whether the compiler runs in a child process (the default), so that
    a crash in it raises CompileError instead of ending this process.
    LOOM_NO_FORK=1 runs it in this process (e.g. to debug it in gdb)."""
    return os.environ.get("LOOM_NO_FORK", "") in ("", "0")


def _run(args):
    """Runs loomc; returns its stdout, raises CompileError on failure."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    args = [str(a) for a in args]
    code, out, err, failure, signal, ran = _loom.run_loomc(
        args, isolated=_isolated())
    out = out.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    command = ["loomc"] + args
    if not ran:
        # No child process (fork failed): the compiler did not run.
        raise CompileError(failure, exit_code=None, command=command)
    if failure is not None:
        # It crashed, or exited from inside (llvm::report_fatal_error): say
        # so first, then everything it printed (the stack dump).
        text = failure + ("\n" + err.rstrip() if err.strip() else "")
        raise CompileError(text, diagnostics=err, exit_code=code,
                           command=command, signal=signal or None,
                           crashed=True, output=out)
    if code != 0:
        text = err.strip() or "loomc exited with status %d" % code
        raise CompileError(text, diagnostics=err, exit_code=code,
                           command=command, output=out)
    if err.strip():
        # Notes and warnings of a successful compilation: the user's to see.
        sys.stderr.write(err)
    return out


def compile(model, out_dir=None, train=True, loss=None, optimizer=None,
            target="cpu", memory_budget=None, precision=None, *,
            example_inputs=None, input_names=None, report=False, **options):
    """Compiles `model` into an artifact directory and loads it.

    model: an .onnx or .json path, an onnx.ModelProto, a JSON graph dict, or a
        torch.nn.Module (with `example_inputs`; `input_names` names them,
        default "x" for one input).
    out_dir: the artifact directory (created); default a temporary one,
        removed when the Artifact is garbage collected.
    train: build the training step (loss, backward, optimizer) besides the
        model's `predict` entry.
    loss, optimizer, target, memory_budget, precision, and **options: loomc
        flags (e.g. lr=1e-2, labels="labels", schedule="cosine",
        total_steps=1000, remat="auto", weight_decay=0.01).
    report: print loomc's report of kernels, GEMMs and arenas (it is also
        kept as Artifact.report).

    Returns a loom.Artifact. Raises loom.CompileError carrying loomc's
    diagnostics, which name the model node at fault; also when the
    compiler crashes (it runs in a child process: `crashed`, `signal`).
    """
    from ._artifact import Artifact

    temporary = out_dir is None
    if temporary:
        holder = tempfile.mkdtemp(prefix="loom-")
        out_dir = os.path.join(holder, "model.loom")
    out_dir = os.path.abspath(os.fspath(out_dir))
    try:
        # An in-memory model is written into the artifact directory, which
        # keeps it as the source `export_onnx` writes trained weights into.
        path = _materialize(model, out_dir, example_inputs, input_names)
        args = [path, "-o", out_dir]
        if target:
            args.append("--target=%s" % target)
        args += _flags(dict(train=bool(train) or None, loss=loss,
                            optimizer=optimizer, memory_budget=memory_budget,
                            precision=precision, report=report or None))
        args += _flags(options)
        out = _run(args)
    except BaseException:
        if temporary:
            shutil.rmtree(holder, ignore_errors=True)
        raise
    if report and out:
        sys.stdout.write(out)
    source = path if path.lower().endswith(".onnx") else None
    return Artifact(out_dir, source=source, report=out,
                    _cleanup=holder if temporary else None)


def ir(model, emit="mlir", *, example_inputs=None, input_names=None,
       **options):
    """The IR text after a phase of loomc's pipeline (`loomc --emit=PHASE`):
    mlir (the import), loss, mixed-precision, autodiff, optimizer, and with
    target="cpu" (or "cuda:sm_NN") remat, fuse, plan-memory, outline,
    bufferize, kernels. Options are loomc flags as for compile() (train=True
    and the training options apply to the training phases)."""
    with tempfile.TemporaryDirectory(prefix="loom-ir-") as tmp:
        path = _materialize(model, tmp, example_inputs, input_names)
        out_path = os.path.join(tmp, "out.mlir")
        _run([path, "--emit=%s" % emit, "-o", out_path] + _flags(options))
        with open(out_path) as f:
            return f.read()
