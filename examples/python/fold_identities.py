"""A pass written in Python: x * 1, 1 * x, x + 0, 0 + x and x - 0 become x.

Exporters leave such ops behind (a scale of 1.0, a zero bias); each one is
a kernel's worth of memory traffic in the forward and again in the
backward. The pass walks the module (loom.passes.parse), finds the loom
ops whose other operand is a `loom.constant` splat of the identity, gives
their users the first operand instead and erases them; loom.passes.run
chains it with Loom's own passes:

    PYTHONPATH=build/python python3 examples/python/fold_identities.py MODEL.onnx

prints how many ops it folded and runs loom-training on the result.
docs/python.md ("Passes in Python") describes the API.
"""

import re
import sys

import loom

# A splat's printed attribute: dense<1.000000e+00> (or dense<0.0...>).
_SPLAT = re.compile(r"^dense<([-+0-9.eE]+)>")

# op name -> (identity value, which operand may be the constant)
_IDENTITIES = {
    "loom.mul": (1.0, (0, 1)),
    "loom.add": (0.0, (0, 1)),
    "loom.sub": (0.0, (1,)),
}


def splat_value(value):
    """The number a loom.constant splat `value` holds, or None."""
    op = value.owner
    if op is None or op.name != "loom.constant":
        return None
    m = _SPLAT.match(op.attributes.get("value", ""))
    return float(m.group(1)) if m else None


def fold_identities(module):
    """Rewrites `module` in place; returns the number of ops folded."""
    folded = 0
    for op in module.walk():
        rule = _IDENTITIES.get(op.name)
        if rule is None:
            continue
        identity, positions = rule
        lhs, rhs = op.operands
        result = op.results[0]
        for pos in positions:
            const, other = (lhs, rhs) if pos == 0 else (rhs, lhs)
            # Same type: a broadcasting op would change the shape.
            if splat_value(const) == identity and other.type == result.type:
                result.replace_all_uses_with(other)
                op.erase()
                folded += 1
                break
    return folded


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0])
        print("usage: fold_identities.py MODEL.onnx|MODEL.json")
        return 2
    module = loom.passes.parse(loom.ir(argv[1]))
    count = fold_identities(module)
    loom.passes.run(module, ["canonicalize",
                             "loom-training{loss=cross_entropy optimizer=sgd}"])
    print("folded %d identity ops; the training step has %d ops"
          % (count, len(module.walk())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
