"""The examples in examples/python run and reach their targets. They need
optional packages (scikit-learn for the digits, PyTorch for the module) and
are skipped where those are missing."""

import os
import subprocess
import sys

import numpy as np
import pytest

import loom
from conftest import REPO


def python_with(module):
    """A Python that has `module` and can import loom's dependencies: this
    one, or the set-up's .venv ($LOOM_VENV, default REPO/.venv)."""
    venv = os.environ.get("LOOM_VENV", os.path.join(REPO, ".venv"))
    for python in (sys.executable, os.path.join(venv, "bin", "python")):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import numpy, %s" % module],
                capture_output=True).returncode == 0:
            return python
    pytest.skip("no Python with %s (an optional dependency)" % module)


def run_example(python, name):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(loom.__path__[0]))
    return subprocess.run([python, os.path.join(REPO, "examples", "python",
                                                name)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_train_digits_example_reaches_97_percent():
    result = run_example(python_with("sklearn"), "train_digits.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "held-out accuracy 0.9" in result.stdout


def test_torch_module_example_matches_pytorch():
    result = run_example(python_with("torch"), "torch_module.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "largest weight difference" in result.stdout


def test_compile_a_torch_module(tmp_path):
    torch = pytest.importorskip("torch")
    module = torch.nn.Sequential(torch.nn.Linear(8, 4))
    art = loom.compile(module, tmp_path / "t.loom", train=False,
                       example_inputs=torch.zeros(2, 8))
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(art.predict(x)["logits"], expected, rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match="needs example_inputs"):
        loom.compile(module)
