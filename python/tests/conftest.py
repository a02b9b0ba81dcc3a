"""Shared fixtures of the loom package's tests: the repository's example
models and a small learnable data set for the digits MLP's shapes."""

import os

import numpy as np
import pytest

import loom

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(REPO, "examples", "onnx", "digits_mlp.onnx")
MLP_ONNX = os.path.join(REPO, "examples", "onnx", "mlp.onnx")
MLP_JSON = os.path.join(REPO, "examples", "json", "mlp.json")


def separable_data(samples, seed=0):
    """x [N, 64] in [0, 1), labels [N] = argmax(x @ W) for a fixed random W:
    10 classes a 64-128-10 MLP learns quickly."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(1234).standard_normal((64, 10)).astype(np.float32)
    x = rng.random((samples, 64), dtype=np.float32)
    labels = np.argmax((x - 0.5) @ w, axis=1).astype(np.int64)
    return {"x": x, "labels": labels}


def mlp_forward(params, x):
    """digits_mlp.onnx in numpy: Gemm(transB) + Relu + Gemm(transB)."""
    h = np.maximum(x @ params["fc1.weight"].T + params["fc1.bias"], 0)
    return h @ params["fc2.weight"].T + params["fc2.bias"]


@pytest.fixture
def digits():
    """A fresh training artifact of the digits MLP (AdamW, lr 1e-2)."""
    return loom.compile(DIGITS, loss="cross_entropy", optimizer="adamw",
                        lr=1e-2)


@pytest.fixture(scope="session")
def data():
    return separable_data(640, seed=0)


@pytest.fixture(scope="session")
def held_out():
    return separable_data(320, seed=1)


# Under scripts/test.sh (LOOM_REQUIRE_ORACLES=1) a skipped test is a failure:
# a skip here means an oracle or an optional package is missing (PyTorch,
# scikit-learn, onnx, tqdm), and the test it guards would not run.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("LOOM_REQUIRE_ORACLES") == "1" \
            and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) \
            else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = ("skipped, but LOOM_REQUIRE_ORACLES=1 (scripts/"
                           "test.sh) requires every oracle: " + reason)
