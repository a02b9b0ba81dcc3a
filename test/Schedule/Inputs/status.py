"""Runs a command, copies its stderr and then its stdout to stdout, and
prints its exit status last ("exit status: N"), for FileCheck."""
import subprocess
import sys

result = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(result.stderr)
sys.stdout.write(result.stdout)
print("exit status: %d" % result.returncode)
