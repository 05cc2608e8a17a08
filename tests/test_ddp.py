"""Data parallelism with torchrun on CPU (gloo), two processes on 127.0.0.1, each test on a free port.

Two ranks train the same run as one process (the same data in every step, losses equal but for the order of the
sums); a 2-rank job killed with SIGKILL (the whole torchrun group) and restarted is bit-exact; checkpoints resume
across rank counts; a failing rank ends the job; bad set-ups are refused before step 1 in one line."""
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from test_resume import OVERRIDES, final_weights_sha, losses

# two micro-batches of 16 per step of 32: one per rank with two ranks, both in one process
DDP = [*OVERRIDES, "hardware.batch_size=16"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # two ranks on two cores: one thread each, for both kinds of run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd(out, ranks: int, *extra):
    "The training command: torchrun with `ranks` processes (a rendezvous on a free port), or plain python for 1."
    train = ["-m", "enlace.train", "configs/runs/smoke-cpu.yaml", *DDP, *extra, "--no-report", "--out", str(out),
             "--no-progress"]
    if ranks == 1:
        return [sys.executable, *train]
    rdzv = ["--nnodes", "1", "--nproc_per_node", str(ranks), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--monitor-interval", "0.5"]
    return [sys.executable, "-m", "torch.distributed.run", *rdzv, *train]


def run(out, ranks: int, *extra, env=None, timeout=600):
    "Run to the end; the assertion messages show the ranks' error lines first (torchrun's report is long)."
    return subprocess.run(cmd(out, ranks, *extra), cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**ENV, **(env or {})})


def close(a, b, rel=1e-4):
    "Per step, the same step and tokens and losses equal within `rel` (only the order of the sums differs)."
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra[0] == rb[0] and ra[5] == rb[5], (ra, rb)  # step, tokens
        for x, y in zip((ra[1], ra[2], ra[6]), (rb[1], rb[2], rb[6])):  # loss, z_loss, val_loss
            assert (x is None) == (y is None) and (x is None or abs(x - y) <= rel * abs(y)), (ra, rb)


def uninterrupted(tmp_path_factory, ranks: int):
    "Losses and final weights sha256 of a run with `ranks` processes, start to end."
    out = tmp_path_factory.mktemp(f"ranks{ranks}")
    r = run(out, ranks, "--fresh")
    assert r.returncode == 0, r.stderr
    return losses(out), final_weights_sha(out)


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    return uninterrupted(tmp_path_factory, 1)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return uninterrupted(tmp_path_factory, 2)


def children(pid: int) -> list[int]:
    "Every descendant of `pid` (torchrun starts each rank in a session of its own: killpg does not reach them)."
    kids = []
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids += [int(stat), *children(int(stat))]
    return kids


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_group_after(out, ranks: int, steps: int, *extra):
    "Start a run; once `steps` metric lines exist, SIGKILL torchrun and every rank at once (a power cut)."
    p = subprocess.Popen(cmd(out, ranks, "--fresh", *extra), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    metrics = out / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= steps:
            break
        time.sleep(0.01)
    group = [*children(p.pid), p.pid]
    for pid in group:
        os.kill(pid, signal.SIGKILL)
    p.wait()
    for pid in group:  # dead once /proc forgets them or shows them as zombies (their locks are released)
        while alive(pid):
            time.sleep(0.01)
    done = len(metrics.read_text().splitlines())
    assert steps <= done < 40, f"killed after {done} steps"


def test_killing_only_the_launcher_ends_its_ranks(tmp_path):
    "kill -9 of torchrun alone (its ranks live in sessions of their own) used to leave both ranks training."
    p = subprocess.Popen(cmd(tmp_path, 2, "--fresh"), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None and not (metrics.exists() and metrics.read_text().count("\n") >= 3):
        time.sleep(0.05)
    ranks = children(p.pid)
    assert p.poll() is None and len(ranks) >= 2, "the run ended before the launcher could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.time() + 30
    while time.time() < deadline and any(alive(r) for r in ranks):
        time.sleep(0.1)
    assert not any(alive(r) for r in ranks), [r for r in ranks if alive(r)]
    assert metrics.read_text().count("\n") < 40  # they stopped, not finished
    r = run(tmp_path, 2)  # and the folder is free: no "in use by another training"
    assert r.returncode == 0, r.stderr[-2000:]


def test_two_ranks_train_the_same_run_as_one_process(one, two):
    close(two[0], one[0])


def test_killing_the_whole_group_then_resuming_is_bit_exact(tmp_path, two):
    kill_group_after(tmp_path, 2, random.Random(os.getpid()).randint(7, 33))
    r = run(tmp_path, 2)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr
    assert losses(tmp_path) == two[0]
    assert final_weights_sha(tmp_path) == two[1]


@pytest.mark.parametrize("before,after", [(2, 1), (1, 2)])
def test_a_checkpoint_resumes_with_another_number_of_ranks(tmp_path, one, before, after):
    kill_group_after(tmp_path, before, 12)
    r = run(tmp_path, after)
    assert r.returncode == 0, r.stderr
    assert f"the checkpoint was written by {before} rank(s), this run has {after}" in r.stderr
    close(losses(tmp_path), one[0])


def test_a_failing_rank_ends_the_whole_job_with_its_error(tmp_path):
    t0 = time.time()
    r = run(tmp_path, 2, "--fresh", env={"ENLACE_FAIL_AT": "1:5"}, timeout=300)
    assert r.returncode != 0
    assert "error: rank 1: injected failure at step 5" in r.stderr, r.stderr[-3000:]
    assert time.time() - t0 < 120, "the other rank must not hang until the collective timeout"


def test_a_world_size_that_cannot_share_the_batch_is_refused(tmp_path):
    r = run(tmp_path, 2, "--fresh", "hardware.batch_size=32")  # one micro-batch of 32 per step: not for two ranks
    assert r.returncode != 0
    assert ("error: train.batch_size: 32 sequences in micro-batches of 32 make 1 per step, which 2 ranks cannot "
            "share; set hardware.batch_size=16 (the global batch stays the same)") in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / "metrics.jsonl").exists()


def test_ranks_that_disagree_are_refused_before_step_1(tmp_path):
    "Two machines started by hand with different overrides: both refuse before any step, in one line."
    port = free_port()
    procs = []
    for rank, lr in ((0, "4e-3"), (1, "1e-3")):
        env = {**ENV, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-m", "enlace.train", "configs/runs/smoke-cpu.yaml", *DDP,
                                       f"train.lr={lr}", "--no-report", "--out", str(tmp_path / f"r{rank}"),
                                       "--no-progress", "--fresh"], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                                      text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 2, err
        assert err.strip().splitlines()[-1] == ("error: rank 1 and rank 0 disagree on the config: start every rank "
                                                "with the same run file, overrides and data"), err
    assert not (tmp_path / "r0" / "metrics.jsonl").exists()


def test_a_missing_rendezvous_is_one_line(tmp_path):
    env = {k: v for k, v in ENV.items() if k not in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    r = subprocess.run(cmd(tmp_path, 1), cwd=ROOT, capture_output=True, text=True, env={**env, "WORLD_SIZE": "2"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["error: WORLD_SIZE=2 but RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT not "
                                             "set: start the run with torchrun --nproc_per_node N -m enlace.train "
                                             "RUN.yaml (or unset WORLD_SIZE)"], r.stderr
