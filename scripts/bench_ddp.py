"""Benchmark: training tokens/s of 1 process vs N processes under torchrun (DistributedDataParallel), same run file,
same global batch. On one 2-core machine there is nothing to gain (two ranks share the two cores): the point is
the cost of the collectives. On a machine with N GPUs pass a GPU run and --ranks N. The runs alternate
(1, N, 1, N...) so that a machine whose pace drifts hurts both alike; the median pace of the steps after the
first few (warm-up, compilation) is reported. Prints a table and writes JSON. Usage:
    .venv/bin/python scripts/bench_ddp.py [--run configs/runs/smoke-cpu.yaml] [--ranks 2] [--steps 60] [--rounds 2]
        [--out runs/bench/ddp.json] [OVERRIDES...]
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(run: str, ranks: int, steps: int, overrides: list[str], out: Path, threads: int) -> list[dict]:
    "One fresh run of `steps` steps with `ranks` processes; its metrics lines."
    args = ["-m", "enlace.train", run, *overrides, f"train.max_steps={steps}", f"train.eval_every={steps}",
            f"train.ckpt_every={steps}", "train.warmup_steps=1", "train.decay_frac=0.2", "train.time_budget_s=null",
            "--out", str(out), "--fresh", "--no-report", "--no-progress"]
    if ranks > 1:
        args = ["-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(ranks), "--rdzv-backend",
                "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", *args]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    r = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"error: the {ranks}-process run failed: {r.stderr.strip().splitlines()[-1]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="configs/runs/smoke-cpu.yaml")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2, help="alternating pairs of runs")
    ap.add_argument("--skip", type=int, default=5, help="first steps of each run left out (warm-up)")
    ap.add_argument("--out", default="runs/bench/ddp.json")
    ap.add_argument("overrides", nargs="*", default=["hardware.batch_size=16"],
                    help="dotted overrides (default hardware.batch_size=16: two micro-batches per step to share)")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    pace = {1: [], a.ranks: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for ranks in (1, a.ranks):
                # the same cores either way: one process gets them all, N processes share them
                rows = train(a.run, ranks, a.steps, a.overrides, Path(tmp) / f"r{i}-{ranks}", max(1, cores // ranks))
                pace[ranks] += [r["tok_s"] for r in rows[a.skip:]]
                print(f"round {i + 1}: {ranks} process(es): {statistics.median(pace[ranks][-len(rows) + a.skip:]):,.0f} "
                      "tokens/s", file=sys.stderr)
    one, many = statistics.median(pace[1]), statistics.median(pace[a.ranks])
    res = {"run": a.run, "overrides": a.overrides, "steps": a.steps, "rounds": a.rounds, "cores": cores,
           "machine": platform.processor() or platform.machine(), "tok_s": {"1": one, str(a.ranks): many},
           "ratio": many / one, "spread": {k: [min(v), max(v)] for k, v in pace.items()}}
    print(f"| processes | tokens/s (median) |\n|---|---|\n| 1 | {one:,.0f} |\n| {a.ranks} | {many:,.0f} |")
    print(f"{a.ranks} processes / 1: {many / one:.2f} x on {cores} cores")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
