#!/usr/bin/env python3
"""Writes the charlm demo's character-level data set as .npz files for loom-run.

Source: the license texts every Debian machine has, /usr/share/common-licenses
(nothing is downloaded). Regular files only, in sorted name order; symbolic
links (GPL -> GPL-3, ...) and files whose bytes equal an earlier file's are
skipped, so the same machine always gives the same files. The texts are
joined with a blank line between files.

Characters become ids through the vocabulary fixed when the model was
exported (examples/charlm/vocab.json: "\\n", printable ASCII, and an unknown
id that every other character, such as a tab or a form feed, maps to).

Held out: whole files (default Apache-2.0 and CC0-1.0, texts that no other
file repeats), so the eval loss measures text the model has not seen; if
none of them exists, the last 10% of the joined text is held out instead.

Usage:
  python3 examples/charlm/make_data.py [--out-dir DIR] [--stride 16]
      [--licenses /usr/share/common-licenses] [--eval-files Apache-2.0,CC0-1.0]
  python3 examples/charlm/make_data.py --list train|eval
      (the files alone, for loom-tokens: what examples/charlm/demo_charlm.sh
      does, training from token streams instead of .npz windows)

Needs numpy only. Writes DIR/train.npz and DIR/eval.npz, each with
  input_ids  int64 [N, T]  windows of T characters of the text
  labels     int64 [N, T]  the next character of each position
(T = the model's context, from vocab.json). Training windows start every
`--stride` characters (they overlap); eval windows do not overlap.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))


def load_vocab(path):
    with open(path) as f:
        vocab = json.load(f)
    chars = vocab["chars"]
    unknown = int(vocab["unknown_id"])
    table = {c: i for i, c in enumerate(chars) if i != unknown}
    return vocab, table, unknown


def read_texts(directory):
    """[(name, text)] of the distinct regular files in `directory`, by name."""
    out, seen = [], {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            print("make_data: skipping %s (same bytes as %s)"
                  % (name, seen[digest]), file=sys.stderr)
            continue
        seen[digest] = name
        out.append((name, data.decode("utf-8", errors="replace")))
    return out


def encode(text, table, unknown):
    return np.array([table.get(c, unknown) for c in text], dtype=np.int64)


def windows(ids, context, stride):
    """input_ids, labels: windows of `context` ids starting every `stride`."""
    starts = np.arange(0, len(ids) - context, stride)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    w = ids[idx]
    return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(REPO_ROOT, "out", "charlm"))
    ap.add_argument("--licenses", default="/usr/share/common-licenses")
    ap.add_argument("--vocab", default=os.path.join(HERE, "vocab.json"))
    ap.add_argument("--eval-files", default="Apache-2.0,CC0-1.0",
                    help="comma-separated file names held out for evaluation")
    ap.add_argument("--stride", type=int, default=16,
                    help="characters between the starts of training windows")
    ap.add_argument("--list", choices=["train", "eval"],
                    help="print the paths of the training or held-out files, "
                    "one per line, and write nothing (for loom-tokens)")
    args = ap.parse_args(argv)
    if args.list:
        names = [n for n, _ in read_texts(args.licenses)]
        held = set(filter(None, args.eval_files.split(",")))
        if not held & set(names):
            sys.exit("make_data: none of the held-out files %s is in %s"
                     % (sorted(held), args.licenses))
        for n in names:
            if (n in held) == (args.list == "eval"):
                print(os.path.join(args.licenses, n))
        return 0

    vocab, table, unknown = load_vocab(args.vocab)
    context = int(vocab["context"])
    texts = read_texts(args.licenses)
    if not texts:
        sys.exit("make_data: no text files in %s" % args.licenses)
    eval_names = set(filter(None, args.eval_files.split(",")))
    train_part = [t for n, t in texts if n not in eval_names]
    eval_part = [t for n, t in texts if n in eval_names]
    if eval_part and train_part:
        train_text, eval_text = "\n\n".join(train_part), "\n\n".join(eval_part)
        held = "files " + ", ".join(n for n, _ in texts if n in eval_names)
    else:
        joined = "\n\n".join(t for _, t in texts)
        cut = int(len(joined) * 0.9)
        train_text, eval_text = joined[:cut], joined[cut:]
        held = "the last 10% of the text"

    os.makedirs(args.out_dir, exist_ok=True)
    for name, text, stride in (("train", train_text, args.stride),
                               ("eval", eval_text, context)):
        ids = encode(text, table, unknown)
        x, y = windows(ids, context, stride)
        path = os.path.join(args.out_dir, name + ".npz")
        np.savez(path, input_ids=x, labels=y)
        print("make_data: wrote %s: %d characters (%d unknown), input_ids and "
              "labels int64 %s" % (path, len(ids), int((ids == unknown).sum()),
                                   list(x.shape)))
    print("make_data: %d files from %s; held out: %s"
          % (len(texts), args.licenses, held))
    return 0


if __name__ == "__main__":
    sys.exit(main())
