# Lit configuration of Loom's regression tests.
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "LOOM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".json", ".onnx", ".test"]
config.excludes = ["Inputs", "zoo", "train_vs_jax.py", "CMakeLists.txt", "README.md", "lit.cfg.py",
                   "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")

config.substitutions.append(("%loom_src_root", config.loom_src_root))
config.substitutions.append(("%loom_lib_dir", config.loom_lib_dir))
config.substitutions.append(("%loom_tools_dir", config.loom_tools_dir))
config.substitutions.append(("%loom_obj_root", config.loom_obj_root))
# Debian's python has the onnx package the model scripts need.
config.substitutions.append(("%python", "/usr/bin/python3"))
# The host GPU emulator and the runtime's fake CUDA driver: CUDA artifacts
# run on machines without a GPU (test/lib/GpuEmulator).
config.substitutions.append(
    ("%loom_gpu_emu", os.path.join(config.loom_lib_dir, "libloom_gpu_emu.so")))
config.substitutions.append(
    ("%fakecuda", os.path.join(config.loom_obj_root, "runtime", "tests",
                               "libfakecuda.so")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.loom_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["loom-opt", "loomc", "loomc-emu", "loom-interp", "loomrt-inspect", "loom-tokens"], [config.loom_tools_dir])

# GPU tests run only where a CUDA device answers.
def _has_cuda_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True,
                              timeout=20).returncode == 0
    except Exception:
        return False

def _cuda_sm():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap",
                              "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.split()
        major, minor = out[0].split(".")
        return major + minor
    except Exception:
        return "90"

if _has_cuda_gpu():
    config.available_features.add("cuda-gpu")
    config.substitutions.append(("%cuda_sm", _cuda_sm()))
# The CUDA toolkit (its assembler, and libdevice for the kernels' math):
# loomc --target=cuda writes PTX and cubins with it.
_cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if ((os.access(os.path.join(_cuda_home, "bin", "ptxas"), os.X_OK)
        or shutil.which("ptxas"))
        and os.path.exists(os.path.join(_cuda_home, "nvvm", "libdevice",
                                        "libdevice.10.bc"))):
    config.available_features.add("ptxas")
# JAX, the independent framework of the numerical tests (scripts/setup.sh).
_venv_python = os.environ.get("LOOM_VENV", os.path.join(config.loom_src_root, ".venv"))
_venv_python = os.path.join(_venv_python, "bin", "python")
if os.path.exists(_venv_python) and subprocess.run(
        [_venv_python, "-c", "import jax, onnx"], capture_output=True).returncode == 0:
    config.available_features.add("jax")
config.substitutions.append(("%jaxpython", _venv_python))
# The node tests of the current onnx Python package (1,884 for onnx 1.23),
# written to disk by utils/gen_onnx_node_tests.py.
if os.path.exists(_venv_python) and subprocess.run(
        [_venv_python, "-c",
         "import onnx.backend.test.case.node as n; n.collect_testcases"],
        capture_output=True).returncode == 0:
    config.available_features.add("onnx-node-tests")
if os.path.exists(_venv_python) and subprocess.run(
        [_venv_python, "-c", "import onnxruntime"],
        capture_output=True).returncode == 0:
    config.available_features.add("onnxruntime")
# PyTorch with torchvision, transformers and onnxscript: the zoo exported and
# trained afresh (test/e2e/zoo-live.test).
if os.path.exists(_venv_python) and subprocess.run(
        [_venv_python, "-c", "import torch, torchvision, transformers, onnxscript"],
        capture_output=True).returncode == 0:
    config.available_features.add("torch")

if os.path.isdir("/usr/share/libonnx-testdata/data/node"):
    config.available_features.add("onnx-testdata")

# Open MPI (scripts/setup.sh): loom-run's data parallelism under mpirun.
# `%mpirun N` runs N ranks, oversubscribing these 2-core machines; MPI
# refuses root unless told, and CI runs as root.
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.substitutions.append(("%mpirun", "mpirun --oversubscribe -np"))

# The oracles and tools the tests compare against or run with. Under
# scripts/test.sh (LOOM_REQUIRE_ORACLES=1, its default; CI) a missing one is
# an error rather than tests quietly reported as unsupported; only a GPU
# (cuda-gpu) may be absent. `scripts/test.sh --allow-missing-oracles` is the
# opt-out for a quick local run.
_ORACLES = {
    "jax": "JAX in %s (scripts/setup.sh)" % _venv_python,
    "onnxruntime": "onnxruntime in %s (scripts/setup.sh)" % _venv_python,
    "onnx-node-tests": "onnx 1.23's node tests in %s (scripts/setup.sh)" % _venv_python,
    "torch": "PyTorch, torchvision, transformers and onnxscript in %s "
             "(scripts/setup.sh)" % _venv_python,
    "onnx-testdata": "Debian's libonnx-testdata (/usr/share/libonnx-testdata)",
    "mpi": "Open MPI's mpirun (Debian's openmpi-bin)",
    "ptxas": "the CUDA toolkit's ptxas and libdevice (%s)" % _cuda_home,
}
if os.environ.get("LOOM_REQUIRE_ORACLES") == "1":
    _missing = [why for f, why in sorted(_ORACLES.items())
                if f not in config.available_features]
    if _missing:
        lit_config.fatal(
            "LOOM_REQUIRE_ORACLES=1 and these are missing, so the tests that "
            "need them would not run: " + "; ".join(_missing) +
            ". Install them (scripts/setup.sh), or run scripts/test.sh "
            "--allow-missing-oracles for a quick local run without them.")
