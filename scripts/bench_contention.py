"""Benchmark: how much a second busy torch process slows a training step on this machine, and what helps.

A victim process times forward+backward+AdamW steps of the pretrain-cpu model (batch 8 x 128, eager, float32)
while a competitor process multiplies matrices in a loop. Settings compared (each victim in a fresh process,
because OpenMP reads its environment once): alone; with the competitor and default threads; with
OMP_WAIT_POLICY=PASSIVE in both (OpenMP threads sleep instead of spinning when they wait); with one thread each
(OMP_NUM_THREADS=1); and alone with PASSIVE (what the policy costs when nothing competes).
Prints a table and writes JSON:
    .venv/bin/python scripts/bench_contention.py [--steps 40] [--out runs/bench/contention.json]
"""
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VICTIM = r"""
import json, sys, time, torch
from enlace.config import load_layer
from enlace.model import Transformer, lm_loss
torch.manual_seed(0)
m = Transformer(load_layer("configs/model/pretrain-cpu.yaml", "model"))
opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True)
x = torch.randint(0, m.cfg.vocab_size, (8, 129))
times = []
for i in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    s = lm_loss(m(x[:, :-1]), x[:, 1:])
    (s["ce"] / s["n"]).backward(); opt.step(); opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t0)
print(json.dumps({"threads": torch.get_num_threads(), "step_s": times}))
"""

COMPETITOR = r"""
import torch
a = torch.randn(1024, 1024)
while True:
    a = torch.tanh(a @ a)
"""

CASES = [  # name, victim env, competitor env (None: no competitor)
    ("alone", {}, None),
    ("busy neighbour, default threads", {}, {}),
    ("busy neighbour, OMP_WAIT_POLICY=PASSIVE in both", {"OMP_WAIT_POLICY": "PASSIVE"}, {"OMP_WAIT_POLICY": "PASSIVE"}),
    ("busy neighbour, OMP_NUM_THREADS=1 in both", {"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "1"}),
    ("alone, OMP_WAIT_POLICY=PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"}, None),
]


def victim(steps: int, env: dict) -> dict:
    "One victim process under `env`; its median step (after 5 warm-up steps) and thread count."
    out = subprocess.run([sys.executable, "-c", VICTIM, str(steps)], cwd=ROOT, env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"threads": r["threads"], "median_step_s": statistics.median(r["step_s"][5:])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="timed steps per case (the first 5 are warm-up)")
    ap.add_argument("--out", default="runs/bench/contention.json")
    a = ap.parse_args()
    rows = []
    for name, venv, cenv in CASES:
        comp = None
        if cenv is not None:
            comp = subprocess.Popen([sys.executable, "-c", COMPETITOR], env={**os.environ, **cenv})
            time.sleep(2)  # let it get going
        try:
            r = victim(a.steps, venv)
        finally:
            if comp:
                comp.kill(); comp.wait()
        rows.append({"case": name, **r})
        print(f"{name:50} {r['threads']} threads  {1000 * r['median_step_s']:8.1f} ms/step", flush=True)
    base = rows[0]["median_step_s"]
    for r in rows: r["slowdown"] = r["median_step_s"] / base
    print("\n" + "\n".join(f"{r['case']:50} {r['slowdown']:6.2f}x" for r in rows))
    out = ROOT / a.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cases": rows, "cpu_count": os.cpu_count()}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
