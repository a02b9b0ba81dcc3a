"""loom.Artifact: a compiled artifact, loaded by Loom's runtime.

Everything goes through the runtime's C API (runtime/include/loomrt/loomrt.h)
via the native module: `run` calls loomrt_artifact_run, `train` the
loomrt_train_* calls, which keep the training state (parameters, optimizer
state, step counter, data position) between calls. The GIL is released
while the runtime works.
"""

import collections
import json
import os
import shutil
import threading
import weakref

import numpy as np

from . import _loom
from ._errors import RunError

__all__ = ["Artifact", "TensorInfo"]

TensorInfo = collections.namedtuple("TensorInfo", "name dtype shape kind")
TensorInfo.__doc__ = ("An input or output of an entry point: its name, "
                      "Loom dtype (f32, i64, bf16, ...), shape and kind "
                      "(param, state, input, output, grad, buffer).")

# Loom's dtype names and numpy's (bf16 travels as 2-byte void).
_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16,
          "bf16": np.dtype("V2"), "i64": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}
_STATE_KINDS = ("param", "state", "buffer")
_MODEL_KINDS = ("param", "buffer")


def _describe(dtype, shape):
    return "%s [%s]" % (dtype, ", ".join(str(d) for d in shape))


def _numpy_name(array):
    for name, dtype in _NUMPY.items():
        if array.dtype == np.dtype(dtype):
            return name
    return str(array.dtype)


