"""A crashing compiler raises loom.CompileError (loom.PassError for
loom.passes.run on text) and the Python process goes on. The crashes are
forced: loomc's hidden `--debug-crash=KIND` (lib/Driver/Loomc.cpp) and the
binding's `run_passes(..., debug_crash=KIND)` crash the child process the
compiler runs in, in the way KIND names."""

import faulthandler
import json
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

import loom
from loom import _loom
from conftest import DIGITS, MLP_JSON, MLP_ONNX

# kind -> (signal, what the message names after the signal, or None)
SIGNAL_CRASHES = {
    "abort": (signal.SIGABRT, None),
    "segv": (signal.SIGSEGV, None),
    "internal": (signal.SIGABRT,
                 "LLVM ERROR: crashing on purpose (--debug-crash=internal)"),
    "unreachable": (signal.SIGABRT, "UNREACHABLE executed at"),
}


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _no_child_left():
    """The compiler's child process was waited for: no child of this
    process is a zombie or a copy of it (other children, of other tests,
    may live on)."""
    tasks = "/proc/self/task"
    children = set()
    for task in os.listdir(tasks):
        listed = _read("%s/%s/children" % (tasks, task))
        if listed is None:
            return  # a kernel without /proc/.../children: nothing to check
        children.update(listed.split())
    ours = _read("/proc/self/cmdline")
    for child in children:
        stat = _read(b"/proc/%s/stat" % child)
        if stat is None:
            continue  # gone since
        assert stat.rsplit(b") ", 1)[1][:1] != b"Z", "zombie child %s" % child
        assert _read(b"/proc/%s/cmdline" % child) != ours, \
            "a copy of this process is still running (%s)" % child


@pytest.mark.parametrize("kind", sorted(SIGNAL_CRASHES))
def test_a_crashing_compiler_is_a_compile_error(kind):
    sig, why = SIGNAL_CRASHES[kind]
    with pytest.raises(loom.CompileError) as info:
        loom.ir(MLP_JSON, debug_crash=kind)
    error = info.value
    message = str(error)
    assert message.startswith("the compiler crashed (signal %d, %s)"
                              % (sig, signal.strsignal(sig))), message
    if why:
        assert why in message.splitlines()[0]
    assert error.crashed
    assert error.signal == sig and error.exit_code == -sig
    # The output so far comes with it: LLVM's stack dump, headed by the
    # command line.
    assert "Stack dump:" in error.diagnostics
    assert "Program arguments: loomc" in error.diagnostics
    assert error.diagnostics.strip() in message
    assert "--debug-crash=%s" % kind in error.command
    _no_child_left()
    # The process goes on, and so does the compiler.
    assert "loom.matmul" in loom.ir(MLP_JSON)


def test_a_fatal_error_that_exits_is_a_compile_error():
    # reportFatalUsageError (and report_fatal_error(..., false)) print
    # "LLVM ERROR: ..." and call exit(1): that is no normal exit 1.
    with pytest.raises(loom.CompileError) as info:
        loom.ir(MLP_JSON, debug_crash="fatal")
    error = info.value
    assert str(error).splitlines()[0] == (
        "the compiler stopped on a fatal error (exit status 1): LLVM ERROR: "
        "crashing on purpose (--debug-crash=fatal)")
    assert error.crashed and error.signal is None and error.exit_code == 1
    assert "loom.matmul" in loom.ir(MLP_JSON)


def test_an_artifact_compiled_after_a_crash_works(tmp_path):
    with pytest.raises(loom.CompileError, match=r"crashed \(signal 11"):
        loom.compile(DIGITS, tmp_path / "crash.loom", loss="cross_entropy",
                     debug_crash="segv")
    art = loom.compile(DIGITS, tmp_path / "ok.loom", loss="cross_entropy",
                       optimizer="sgd", lr=0.1)
    x = np.random.default_rng(0).random((32, 64), dtype=np.float32)
    assert art.predict(x)["logits"].shape == (32, 10)


def test_a_failing_compile_is_the_same_compile_error_as_before():
    with open(MLP_JSON) as f:
        bad = json.load(f)
    bad["nodes"][2] = {"id": "my_node", "op": "frobnicate",
                       "inputs": ["fc1.add"]}
    with pytest.raises(loom.CompileError) as info:
        loom.compile(bad, train=False)
    error = info.value
    # The message is loomc's diagnostics, as it was before the child
    # process: nothing added.
    assert str(error) == error.diagnostics.strip()
    assert "frobnicate" in str(error)
    assert error.exit_code == 1
    assert not error.crashed and error.signal is None
    # A bad command line: exit status 2, the parser's message.
    with pytest.raises(loom.CompileError, match="no-such-flag") as info:
        loom.ir(MLP_JSON, no_such_flag=3)
    assert info.value.exit_code == 2 and not info.value.crashed
    with pytest.raises(loom.CompileError,
                       match="unknown --debug-crash kind 'bogus'"):
        loom.ir(MLP_JSON, debug_crash="bogus")


