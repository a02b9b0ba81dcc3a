#!/usr/bin/env python3
"""Prints the summary of a lit run from its JSON results (lit -o FILE):
how many tests passed, failed, were unsupported, ..., and for each
unsupported test why (the features it requires that this machine lacks).

CTest shows lit's own output only when the suite fails; scripts/test.sh
prints this after every run, so that a test that silently stopped running
(its oracle uninstalled, say) shows up in a green run too.

Usage: lit_summary.py RESULTS.json
"""
import collections
import json
import re
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        with open(sys.argv[1]) as f:
            tests = json.load(f)["tests"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit("lit_summary: cannot read %s: %s" % (sys.argv[1], e))
    codes = collections.Counter(t["code"] for t in tests)
    print("lit: %d tests: %s" % (len(tests), ", ".join(
        "%d %s" % (n, code.lower()) for code, n in sorted(codes.items()))))
    why = collections.defaultdict(list)
    for t in tests:
        if t["code"] != "UNSUPPORTED":
            continue
        m = re.search(r"unavailable features: (.*)", t["output"])
        reason = ("requires " + m.group(1).strip()) if m else \
            (t["output"].strip().splitlines() or ["no reason given"])[0]
        why[reason].append(t["name"])
    for reason, names in sorted(why.items()):
        print("  unsupported (%s): %d: %s" % (reason, len(names),
                                              ", ".join(sorted(names))))


if __name__ == "__main__":
    main()
