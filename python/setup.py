"""Packages the loom Python package with its native module, which the
project's CMake build makes (build/python/loom/_loom*.so, with its private
libloom-protobuf.so): pip does not build Loom itself. The module needs
Debian's LLVM 22 libraries (libMLIR.so, libLLVM.so) at run time. From the source tree (pip install ./python) the module is
taken from $LOOM_BUILD_DIR/python/loom (default: ../build); from the build
tree (pip install build/python) it is already beside the sources."""

import glob
import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def native_files():
    """The built loom/_loom*.so and the private libprotobuf beside it
    (python/CMakeLists.txt), or exit with what to do."""
    candidates = [os.path.join(HERE, "loom")]
    build = os.environ.get("LOOM_BUILD_DIR",
                           os.path.join(os.path.dirname(HERE), "build"))
    candidates.append(os.path.join(os.path.abspath(build), "python", "loom"))
    for folder in candidates:
        found = glob.glob(os.path.join(folder, "_loom*.so"))
        if found:
            return found + glob.glob(os.path.join(folder, "libloom-*.so"))
    sys.exit("loom: the native module (_loom*.so) is not built: run "
             "`bash scripts/build.sh` first, or set LOOM_BUILD_DIR to the "
             "build directory (looked in %s)" % ", ".join(candidates))


class BuildPyWithNativeModule(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "loom")
        os.makedirs(target, exist_ok=True)
        for path in native_files():
            shutil.copy2(path, target)


class BinaryDistribution(Distribution):
    """A wheel for this platform and Python: it holds a native module."""

    def has_ext_modules(self):
        return True


setup(packages=["loom"], cmdclass={"build_py": BuildPyWithNativeModule},
      distclass=BinaryDistribution)
