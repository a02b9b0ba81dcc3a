"""Artifact.train on a token stream (loom-run --tokens): a flat file of
token ids, read window by window; the windows a step read (data_trace) give
the step's loss through `forward`, computed from the file by numpy."""

import json

import numpy as np
import pytest

import loom

T, B, V = 8, 4, 16

# A bigram model: embedding, then a matmul to the vocabulary.
BIGRAM = {
    "format": "loom-graph", "version": 1, "seed": 0,
    "inputs": [{"name": "ids", "shape": [B, T], "dtype": "i64"}],
    "parameters": [
        {"name": "emb", "shape": [V, 8], "dtype": "f32",
         "init": {"normal": {"std": 0.5}}},
        {"name": "out", "shape": [8, V], "dtype": "f32",
         "init": {"normal": {"std": 0.5}}}],
    "nodes": [
        {"id": "e", "op": "gather", "inputs": ["emb", "ids"],
         "attrs": {"axis": 0}},
        {"id": "logits", "op": "matmul", "inputs": ["e", "out"]}],
    "outputs": ["logits"],
}


@pytest.fixture
def bigram(tmp_path):
    path = tmp_path / "bigram.json"
    path.write_text(json.dumps(BIGRAM))
    return loom.compile(str(path), loss="cross_entropy", optimizer="sgd",
                        lr=0.1)


def test_training_from_a_token_file_reads_the_traced_windows(bigram,
                                                             tmp_path):
    tokens = np.random.default_rng(0).integers(0, V, 1001)
    path = tmp_path / "tokens.bin"
    tokens.astype("<u2").tofile(path)
    before = bigram.parameters()
    trace = tmp_path / "trace.jsonl"
    metrics = bigram.train(str(path), steps=3, tokens="uint16",
                           data_trace=str(trace), progress=False)
    assert [m["step"] for m in metrics] == [1, 2, 3]
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [(r["step"], r["micro"], r["rank"]) for r in rows] == \
        [(1, 0, 0), (2, 0, 0), (3, 0, 0)]
    # Windows of T + 1 tokens from s * T: ids the first T, labels the last.
    samples = rows[0]["samples"]
    assert len(samples) == B and max(samples) < (len(tokens) - 1) // T
    ids = np.stack([tokens[s * T: s * T + T] for s in samples])
    labels = np.stack([tokens[s * T + 1: s * T + T + 1] for s in samples])
    # The artifact as compiled (step 1's parameters) on those windows.
    fresh = loom.Artifact(bigram.path)
    for name, value in fresh.parameters().items():
        assert np.array_equal(value, before[name]), name
    loss = fresh.run("forward", ids=ids.astype(np.int64),
                     labels=labels.astype(np.int64))["loss"]
    assert metrics[0]["loss"] == pytest.approx(float(loss), rel=1e-6)


def test_tokens_need_a_file(bigram):
    with pytest.raises(TypeError, match="tokens='uint16' needs data as the "
                                        "path of a token file"):
        bigram.train({"ids": np.zeros((8, T), np.int64)}, steps=1,
                     tokens="uint16", progress=False)


def test_a_truncated_token_file_is_refused_by_name(bigram, tmp_path):
    path = tmp_path / "odd.bin"
    path.write_bytes(b"\x01\x00\x02")
    with pytest.raises(loom.RunError, match="odd.bin: 3 bytes is not a "
                                            "whole, non-zero number of "
                                            "uint16 tokens"):
        bigram.train(str(path), steps=1, tokens="uint16", progress=False)
