#!/usr/bin/env python3
"""Writes the node tests of the installed `onnx` Python package to disk, in
the layout of ONNX's backend test data (and of Debian's libonnx-testdata):

  OUT/node/<test name>/model.onnx
  OUT/node/<test name>/test_data_set_<i>/input_<k>.pb, output_<k>.pb

so that utils/onnx_conformance.py runs them as it runs libonnx-testdata
(`--data OUT`). The onnx package builds every node test in memory
(`onnx.backend.test.case.node.collect_testcases()`: 1,884 for onnx 1.23);
its own `backend-test-tools generate-data` writes only the model tests.
Tensors are written as TensorProto; sequences and optionals (which Loom does
not import) as SequenceProto / OptionalProto, as ONNX's data does.
Prints the number of tests written and the onnx version.
"""
import argparse
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases


def value_proto(value, name):
    if hasattr(value, "SerializeToString"):  # already a protobuf value
        return value
    if isinstance(value, list):
        return numpy_helper.from_list(value, name)
    if value is None or isinstance(value, dict):
        return numpy_helper.from_optional(value, name)
    return numpy_helper.from_array(np.asarray(value), name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output folder (node/ is created in it)")
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own numpy warnings
        cases = collect_testcases()
    written = 0
    for case in cases:
        if case.kind != "node" or case.model is None:
            continue
        d = os.path.join(args.out, "node", case.name)
        os.makedirs(d, exist_ok=True)
        onnx.save(case.model, os.path.join(d, "model.onnx"))
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets or []):
            ds = os.path.join(d, "test_data_set_%d" % i)
            os.makedirs(ds, exist_ok=True)
            for kind, values, decls in (("input", inputs, graph.input),
                                        ("output", outputs, graph.output)):
                for k, v in enumerate(values):
                    name = decls[k].name if k < len(decls) else ""
                    with open(os.path.join(ds, "%s_%d.pb" % (kind, k)),
                              "wb") as f:
                        f.write(value_proto(v, name).SerializeToString())
        written += 1
    print("wrote %d node tests of onnx %s to %s" %
          (written, onnx.__version__, args.out))
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
