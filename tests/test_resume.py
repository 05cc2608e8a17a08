"""Bit-exact resume on CPU float32: a run killed with SIGKILL (at a random step, and once in the middle of
writing a checkpoint) then resumed gives the same loss at every step and the same final weights."""
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT
from enlace.config import load_config

# In bytes and on the conjugation lines alone, as these runs (here, in test_failures.py and test_ddp.py) were before
# the main job moved to the embedded tasks' BPE and mid-training; test_the_main_jobs_bpe_resumes_bit_exact covers those.
OVERRIDES = ["train.max_steps=40", "train.ckpt_every=5", "train.eval_every=10", "train.warmup_steps=5", "train.keep_last=2",
             "data.tokenizer_vocab=null", "model.vocab_size=267", "data.assistant_share=0", "train.seq_len=80"]


def train_cmd(out, *extra):
    return [sys.executable, "-m", "enlace.train", "configs/runs/smoke-cpu.yaml", *OVERRIDES, *extra, "--no-report",
            "--out", str(out), "--no-progress"]


def run(out, *extra, env=None):
    r = subprocess.run(train_cmd(out, *extra), cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, **(env or {})})
    return r


def losses(out):
    "Per step: the values that must not depend on interruptions (timings excluded)."
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"], r["z_loss"], r["lr"], r["grad_norm"], r["tokens"], r.get("val_loss")) for r in rows]


