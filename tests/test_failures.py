"""Issue 19, the training side: what a careless or hostile user did to a run folder, turned into tests.

A second training into a busy folder, every checkpoint broken, a full disk while writing a checkpoint, a run that
diverges, Ctrl-C, a hand-edited model manifest, a folder given to `bpb` as a text file. Each refusal is one line
and loses nothing; each of these tests fails on the code before the fix."""
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from test_resume import OVERRIDES, final_weights_sha, losses, run, train_cmd


def snapshot(folder: Path) -> dict:
    "sha256 of every file under `folder` (lock file excluded): what 'nothing was changed' means."
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


def error_lines(stderr: str) -> list[str]:
    "The non-empty stderr lines, but for the trainer's warning about a machine grown slower (a busy CI box)."
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("warning: steps are")]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    r = run(out, "--fresh")
    assert r.returncode == 0, r.stderr
    return out, losses(out), final_weights_sha(out)


def wait_for_steps(p, metrics: Path, n: int, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"the run did not reach {n} steps (exit {p.poll()})")


def test_a_second_training_into_a_busy_folder_refuses_naming_the_pid(tmp_path):
    p = subprocess.Popen(train_cmd(tmp_path, "--fresh", "train.max_steps=100000"), cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_steps(p, tmp_path / "metrics.jsonl", 6)  # past the checkpoint of step 5: the last run resumes it
        config = (tmp_path / "config.yaml").read_bytes()
        r = run(tmp_path, "train.lr=1e-3")
        assert r.returncode == 2, r.stderr
        assert error_lines(r.stderr) == [f"error: {tmp_path}: in use by another training (pid {p.pid}); "
                                         "wait for it to finish or use another folder"]
        assert (tmp_path / "config.yaml").read_bytes() == config  # the second run wrote nothing
        r = run(tmp_path, "--fresh")  # --fresh does not get around it either
        assert r.returncode == 2 and f"pid {p.pid}" in r.stderr
        assert p.poll() is None, "the first run must go on undisturbed"
    finally:
        p.kill()
        p.wait()
    r = run(tmp_path)  # killed with SIGKILL: the OS released the lock, the folder resumes
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr


def test_every_checkpoint_broken_refuses_instead_of_starting_over(tmp_path, reference):
    out = tmp_path / "run"
    subprocess.run(["cp", "-r", str(reference[0]), str(out)], check=True)
    for f in (out / "checkpoints").glob("step_*/model.safetensors"):
        f.write_bytes(f.read_bytes()[:100])  # truncated
    before = snapshot(out)
    r = run(out)
    assert r.returncode == 2, r.stderr
    lines = error_lines(r.stderr)
    assert len(lines) == 1, lines
    assert "none of its 2 checkpoints is usable (step_0000040: model.safetensors is corrupted" in lines[0]
    assert "pass --fresh to start over" in lines[0]
    assert snapshot(out) == before  # metrics, config and checkpoints untouched


def limit_file_size(nbytes: int):
    "preexec_fn: writes past `nbytes` fail with EFBIG, as on a full disk (no root, no tmpfs needed)."
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return apply


def test_disk_full_while_writing_a_checkpoint_is_one_line_and_keeps_the_last_one(tmp_path, reference):
    p = subprocess.Popen(train_cmd(tmp_path, "--fresh"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_steps(p, tmp_path / "metrics.jsonl", 12)
    p.kill()
    p.wait()
    ckpts = tmp_path / "checkpoints"
    good = snapshot(ckpts)
    assert any(name.startswith("step_0000010") for name in good), good
    # the model file (4.2 MB) fits, the optimizer state (8.4 MB) does not: the write fails half-way
    r = subprocess.run(train_cmd(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=600,
                       preexec_fn=limit_file_size(6 << 20))
    assert r.returncode == 1, r.stderr
    lines = [line for line in error_lines(r.stderr) if not line.startswith("resumed from")]
    assert len(lines) == 1 and lines[0].startswith("error: disk full at "), lines
    assert "Traceback" not in r.stderr
    assert not list(ckpts.glob(".tmp-*")), "the half-written folder must be removed"
    assert snapshot(ckpts) == good  # the previous checkpoints are intact
    # a writer killed half-way (its pid is dead) left a temporary folder: the next save removes it
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = ckpts / f".tmp-step_0000099-{dead.pid}"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"x" * 1000)
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert not stale.exists()
    assert losses(tmp_path) == reference[1]
    assert final_weights_sha(tmp_path) == reference[2]


def test_a_diverging_run_stops_in_one_line_and_exports_nothing(tmp_path):
    r = run(tmp_path, "--fresh", "train.lr=1e4", "train.grad_clip=0")
    assert r.returncode == 1, r.stderr
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and "(diverged); nothing saved or exported; lower train.lr (now 10000)" in lines[0], lines
    step = int(lines[0].split("step ")[1].split(":")[0])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, step))  # the diverged step is not logged
    assert all(row["loss"] is not None for row in rows)
    assert not list(tmp_path.glob("model-*"))
    saved = [json.loads((d / "manifest.json").read_text())["step"] for d in (tmp_path / "checkpoints").glob("step_*")]
    assert all(s < step for s in saved)


def test_ctrl_c_is_one_line_exit_130_and_resumes_bit_exact(tmp_path, reference):
    # a shell that starts the suite in the background (`cmd &`, no job control) leaves SIGINT ignored, and an
    # ignored SIGINT is inherited: Python then never raises KeyboardInterrupt. The user's terminal has it on.
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    p = subprocess.Popen(train_cmd(tmp_path, "--fresh"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=default_sigint)
    wait_for_steps(p, tmp_path / "metrics.jsonl", 12)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [line for line in error_lines(err) if not line.startswith("step ")]  # the val_loss lines
    assert len(lines) == 1 and lines[0].startswith("interrupted; run the same command to go on"), lines
    assert "resumes from step_" in lines[0]
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert losses(tmp_path) == reference[1]
    assert final_weights_sha(tmp_path) == reference[2]


def test_hand_edited_model_manifest_and_a_folder_as_text_are_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "enlace.train", "configs/runs/smoke-cpu.yaml", *OVERRIDES,
                        "train.max_steps=10", "--no-report", "--out", str(tmp_path), "--no-progress"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    model = Path(json.loads(r.stdout)["model_file"])
    text = tmp_path / "t.txt"
    text.write_text("Había una vez un niño que vivía en la montaña.\n" * 20)
    bpb = [sys.executable, "-m", "enlace.bpb", "--model", str(model), "--no-progress"]
    ok = subprocess.run([*bpb, str(text)], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    r = subprocess.run([*bpb, str(tmp_path)], cwd=ROOT, capture_output=True, text=True)  # a folder
    assert r.returncode == 2 and error_lines(r.stderr) == [f"error: {tmp_path}: is a folder, not a text file; "
                                                           "name the files in it"], r.stderr
    man = model.with_suffix(".json")
    edited = json.loads(man.read_text())
    man.write_text(json.dumps({**edited, "seq_len": 16}))  # would silently change every bits-per-byte figure
    r = subprocess.run([*bpb, str(text)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert error_lines(r.stderr) == [f"error: {man}: its 'seq_len' entry disagrees with the model file "
                                     f"(hand-edited?); restore it: {edited['seq_len']}"]


def test_a_failed_compile_goes_on_eager_with_one_warning_line(monkeypatch, capsys, tmp_path):
    "A compile killed once left a 0-byte .so in torch's shared cache, and every later compiled run died at its first step."
    from types import SimpleNamespace

    from enlace import backends

    monkeypatch.setenv("ENLACE_CACHE", str(tmp_path / "cache"))
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    real = torch.compile

    def broken(gm, example_inputs):
        raise RuntimeError("main.so: file too short")

    monkeypatch.setattr(torch, "compile", lambda m: real(m, backend=broken))
    torch._dynamo.reset()
    try:
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 3)
        c = backends.maybe_compile(m, SimpleNamespace(compile=True))
        x = torch.randn(2, 4)
        assert torch.equal(c(x), m(x)) and c.failed
        c.eval()
        assert not m.training  # train()/eval() reach the model itself
        c(x)
        err = capsys.readouterr().err
        assert err.count("warning: torch.compile failed") == 1 and "main.so: file too short" in err, err
        assert len([line for line in err.splitlines() if "torch.compile" in line]) == 1
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "inductor")
        with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
            backends.maybe_compile(torch.nn.Linear(5, 3), SimpleNamespace(compile=True))(x)  # the model's own error
    finally:
        torch._dynamo.reset()
        for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            os.environ.pop(var, None)
