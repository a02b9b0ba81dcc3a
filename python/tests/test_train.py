"""Artifact.train and the training state: loss goes down, runs continue
bitwise, callbacks, checkpoints, parameters, ONNX export, the GIL."""

import _thread
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import loom
from conftest import mlp_forward


def test_training_lowers_the_loss_and_changes_the_parameters(digits, data,
                                                             held_out):
    before = digits.parameters()
    metrics = digits.train(data, steps=200, progress=False)
    assert len(metrics) == 200
    assert [m["step"] for m in metrics] == list(range(1, 201))
    assert {"step", "loss", "samples_per_sec", "epoch"} <= set(metrics[0])
    losses = [m["loss"] for m in metrics]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    after = digits.parameters()
    for name in before:
        assert not np.array_equal(before[name], after[name]), name
    assert digits.step == 200
    # The trained model predicts held-out data better than chance (10%).
    result = digits.evaluate(held_out)
    assert result["samples"] == 320
    assert result["accuracy"] > 0.4
    assert result["loss"] < losses[0]
    # predict runs with the trained parameters.
    x = held_out["x"][:32]
    np.testing.assert_allclose(digits.run(x=x)["logits"],
                               mlp_forward(after, x), rtol=1e-4, atol=1e-4)


def test_evaluation_during_training(digits, data, held_out, tmp_path):
    metrics = digits.train(data, steps=40, eval_data=held_out, eval_every=20,
                           metrics_file=tmp_path / "m.jsonl", progress=False)
    evals = [m for m in metrics if "eval_accuracy" in m]
    assert [m["step"] for m in evals] == [20, 40]
    assert {"eval_loss", "eval_samples"} <= set(evals[0])
    assert len(metrics) == 42
    lines = [json.loads(l) for l in (tmp_path / "m.jsonl").read_text().split("\n")
             if l]
    assert lines == metrics


def test_several_calls_train_exactly_like_one(tmp_path, data):
    one = loom.compile(data_model(), tmp_path / "one.loom", loss="cross_entropy",
                       optimizer="adamw", lr=1e-2)
    two = loom.Artifact(tmp_path / "one.loom")
    one.train(data, steps=30, seed=5, progress=False)
    two.train(data, steps=12, seed=5, progress=False)
    two.train(data, steps=18, progress=False)
    assert two.step == 30
    for name, value in one.state().items():
        np.testing.assert_array_equal(value, two.state()[name], err_msg=name)
    # A different seed shuffles differently.
    three = loom.Artifact(tmp_path / "one.loom")
    three.train(data, steps=30, seed=6, progress=False)
    assert not np.array_equal(three.parameters()["fc1.weight"],
                              one.parameters()["fc1.weight"])