def final_weights_sha(out):
    latest = (out / "checkpoints/latest").read_text().strip()
    return hashlib.sha256((out / "checkpoints" / latest / "model.safetensors").read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    r = run(out, "--fresh")
    assert r.returncode == 0, r.stderr
    return losses(out), final_weights_sha(out)


def test_kill_at_random_step_then_resume_is_bit_exact(tmp_path, reference):
    kill_after = random.Random(os.getpid()).randint(7, 33)
    p = subprocess.Popen(train_cmd(tmp_path, "--fresh"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= kill_after: break
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL); p.wait()
    done = len(metrics.read_text().splitlines())
    assert done < 40, "the run finished before it could be killed"
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr
    assert losses(tmp_path) == reference[0]
    assert final_weights_sha(tmp_path) == reference[1]


def test_kill_while_writing_a_checkpoint_then_resume_is_bit_exact(tmp_path, reference):
    r = run(tmp_path, "--fresh", env={"ENLACE_KILL_IN_CHECKPOINT": "20"})
    assert r.returncode == -signal.SIGKILL
    ckpts = tmp_path / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("step_*")) == ["step_0000010", "step_0000015"]
    assert list(ckpts.glob(".tmp-step_0000020-*")), "the interrupted write should have left its temporary dir"
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr and "step 15" in r.stderr
    assert losses(tmp_path) == reference[0]
    assert final_weights_sha(tmp_path) == reference[1]
    assert not list(ckpts.glob(".tmp-*"))


def test_corrupted_latest_checkpoint_falls_back_in_one_line(tmp_path, reference):
    assert run(tmp_path, "--fresh").returncode == 0
    f = tmp_path / "checkpoints/step_0000040/model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # truncated, as a full disk would leave it
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    warn = [l for l in r.stderr.splitlines() if "unusable" in l]
    assert len(warn) == 1 and "step_0000040" in warn[0] and "model.safetensors is corrupted" in warn[0], r.stderr
    assert "step 35" in r.stderr
    assert losses(tmp_path) == reference[0]
    assert final_weights_sha(tmp_path) == reference[1]


def test_changed_model_shape_is_refused_with_exit_2(tmp_path):
    assert run(tmp_path, "--fresh", "train.max_steps=10").returncode == 0
    r = run(tmp_path, "model.n_layers=2")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "cannot resume with changed model.n_layers: 4 -> 2" in r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present: the profile may well run")
def test_hardware_error_is_one_line_exit_2(tmp_path):
    r = run(tmp_path, "hardware=turing-2060")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "needs a CUDA GPU but none is visible" in r.stderr
    assert not (tmp_path / "metrics.jsonl").exists()
    assert not (tmp_path / ".lock").exists()  # a refused run leaves no lock behind...
    r = run(tmp_path / "new", "hardware=turing-2060")
    assert r.returncode == 2 and not (tmp_path / "new").exists()  # ...nor a folder it created


SHORT = ["train.max_steps=8", "train.ckpt_every=2", "train.warmup_steps=2", "train.eval_every=4"]


def killed_mid_checkpoint_and_resumed(tmp_path, overrides: list) -> dict:
    "Train `overrides` twice: straight, and SIGKILLed while writing step 6 then resumed; both must be identical."
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    assert run(ref, "--fresh", *overrides).returncode == 0
    assert run(killed, "--fresh", *overrides, env={"ENLACE_KILL_IN_CHECKPOINT": "6"}).returncode == -signal.SIGKILL
    r = run(killed, *overrides)
    assert r.returncode == 0 and "step 4" in r.stderr, r.stderr
    assert losses(killed) == losses(ref)
    assert final_weights_sha(killed) == final_weights_sha(ref)
    return json.loads((killed / "checkpoints/step_0000008/manifest.json").read_text())


def test_fp16_gradscaler_resume_is_bit_exact(tmp_path):
    "The Turing precision path (float16 autocast + GradScaler) on the CPU: killed mid-checkpoint, resumed, identical."
    fp16 = ["hardware.allowed_dtypes=[float32,float16]", "hardware.dtype=float16"]
    man = killed_mid_checkpoint_and_resumed(tmp_path, [*fp16, *SHORT])
    assert man["grad_scaler"]["scale"] > 0  # the scaler's state travels with the checkpoint


def test_resume_refuses_a_changed_seed_and_reports_other_changes(tmp_path):
    assert run(tmp_path, "--fresh", "train.max_steps=10").returncode == 0
    r = run(tmp_path, "train.max_steps=10", "train.seed=5")
    assert r.returncode == 2 and "cannot resume with changed train.seed: 1337 -> 5" in r.stderr
    r = run(tmp_path, "train.max_steps=12")
    assert r.returncode == 0 and "resuming with changed settings: train.max_steps: 10 -> 12" in r.stderr


def test_muon_resume_is_bit_exact_and_the_optimizer_cannot_change(tmp_path):
    "Muon + AdamW (train.optimizer=muon): killed mid-checkpoint, resumed, identical; switching optimizer is refused."
    man = killed_mid_checkpoint_and_resumed(tmp_path, ["train.optimizer=muon", *SHORT])
    assert man["optimizer_groups"][0]["muon"] and len(man["optimizer_groups"]) == 4
    r = run(tmp_path / "killed", *SHORT, "train.max_steps=10")
    assert r.returncode == 2 and "cannot resume with changed train.optimizer: muon -> adamw" in r.stderr


def test_the_main_jobs_bpe_resumes_bit_exact(tmp_path):
    "The same as the main job: its BPE, its conversations among the lines (mid-training); stopped after step 20."
    main = load_config(ROOT / "configs/runs/smoke-cpu.yaml")
    assert main.data.assistant_share > 0  # else this test would not cover the mixed loader
    bpe = [f"data.tokenizer_vocab={main.data.tokenizer_vocab}", f"model.vocab_size={main.model.vocab_size}",
           f"data.assistant_share={main.data.assistant_share}", f"train.seq_len={main.train.seq_len}", "train.max_steps=30"]
    ref = tmp_path / "ref"
    assert run(ref, "--fresh", *bpe).returncode == 0
    r = run(tmp_path / "cut", "--fresh", *bpe, env={"ENLACE_KILL_IN_CHECKPOINT": "25"})
    assert r.returncode == -signal.SIGKILL  # killed while writing step 25's checkpoint: step 20's is the last
    r = run(tmp_path / "cut", *bpe)
    assert r.returncode == 0 and "resumed from" in r.stderr, r.stderr
    assert losses(tmp_path / "cut") == losses(ref) and final_weights_sha(tmp_path / "cut") == final_weights_sha(ref)
