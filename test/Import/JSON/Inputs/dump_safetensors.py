"""Prints every tensor of a safetensors file, one line each:
`name dtype [shape] v0 v1 ...` (at most 8 values, `%g`), for FileCheck."""
import json
import struct
import sys

import numpy as np

blob = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8 : 8 + n])
data = blob[8 + n :]
for name, entry in header.items():
    if name == "__metadata__":
        continue
    start, end = entry["data_offsets"]
    raw = data[start:end]
    dtype = entry["dtype"]
    if dtype == "BF16":
        values = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        values = np.frombuffer(raw, {"F64": "<f8", "F32": "<f4", "F16": "<f2",
                                     "I64": "<i8", "I32": "<i4"}[dtype])
    print(name, dtype, list(entry["shape"]),
          " ".join("%g" % float(v) for v in values[:8]))