def test_the_same_results_without_the_child_process(monkeypatch):
    forked = loom.ir(MLP_ONNX, emit="loss", loss="cross_entropy")
    with pytest.raises(loom.CompileError) as forked_error:
        loom.ir(MLP_JSON, emit="nope")
    monkeypatch.setenv("LOOM_NO_FORK", "1")
    assert loom.ir(MLP_ONNX, emit="loss", loss="cross_entropy") == forked
    with pytest.raises(loom.CompileError) as here_error:
        loom.ir(MLP_JSON, emit="nope")
    assert str(here_error.value) == str(forked_error.value)
    assert here_error.value.exit_code == forked_error.value.exit_code == 2


def test_pythons_crash_handlers_do_not_run_in_the_child(tmp_path):
    # faulthandler (pytest enables it) would print a Python traceback from
    # the child: the child resets the handlers before running the compiler.
    was_enabled = faulthandler.is_enabled()
    with open(tmp_path / "faulthandler.txt", "w+") as log:
        faulthandler.enable(file=log)
        try:
            with pytest.raises(loom.CompileError, match="signal 11"):
                loom.ir(MLP_JSON, debug_crash="segv")
        finally:
            faulthandler.disable()
            if was_enabled:
                faulthandler.enable(file=sys.__stderr__)
        log.seek(0)
        assert log.read() == ""


def test_ctrl_c_stops_the_compiler_and_raises_keyboard_interrupt():
    # SIGINT to this process only (not to the child, as a terminal's Ctrl-C
    # would): the wait notices Python's handler raised, kills the child.
    # GPT-2 for the CPU compiles for seconds here; the signal comes after
    # 0.5 s.
    gpt2 = os.path.join(os.path.dirname(DIGITS), "gpt2.onnx")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            try:
                loom.compile(gpt2, train=True, loss="cross_entropy")
            finally:
                elapsed = time.monotonic() - start
    finally:
        timer.cancel()
    assert elapsed < 3.0, elapsed
    _no_child_left()
    assert "loom.matmul" in loom.ir(MLP_JSON)


IR = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = loom.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


@pytest.mark.parametrize("kind", sorted(SIGNAL_CRASHES))
def test_a_crashing_pass_pipeline_is_a_pass_error(kind):
    sig, why = SIGNAL_CRASHES[kind]
    with pytest.raises(loom.PassError) as info:
        _loom.run_passes(IR, "canonicalize", debug_crash=kind)
    error = info.value
    message = str(error)
    assert message.startswith(
        "the pass pipeline 'canonicalize' crashed (signal %d, %s)"
        % (sig, signal.strsignal(sig))), message
    assert error.crashed and error.signal == sig
    # LLVM's stack dump, with the pipeline it was running.
    assert "Stack dump:" in message
    assert "running the pass pipeline 'canonicalize'" in message
    _no_child_left()
    assert "loom.relu" in loom.passes.run(IR, "canonicalize")


def test_a_pass_pipeline_that_exits_is_a_pass_error():
    with pytest.raises(loom.PassError) as info:
        _loom.run_passes(IR, "canonicalize", debug_crash="fatal")
    assert str(info.value).startswith(
        "the pass pipeline 'canonicalize' stopped on a fatal error (exit "
        "status 1): LLVM ERROR: crashing on purpose")
    assert info.value.crashed and info.value.signal is None
    # A failing pipeline is the PassError it was.
    with pytest.raises(loom.PassError) as info:
        loom.passes.run(IR, "loom-frobnicate")
    assert "loom-frobnicate" in str(info.value) and not info.value.crashed


def test_text_pipelines_in_a_list_run_one_after_the_other():
    out = loom.passes.run(IR, ["canonicalize", "builtin.module(cse)"])
    assert out == loom.passes.run(IR, "canonicalize,cse")


def test_with_sigchld_ignored_a_crash_is_still_a_compile_error():
    # The kernel reaps the child then: the result still comes back, and a
    # crash is still an exception (how it ended is not known).
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert "loom.matmul" in loom.ir(MLP_JSON)
        with pytest.raises(loom.CompileError) as info:
            loom.ir(MLP_JSON, debug_crash="internal")
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert str(info.value).startswith(
        "the compiler ended before it finished, how is not known")
    assert "LLVM ERROR: crashing on purpose" in str(info.value)
    assert info.value.crashed and info.value.exit_code is None
