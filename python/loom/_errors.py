"""The exceptions the loom package raises (besides TypeError, ValueError and
FileNotFoundError for bad arguments)."""


class Error(Exception):
    """Base class of Loom's own errors."""


class CompileError(Error):
    """The compiler refused the model or failed: `diagnostics` holds Loom's
    messages (they name the ONNX node or JSON node at fault), `exit_code`
    loomc's exit status, `command` the loomc command line that failed.

    When the compiler crashed instead (it runs in a child process, so a
    crash does not end Python's), `crashed` is True, the message starts
    with how it ended ("the compiler crashed (signal 11, Segmentation
    fault)") and goes on with its output so far (LLVM's stack dump),
    `diagnostics` holds that output, `signal` the signal's number (None
    when it called exit(), as llvm::report_fatal_error does) and
    `exit_code` the negative signal number (subprocess's convention) or
    the exit status; `output` is what it printed on stdout."""

    def __init__(self, message, diagnostics="", exit_code=1, command=(),
                 signal=None, crashed=False, output=""):
        super().__init__(message)
        self.diagnostics = diagnostics
        self.exit_code = exit_code
        self.command = list(command)
        self.signal = signal
        self.crashed = crashed
        self.output = output


class RunError(Error):
    """The runtime failed (loading, running or training an artifact).
    `status` is the C API's status name, e.g. "LOOMRT_ERROR_FORMAT"."""

    def __init__(self, message, status="LOOMRT_ERROR_IO"):
        super().__init__(message)
        self.status = status


class PassError(Error):
    """loom.passes.run could not parse the IR or the pipeline, or a pass
    failed; the message holds the diagnostics with their locations.

    When a pass crashed instead (pipelines on IR text run in a child
    process), `crashed` is True, the message says how it ended ("the pass
    pipeline '...' crashed (signal 6, Aborted)") followed by the output so
    far, and `signal` is the signal's number (None when it called
    exit())."""

    def __init__(self, message, signal=None, crashed=False):
        super().__init__(message)
        self.signal = signal
        self.crashed = crashed
