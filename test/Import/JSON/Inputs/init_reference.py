"""Checks the parameters a JSON import wrote against an independent
implementation of the random initializers documented in docs/json-format.md.

usage: init_reference.py GRAPH.json PARAMS.safetensors

Every parameter of the graph with a "zeros", "ones", "constant", "normal" or
"uniform" init must be in the safetensors file, bit for bit as the documented
algorithm gives it (f32 and f64 compared exactly, f16 through numpy's
round-to-nearest-even conversion, bf16 by its own rounding). Prints one line
per parameter with its first values and exits non-zero on the first mismatch.
"""
import json
import math
import struct
import sys

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def finalize(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & MASK
    return h


class SplitMix64:
    def __init__(self, seed, name):
        self.state = fnv1a64(name.encode()) ^ finalize((seed + GOLDEN) & MASK)

    def uniform(self):
        self.state = (self.state + GOLDEN) & MASK
        return (finalize(self.state) >> 11) * 2.0**-53


def det_log(x):
    m, e = math.frexp(x)
    if m < 0.70710678118654752440:
        m *= 2.0
        e -= 1
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    poly = 1.0 / 25.0
    for k in range(11, -1, -1):
        poly = poly * s2 + 1.0 / float(2 * k + 1)
    return float(e) * 0.69314718055994530942 + 2.0 * s * poly


def det_sincos_2pi(u):
    t = u * 4.0
    q = int(t)
    f = t - float(q)
    if f >= 0.5:
        f -= 1.0
        q += 1
    q &= 3
    x = f * 1.57079632679489661923
    x2 = x * x
    sp = cp = 0.0
    for k in range(8, -1, -1):
        sc = cc = 1.0
        for i in range(2, 2 * k + 2):
            sc /= float(i)
        for i in range(2, 2 * k + 1):
            cc /= float(i)
        if k % 2:
            sc, cc = -sc, -cc
        sp = sp * x2 + sc
        cp = cp * x2 + cc
    sx, cx = x * sp, cp
    return [(sx, cx), (cx, -sx), (-sx, -cx), (-cx, sx)][q]


def draw(seed, name, init, count):
    if init == "zeros":
        return [0.0] * count
    if init == "ones":
        return [1.0] * count
    kind, body = next(iter(init.items()))
    if kind == "constant":
        return [float(body)] * count
    rng = SplitMix64(seed, name)
    if kind == "uniform":
        low, high = float(body["low"]), float(body["high"])
        return [low + (high - low) * rng.uniform() for _ in range(count)]
    assert kind == "normal", kind
    mean, std = float(body.get("mean", 0.0)), float(body["std"])
    out = []
    while len(out) < count:
        u1 = 1.0 - rng.uniform()
        u2 = rng.uniform()
        r = math.sqrt(-2.0 * det_log(u1))
        s, c = det_sincos_2pi(u2)
        out.append(mean + std * (r * c))
        out.append(mean + std * (r * s))
        # Accuracy of the fixed polynomials against libm, while we are here.
        assert abs(det_log(u1) - math.log(u1)) <= 4e-16 * max(1.0, abs(math.log(u1)))
        assert abs(c - math.cos(2 * math.pi * u2)) < 1e-15
        assert abs(s - math.sin(2 * math.pi * u2)) < 1e-15
    return out[:count]


def to_bytes(values, dtype):
    v = np.array(values, dtype=np.float64)
    if dtype == "f64":
        return v.astype("<f8").tobytes()
    if dtype == "f32":
        return v.astype("<f4").tobytes()
    if dtype == "f16":
        return v.astype("<f2").tobytes()
    assert dtype == "bf16", dtype
    out = bytearray()
    for x in values:
        # bf16 keeps 8 significant bits: round the exact double mantissa to 8
        # bits, ties to even (Python's round() on a float does exactly that).
        # Normal numbers only, which is all the tests draw.
        m, e = math.frexp(x)
        r = math.ldexp(round(m * 256.0), e - 8)
        f32 = struct.unpack("<I", struct.pack("<f", r))[0]
        assert f32 & 0xFFFF == 0
        out += struct.pack("<H", f32 >> 16)
    return bytes(out)


def to_float(raw, dtype):
    if dtype == "bf16":
        bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    return np.frombuffer(raw, {"f64": "<f8", "f32": "<f4", "f16": "<f2"}[dtype])


def main():
    graph = json.load(open(sys.argv[1]))
    blob = open(sys.argv[2], "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    seed = graph.get("seed", 0)
    for p in graph.get("parameters", []):
        init = p["init"]
        if isinstance(init, dict) and "file" in init:
            continue
        count = 1
        for d in p["shape"]:
            count *= d
        want = to_bytes(draw(seed, p["name"], init, count), p["dtype"])
        entry = header[p["name"]]
        start, end = entry["data_offsets"]
        got = data[start:end]
        if got != want:
            print("MISMATCH %s" % p["name"])
            return 1
        # The first values, so that a test can pin them as golden numbers.
        first = [float(x) for x in to_float(got, p["dtype"])[:3]]
        print("OK %s %s %d [%s]" % (p["name"], p["dtype"], count,
                                    ", ".join("%.6g" % x for x in first)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