class Artifact:
    """A compiled artifact (a `loomc --target=... -o DIR` directory), loaded.

    Artifact(path) loads one from disk; loom.compile returns one.
    """

    def __init__(self, path, *, source=None, report="", _cleanup=None):
        path = os.path.abspath(os.fspath(path))
        if not os.path.isdir(path):
            raise FileNotFoundError("loom: artifact directory '%s' does not "
                                    "exist" % path)
        self.path = path
        self.report = report
        self._native = _loom.NativeArtifact(path)
        self._trainer = _loom.NativeTrainer(self._native)
        self._lock = threading.Lock()
        self.history = []
        self._stopped = False  # the last runtime run was stopped by a callback
        self._state_cache = None  # _current_state()
        if source is None:
            source = self._plan_source()
        self.source = source
        if _cleanup:
            weakref.finalize(self, shutil.rmtree, _cleanup, True)

    def _plan_source(self):
        try:
            with open(os.path.join(self.path, "plan.json")) as f:
                source = json.load(f).get("source_model")
        except (OSError, ValueError):
            return None
        if source and source.lower().endswith(".onnx") and os.path.exists(source):
            return source
        return None

    def __repr__(self):
        return "<loom.Artifact %s: %s, step %d>" % (
            self.path, ", ".join(self.entries), self.step)

    # -- what the artifact holds ------------------------------------------

    @property
    def entries(self):
        """The entry points: predict, train_step, forward_backward, ..."""
        return self._native.entries()

    @property
    def default_entry(self):
        """The model's own computation: `predict` (a training artifact) or
        `forward` (one compiled with train=False)."""
        entries = self.entries
        return "predict" if "predict" in entries or "forward" not in entries \
            else "forward"

    def inputs(self, entry=None):
        """The inputs of `entry` (default_entry), in plan order, as
        TensorInfo."""
        entry = entry or self.default_entry
        return [TensorInfo(d["name"], d["dtype"], tuple(d["shape"]), d["kind"])
                for d in self._native.inputs(entry)]

    def outputs(self, entry=None):
        """The outputs of `entry` (default_entry), in plan order, as
        TensorInfo."""
        entry = entry or self.default_entry
        return [TensorInfo(d["name"], d["dtype"], tuple(d["shape"]), d["kind"])
                for d in self._native.outputs(entry)]

    def data_inputs(self, entry="train_step"):
        """The inputs of `entry` a caller feeds (neither state nor the
        step and seed scalars the runtime feeds itself)."""
        return [i for i in self.inputs(entry)
                if i.kind == "input" and i.name not in ("step", "seed")]

    @property
    def last_train(self):
        """The last train() call as the runtime measured it: start_step,
        step, last_loss, samples_per_second, seconds (its training loop,
        what loom-run's closing line reports), skipped_steps."""
        return self._trainer.summary()

    @property
    def step(self):
        """Optimizer steps done so far."""
        return self._trainer.summary()["step"]

    # -- running entries ---------------------------------------------------

    def _array(self, entry, info, value):
        """`value` as a C-contiguous array of `info`'s dtype and shape."""
        expected = np.dtype(_NUMPY[info.dtype])
        if not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=expected)
        if value.dtype != expected:
            raise TypeError("loom: input '%s' of entry '%s' is %s, expected %s"
                            % (info.name, entry,
                               _describe(_numpy_name(value), value.shape),
                               _describe(info.dtype, info.shape)))
        if tuple(value.shape) != tuple(info.shape):
            raise ValueError("loom: input '%s' of entry '%s' has shape %s, "
                             "expected %s" % (info.name, entry,
                                              list(value.shape),
                                              _describe(info.dtype, info.shape)))
        return np.ascontiguousarray(value)

    def run(self, entry=None, *args, **inputs):
        """Runs `entry` (default_entry) and returns its outputs as
        {name: numpy array}.

        Data inputs are given by name (or positionally, in plan order); they
        must have the entry's dtype and shape (arrays already C-contiguous
        are passed without a copy). Parameters and optimizer state come from
        the training state unless given; `step` and `seed` default to the
        current step and 0.
        """
        entry = entry or self.default_entry
        infos = self.inputs(entry)
        data = [i for i in infos
                if i.kind == "input" and i.name not in ("step", "seed")]
        if len(args) > len(data):
            raise TypeError("loom: entry '%s' takes %d data input(s) (%s), "
                            "%d given" % (entry, len(data),
                                          ", ".join(i.name for i in data),
                                          len(args)))
        given = dict(zip((i.name for i in data), args))
        for name, value in inputs.items():
            if name in given:
                raise TypeError("loom: input '%s' given twice" % name)
            given[name] = value
        known = {i.name: i for i in infos}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError("loom: entry '%s' has no input %s (its inputs: %s)"
                             % (entry, ", ".join("'%s'" % n for n in unknown),
                                ", ".join(i.name for i in data)))
        state = None
        feed = {}
        for info in infos:
            if info.name in given:
                feed[info.name] = self._array(entry, info, given[info.name])
            elif info.kind in _STATE_KINDS:
                if state is None:
                    state = self._current_state()
                if info.name not in state:
                    raise RunError("loom: no value for %s '%s'" %
                                   (info.kind, info.name),
                                   "LOOMRT_ERROR_INVALID_ARGUMENT")
                feed[info.name] = state[info.name]
            elif info.name == "step":
                feed["step"] = np.array(self.step, dtype=_NUMPY[info.dtype])
            elif info.name == "seed":
                feed["seed"] = np.array(0, dtype=_NUMPY[info.dtype])
            else:
                raise ValueError("loom: entry '%s' needs input '%s' (%s)"
                                 % (entry, info.name,
                                    _describe(info.dtype, info.shape)))
        with self._lock:
            values = self._native.run(entry, feed)
        return {o.name: v for o, v in zip(self.outputs(entry), values)}

    def predict(self, *args, **inputs):
        """The model's outputs for these inputs: run(default_entry, ...)."""
        return self.run(None, *args, **inputs)

    # -- training state ----------------------------------------------------

    def _current_state(self):
        """The state tensors as read-only arrays, read from the runtime
        once per change of the state (run() feeds them on every call)."""
        if self._state_cache is None:
            cache = {}
            for d, a in self._trainer.tensors():
                a.flags.writeable = False
                cache[d["name"]] = a
            self._state_cache = cache
        return self._state_cache

    def state(self):
        """Every state tensor (params, buffers, optimizer state), as copies."""
        return {d["name"]: a for d, a in self._trainer.tensors()}

    def parameters(self):
        """The model's parameters (and buffers), {name: numpy array}, copies."""
        return {d["name"]: a for d, a in self._trainer.tensors()
                if d["kind"] in _MODEL_KINDS}

    def load_parameters(self, values, strict=True):
        """Replaces parameters (or any state tensor) by name. With strict,
        every name must be a state tensor of the artifact."""
        infos = {d["name"]: d for d, _ in self._trainer.tensors()}
        for name, value in values.items():
            info = infos.get(name)
            if info is None:
                if strict:
                    raise KeyError("loom: '%s' is not a parameter of the "
                                   "artifact (it has: %s)"
                                   % (name, ", ".join(sorted(
                                       n for n, d in infos.items()
                                       if d["kind"] in _MODEL_KINDS))))
                continue
            value = np.asarray(value)
            expected = np.dtype(_NUMPY[info["dtype"]])
            if value.dtype != expected:
                raise TypeError("loom: '%s' is %s, the artifact's %s is %s"
                                % (name, _describe(_numpy_name(value),
                                                   value.shape),
                                   info["kind"],
                                   _describe(info["dtype"], info["shape"])))
            if tuple(value.shape) != tuple(info["shape"]):
                raise ValueError("loom: '%s' has shape %s, the artifact's %s "
                                 "is %s" % (name, list(value.shape),
                                            info["kind"],
                                            _describe(info["dtype"],
                                                      info["shape"])))
            with self._lock:
                self._trainer.set_tensor(name, np.ascontiguousarray(value))
                self._state_cache = None

    def save_checkpoint(self, path):
        """Writes the training state as a checkpoint file (loom-run
        --resume reads it too)."""
        with self._lock:
            self._trainer.save_checkpoint(os.fspath(path))

    def load_checkpoint(self, path):
        """Replaces the training state with a checkpoint file, or the newest
        checkpoint of a directory."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError("loom: checkpoint '%s' does not exist"
                                    % path)
        with self._lock:
            self._trainer.load_checkpoint(path)
            self._state_cache = None

    def export_onnx(self, path, source=None):
        """Writes the ONNX model `source` (default: the one compiled) with
        the trained parameters to `path`; returns the names replaced."""
        source = source or self.source
        if source is None:
            raise ValueError("loom: no source ONNX model to export into "
                             "(the artifact was not compiled from ONNX); "
                             "pass source=")
        return _loom.export_onnx(os.fspath(source), os.fspath(path),
                                 self.parameters())

    # -- training ----------------------------------------------------------

    def _set_data(self, data, eval, entry, what):
        """Hands `data` (a dict of arrays or an .npz path) to the trainer."""
        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
            if not os.path.exists(path):
                raise FileNotFoundError("loom: %s file '%s' does not exist"
                                        % (what, path))
            self._trainer.set_option("eval_data" if eval else "data", path)
            return
        if not isinstance(data, dict):
            raise TypeError("loom: %s must be a dict of numpy arrays or an "
                            ".npz path, not %s" % (what, type(data).__name__))
        expected = {i.name: i for i in self.data_inputs(entry)}
        for name, value in data.items():
            value = np.asarray(value)
            info = expected.get(name)
            if info is not None:
                want = np.dtype(_NUMPY[info.dtype])
                if value.dtype != want:
                    raise TypeError(
                        "loom: %s array '%s' is %s, expected %s [N, %s]"
                        % (what, name, _describe(_numpy_name(value),
                                                 value.shape), info.dtype,
                           ", ".join(str(d) for d in info.shape[1:])))
                if tuple(value.shape[1:]) != tuple(info.shape[1:]) or \
                        value.ndim != len(info.shape):
                    raise ValueError(
                        "loom: %s array '%s' has shape %s, expected [N, %s] "
                        "(entry '%s' takes %s)"
                        % (what, name, list(value.shape),
                           ", ".join(str(d) for d in info.shape[1:]), entry,
                           _describe(info.dtype, info.shape)))
            self._trainer.add_array(eval, name, np.ascontiguousarray(value))

    def train(self, data, steps, *, batch_size=None, accumulate=None,
              eval_data=None, eval_every=None, checkpoint_dir=None,
              save_every=None, keep_checkpoints=None, resume=None, seed=None,
              metrics_file=None, callback=None, progress=None, tokens=None,
              labels_input=None, doc_separator=None, documents_input=None,
              positions_input=None, data_trace=None):
        """Trains for `steps` more optimizer steps; returns their metrics.

        data: {input name: array [N, ...]} (the entry's data inputs and
            labels; N samples, shuffled into batches each epoch), an .npz
            path, or an iterable of such dicts holding one batch each (of
            the compiled batch size, used in order, one per step: slower,
            the state goes through the host between steps). Arrays are
            borrowed, not copied, while training runs.
        eval_data, eval_every: held-out data, evaluated every K steps and at
            the end (loss through `forward`, accuracy through `predict`).
        checkpoint_dir, save_every, keep_checkpoints: checkpoints as
            loom-run writes them; resume: a checkpoint file or directory to
            start from. seed: data order and dropout (at step 0 only).
        metrics_file: also append the metrics as JSON lines there.
        callback(metrics): called after each step and each evaluation with
            its metrics dict; returning False stops training.
        progress: a tqdm bar (None: when tqdm is installed; True: tqdm, or
            the runtime's progress lines without it; False: none).
        tokens: "uint16", "uint32" or "megatron": `data` (and `eval_data`)
            is a path to a flat file of token ids (or a Megatron indexed
            dataset's prefix), read window by window (loom-run
            --tokens; docs/loom-run.md, "Token streams"); labels_input,
            doc_separator, documents_input, positions_input name the
            inputs that get the next tokens, document ids and positions.
        data_trace: a path that gets one JSON line per micro-batch with
            the sample indices it read.

        Returns a list of dicts, one per step and per evaluation, with the
        fields of loom-run's --metrics lines (step, loss, samples_per_sec,
        epoch, lr, eval_loss, eval_accuracy, ...). The GIL is released
        while the runtime trains; Ctrl-C stops training after the current
        step with the state kept.
        """
        if steps < 0:
            raise ValueError("loom: steps must be non-negative")
        if resume is not None:
            self.load_checkpoint(resume)
        entry = "train_step" if (accumulate or 1) == 1 else "forward_backward"
        if entry not in self.entries:
            raise RunError("loom: the artifact has no entry '%s' (entries: "
                           "%s); compile with train=True" %
                           (entry, ", ".join(self.entries)),
                           "LOOMRT_ERROR_UNSUPPORTED")
        compiled = self._batch_size(entry)
        if batch_size and compiled and batch_size != compiled:
            raise ValueError("loom: batch_size %d does not match the compiled "
                             "batch size %d (shapes are static: compile "
                             "again for another batch size)"
                             % (batch_size, compiled))
        if tokens is not None and not isinstance(data, (str, os.PathLike)):
            raise TypeError("loom: tokens=%r needs data as the path of a "
                            "token file, not %s" % (tokens,
                                                    type(data).__name__))
        options = dict(tokens=tokens or "",
                       labels_input=labels_input or "labels",
                       doc_separator=-1 if doc_separator is None
                       else doc_separator,
                       documents_input=documents_input or "",
                       positions_input=positions_input or "",
                       data_trace=data_trace or "",
                       batch_size=batch_size or 0, accumulate=accumulate or 1,
                       eval_every=eval_every or 0,
                       checkpoint_dir=checkpoint_dir or "",
                       save_every=save_every or 0,
                       keep_checkpoints=3 if keep_checkpoints is None
                       else keep_checkpoints,
                       seed=seed or 0, metrics=metrics_file or "")
        bar = self._progress_bar(progress, steps)
        report = self._reporter(callback, bar)
        try:
            if isinstance(data, (dict, str, os.PathLike)):
                metrics = self._run_trainer(entry, data, eval_data, steps,
                                            options, report, progress, bar)
            else:
                metrics = self._train_on_batches(entry, data, eval_data, steps,
                                                 options, report, progress, bar)
        finally:
            if bar is not None:
                bar.close()
        self.history.extend(metrics)
        return metrics

    def _batch_size(self, entry):
        """The compiled batch size of `entry` (dim 0 of its data inputs),
        or None if it has none (the runtime then says what is wrong)."""
        data = [i for i in self.data_inputs(entry) if i.shape]
        return data[0].shape[0] if data else None

    @staticmethod
    def _progress_bar(progress, steps):
        """A tqdm bar, if asked for (or by default) and tqdm is installed."""
        if progress is False or steps == 0:
            return None
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None
        return tqdm(total=steps, unit="step", desc="loom train")

    @staticmethod
    def _reporter(callback, bar):
        """The runtime's metrics callback: a JSON line to the bar and the
        user's callback (None when there is neither: no GIL per step)."""
        if callback is None and bar is None:
            return None

        def report(line):
            m = json.loads(line)
            if bar is not None and "loss" in m:
                bar.update(1)
                if m["loss"] is not None:
                    bar.set_postfix(loss="%.4g" % m["loss"], refresh=False)
            if callback is not None:
                return callback(m)
            return None
        return report

    def _run_trainer(self, entry, data, eval_data, steps, options, report,
                     progress, bar):
        """One loomrt_train_run of `steps` steps on `data`; its metrics and
        whether the callback stopped it."""
        t = self._trainer
        with self._lock:
            t.clear_data()
            t.set_option("data", "")
            t.set_option("eval_data", "")
            try:
                self._set_data(data, False, entry, "training data")
                if eval_data is not None:
                    self._set_data(eval_data, True,
                                   "predict" if "predict" in self.entries
                                   else "forward", "evaluation data")
                # Every option every time: nothing carries over from the
                # last call but the state.
                t.set_option("steps", str(t.summary()["step"] + steps))
                t.set_option("progress", "lines" if progress is True and
                             bar is None else "none")
                for key, value in options.items():
                    t.set_option(key, os.fspath(value)
                                 if isinstance(value, os.PathLike)
                                 else str(value))
                self._state_cache = None
                lines, stopped = t.run(report)
            finally:
                t.clear_data()
        self._stopped = stopped
        return [json.loads(line) for line in lines]

    def _train_on_batches(self, entry, batches, eval_data, steps, options,
                          report, progress, bar):
        """Training on an iterable of batches: one runtime run per batch
        (of the compiled size, so the loader takes it whole), evaluation
        between them here."""
        if isinstance(batches, np.ndarray) or not hasattr(batches, "__iter__"):
            raise TypeError("loom: training data must be a dict of arrays, "
                            "an .npz path or an iterable of batch dicts, not "
                            "%s" % type(batches).__name__)
        if options["checkpoint_dir"] or options["save_every"] or \
                options["accumulate"] != 1:
            raise ValueError("loom: with an iterable of batches, checkpoints "
                             "(checkpoint_dir, save_every) and accumulate are "
                             "not supported; call save_checkpoint() between "
                             "train() calls")
        size = self._batch_size(entry)
        every = options.pop("eval_every")
        metrics = []
        last_eval = None
        iterator = iter(batches)
        for _ in range(steps):
            try:
                batch = next(iterator)
            except StopIteration:
                break
            if not isinstance(batch, dict):
                raise TypeError("loom: each batch must be a dict of arrays, "
                                "not %s" % type(batch).__name__)
            for name, value in batch.items():
                rows = np.shape(value)[:1]
                if size is not None and rows != (size,):
                    raise ValueError("loom: batch array '%s' has %s rows, "
                                     "the compiled batch size is %d"
                                     % (name, rows[0] if rows else "no",
                                        size))
            metrics += self._run_trainer(entry, batch, None, 1, options,
                                         report, progress, bar)
            if self._stopped:
                return metrics
            if eval_data is not None and every and self.step % every == 0:
                last_eval = self.step
                if self._evaluation_metrics(eval_data, metrics, report,
                                            options["metrics"]):
                    return metrics
        if eval_data is not None and last_eval != self.step:
            self._evaluation_metrics(eval_data, metrics, report,
                                     options["metrics"])
        return metrics

    def _evaluation_metrics(self, eval_data, metrics, report, metrics_file):
        """Evaluates, appends the metrics line loom-run would write (to
        `metrics` and `metrics_file`); True if the callback asked to stop."""
        r = self.evaluate(eval_data)
        m = {"step": self.step, "eval_samples": r["samples"]}
        if r["loss"] is not None:
            m["eval_loss"] = r["loss"]
        if r["accuracy"] is not None:
            m["eval_accuracy"] = r["accuracy"]
        metrics.append(m)
        if metrics_file:
            with open(metrics_file, "a") as f:
                f.write(json.dumps(m) + "\n")
        return report is not None and report(json.dumps(m)) is False

    def evaluate(self, data):
        """Held-out loss (entry `forward`) and accuracy (entry `predict`,
        argmax against integer labels) of the current parameters on `data`
        (dict or .npz path), over its full batches: {"loss", "accuracy",
        "samples"} (None where the artifact cannot compute one)."""
        with self._lock:
            t = self._trainer
            t.clear_data()
            t.set_option("eval_data", "")
            self._set_data(data, True, "predict" if "predict" in self.entries
                           else "forward", "evaluation data")
            try:
                loss, accuracy, samples = t.evaluate()
            finally:
                t.clear_data()
        nan_to_none = lambda v: None if v != v else v  # noqa: E731
        return {"loss": nan_to_none(loss), "accuracy": nan_to_none(accuracy),
                "samples": samples}
