"""The exceptions the loom package raises (besides TypeError, ValueError and
FileNotFoundError for bad arguments)."""


class Error(Exception):
    """Base class of Loom's own errors."""


class CompileError(Error):
    """The compiler refused the model or failed: `diagnostics` holds Loom's
    messages (they name the ONNX node or JSON node at fault), `exit_code`
    loomc's exit status, `command` the loomc command line that failed."""

    def __init__(self, message, diagnostics="", exit_code=1, command=()):
        super().__init__(message)
        self.diagnostics = diagnostics
        self.exit_code = exit_code
        self.command = list(command)


class RunError(Error):
    """The runtime failed (loading, running or training an artifact).
    `status` is the C API's status name, e.g. "LOOMRT_ERROR_FORMAT"."""

    def __init__(self, message, status="LOOMRT_ERROR_IO"):
        super().__init__(message)
        self.status = status


class PassError(Error):
    """loom.passes.run could not parse the IR or the pipeline, or a pass
    failed; the message holds the diagnostics with their locations."""