def loom_run_binary():
    """build/bin/loom-run beside the build tree's package, or skip."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(loom.__file__)))
    path = os.environ.get("LOOM_RUN",
                          os.path.join(os.path.dirname(here), "bin",
                                       "loom-run"))
    if not os.path.exists(path):
        pytest.skip("no loom-run binary (the package is not the build "
                    "tree's; set LOOM_RUN)")
    return path


def read_safetensors(path):
    """{name: array} of a safetensors file (8-byte header size, JSON
    header, raw little-endian data)."""
    with open(path, "rb") as f:
        raw = f.read()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + size + begin:8 + size + end],
                                  kinds[t["dtype"]]).reshape(t["shape"])
    return out


def test_python_trains_exactly_like_loom_run(tmp_path, data):
    # The same artifact, data and seed: loom-run from an .npz file and
    # Python from arrays in memory take the same steps, bit for bit.
    art = loom.compile(data_model(), tmp_path / "a.loom", loss="cross_entropy",
                       optimizer="adamw", lr=1e-2)
    np.savez(tmp_path / "data.npz", **data)
    subprocess.run([loom_run_binary(), str(tmp_path / "a.loom"), "--train",
                    "--data", str(tmp_path / "data.npz"), "--steps", "40",
                    "--seed", "3", "--progress=none",
                    "--metrics", str(tmp_path / "run.jsonl"),
                    "--save-params", str(tmp_path / "run.safetensors")],
                   check=True)
    metrics = art.train(data, steps=25, seed=3, progress=False)
    metrics += art.train(data, steps=15, progress=False)
    expected = read_safetensors(tmp_path / "run.safetensors")
    assert sorted(expected) == sorted(art.parameters())
    for name, value in art.parameters().items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)
    run = [json.loads(l) for l in
           (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [m["loss"] for m in metrics] == [m["loss"] for m in run]


def data_model():
    from conftest import DIGITS
    return DIGITS


def test_an_iterable_of_batches_trains_one_step_per_batch(tmp_path, data,
                                                          held_out):
    one = {"x": data["x"][:32], "labels": data["labels"][:32]}
    # The same single batch 30 times, against a data set of that batch:
    # the same steps (the loader only permutes rows inside the batch).
    by_batch = loom.compile(data_model(), tmp_path / "b.loom",
                            loss="cross_entropy", optimizer="sgd", lr=0.1)
    by_set = loom.Artifact(tmp_path / "b.loom")
    metrics = by_batch.train((one for _ in range(1000)), steps=30,
                             eval_data=held_out, eval_every=10, progress=False,
                             metrics_file=tmp_path / "m.jsonl")
    by_set.train(one, steps=30, progress=False)
    assert by_batch.step == 30
    for name, value in by_set.parameters().items():
        np.testing.assert_allclose(by_batch.parameters()[name], value,
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    assert [m["step"] for m in metrics if "eval_loss" in m] == [10, 20, 30]
    assert len(metrics) == 33
    written = [json.loads(l) for l in
               (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [m["step"] for m in written] == [m["step"] for m in metrics]
    # An iterator that ends early ends training.
    by_batch.train(iter([one, one]), steps=5, progress=False)
    assert by_batch.step == 32
    with pytest.raises(ValueError, match="has 16 rows, the compiled batch "
                                         "size is 32"):
        by_batch.train([{"x": data["x"][:16], "labels": data["labels"][:16]}],
                       steps=1)
    with pytest.raises(ValueError, match="checkpoints"):
        by_batch.train([one], steps=1, checkpoint_dir=tmp_path / "c")


def test_gradient_accumulation(digits, data):
    # Two micro-batches per step through forward_backward + apply_optimizer.
    metrics = digits.train(data, steps=6, accumulate=2, progress=False)
    assert [m["step"] for m in metrics] == list(range(1, 7))
    assert digits.step == 6
    # Six steps of 2 x 32 samples: 384 samples in all, epoch 0 of 640.
    assert metrics[-1]["epoch"] == 0
    with pytest.raises(ValueError, match="batch_size 16 does not match the "
                                         "compiled batch size 32"):
        digits.train(data, steps=1, batch_size=16, progress=False)


def test_the_callback_sees_each_step_and_can_stop(digits, data):
    seen = []

    def callback(m):
        seen.append(m)
        return False if m["step"] == 7 else None

    metrics = digits.train(data, steps=50, callback=callback, progress=False)
    assert [m["step"] for m in seen] == list(range(1, 8))
    assert metrics == seen
    assert digits.step == 7


def test_an_exception_in_the_callback_propagates_and_keeps_the_state(digits,
                                                                      data):
    def callback(m):
        if m["step"] == 4:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        digits.train(data, steps=50, callback=callback, progress=False)
    assert digits.step == 4
    digits.train(data, steps=2, progress=False)
    assert digits.step == 6


def test_ctrl_c_stops_training_after_a_step_and_keeps_the_state(digits,
                                                                data):
    # interrupt_main() raises the SIGINT flag as Ctrl-C would; the runtime,
    # without the GIL, must still notice it (no callback is given).
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            digits.train(data, steps=10**7, progress=False)
    finally:
        timer.cancel()
    reached = digits.step
    assert 0 < reached < 10**7
    digits.train(data, steps=1, progress=False)
    assert digits.step == reached + 1


def test_progress_bar_with_tqdm(digits, data, capsys):
    pytest.importorskip("tqdm")
    digits.train(data, steps=5, progress=True)
    err = capsys.readouterr().err
    assert "loom train" in err and "5/5" in err
    digits.train(data, steps=5, progress=False)
    assert "loom train" not in capsys.readouterr().err


def test_parameters_round_trip(digits, data):
    p = digits.parameters()
    rng = np.random.default_rng(7)
    new = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in p.items()}
    digits.load_parameters(new)
    got = digits.parameters()
    for k in new:
        np.testing.assert_array_equal(got[k], new[k])
    x = data["x"][:32]
    np.testing.assert_allclose(digits.run(x=x)["logits"], mlp_forward(new, x),
                               rtol=1e-4, atol=1e-4)
    # Optimizer state is there too, but not among the parameters.
    state = digits.state()
    assert set(p) < set(state)


def test_checkpoints_resume_the_same_steps(digits, data, tmp_path):
    digits.train(data, steps=10, progress=False)
    digits.save_checkpoint(tmp_path / "at10.safetensors")
    digits.train(data, steps=10, progress=False)
    expected = digits.state()
    digits.load_checkpoint(tmp_path / "at10.safetensors")
    assert digits.step == 10
    digits.train(data, steps=10, progress=False)
    for name, value in expected.items():
        np.testing.assert_array_equal(value, digits.state()[name], err_msg=name)
    # Checkpoints written by train() resume too (the newest of a directory).
    digits.train(data, steps=5, checkpoint_dir=tmp_path / "ckpt", save_every=5,
                 progress=False)
    latest = digits.state()
    digits.train(data, steps=3, progress=False)
    digits.train(data, steps=0, resume=tmp_path / "ckpt", progress=False)
    assert digits.step == 25
    for name, value in latest.items():
        np.testing.assert_array_equal(value, digits.state()[name], err_msg=name)
    with pytest.raises(FileNotFoundError):
        digits.load_checkpoint(tmp_path / "nope.safetensors")


def test_export_onnx_writes_the_trained_weights(digits, data, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    digits.train(data, steps=5, progress=False)
    replaced = digits.export_onnx(tmp_path / "trained.onnx")
    assert sorted(replaced) == sorted(digits.parameters())
    model = onnx.load(str(tmp_path / "trained.onnx"))
    got = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for name, value in digits.parameters().items():
        np.testing.assert_array_equal(got[name], value)


def test_training_releases_the_gil(digits, data):
    # A Python thread notes the time every millisecond while train() runs
    # in this one. Python hands the GIL from one thread to another only
    # between bytecodes; if the runtime held it, the thread could not run in
    # the middle of the call, only before and after it.
    stamps = []
    done = threading.Event()

    def count():
        # Sleeping, not spinning: the runtime's threads keep their cores.
        while not done.is_set():
            time.sleep(0.001)
            stamps.append(time.perf_counter())

    thread = threading.Thread(target=count)
    thread.start()
    try:
        start = time.perf_counter()
        digits.train(data, steps=2000, progress=False)
        end = time.perf_counter()
    finally:
        done.set()
        thread.join()
    assert digits.step == 2000
    assert end - start > 0.1  # else the check below would mean little
    quarter = (end - start) / 4
    middle = [t for t in stamps if start + quarter < t < end - quarter]
    assert len(middle) > 5, (len(middle), len(stamps), end - start)
