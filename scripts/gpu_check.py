"""The GPU checks to run when a session is lent a CUDA machine (one short, prepared script).

1. describe the device and which hardware profiles it can honour;
2. for float16 + GradScaler (turing-2060 path) and bfloat16 (hopper-h200 path): a short smoke training,
   killed with SIGKILL while writing a checkpoint and resumed; is the resumed run bit-exact?
3. tiny-50m forward+backward throughput and MFU for each SDPA kernel and dtype, eager and compiled.
Writes JSON to $OUT/gpu_check.json (or --out) and prints a summary. `--cpu` runs the same logic with CPU
profiles, to check the script itself on a machine without a GPU.
    python scripts/gpu_check.py [--cpu] [--out FILE]
"""
import argparse, json, os, signal, subprocess, sys, tempfile, time
from pathlib import Path

import torch

from enlace.config import load_config
from enlace.model import Transformer, flops_per_token, lm_loss
from enlace import backends

ROOT = Path(__file__).resolve().parent.parent


def train(out, overrides, env=None):
    cmd = [sys.executable, "-m", "enlace.train", "configs/runs/smoke-cpu.yaml", *overrides, "--out", str(out), "--no-progress", "--no-report"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900)


def losses(out):
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"], r["grad_norm"]) for r in rows]


def resume_check(profile, extra):
    ov = [f"hardware={profile}", *extra, "train.max_steps=60", "train.ckpt_every=20", "train.eval_every=30", "train.warmup_steps=5"]
    with tempfile.TemporaryDirectory() as t:
        ref, killed = Path(t) / "ref", Path(t) / "killed"
        t0 = time.time(); r = train(ref, [*ov, "--fresh"]); secs = time.time() - t0
        if r.returncode: return {"error": r.stderr.strip().splitlines()[-1]}
        k = train(killed, [*ov, "--fresh"], env={"ENLACE_KILL_IN_CHECKPOINT": "40"})
        r2 = train(killed, ov)
        if r2.returncode: return {"error": r2.stderr.strip().splitlines()[-1]}
        a, b = losses(ref), losses(killed)
        diff = max(abs(x[1] - y[1]) for x, y in zip(a, b))
        return {"killed_rc": k.returncode, "bit_exact": a == b, "max_loss_diff": diff, "final_loss": a[-1][1], "seconds": secs}


def throughput(hw, cfg, B, T, compiled, steps=10):
    model = Transformer(cfg).to(hw.device)
    m = torch.compile(model) if compiled else model
    idx = torch.randint(0, cfg.vocab_size, (B, T + 1), device=hw.device)
    def step():
        with backends.autocast(hw), backends.attention_kernel(hw):
            out = lm_loss(m(idx[:, :-1]), idx[:, 1:])
        (out["ce"] / out["n"]).backward()
    for _ in range(3): step()
    if hw.device == "cuda": torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps): step()
    if hw.device == "cuda": torch.cuda.synchronize()
    return B * T * steps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="dry run of this script with CPU profiles")
    ap.add_argument("--out", default=str(Path(os.environ.get("OUT", ROOT / "runs/bench")) / "gpu_check.json"))
    args = ap.parse_args()
    dev = backends.describe_device("cpu" if args.cpu else "cuda")
    res = {"device": dev.__dict__ | {"bf16": dev.bf16}, "torch": torch.__version__, "cuda": torch.version.cuda}
    print(f"device: {dev.label}, {dev.memory_gb} GB, kernels {dev.kernels}, torch {torch.__version__}, cuda {torch.version.cuda}")
    profiles = ["cpu", "cpu-bf16"] if args.cpu else ["turing-2060", "blackwell-5090", "hopper-h200"]
    res["profiles"] = {}
    for p in profiles:
        hw = load_config(ROOT / "configs/runs/smoke-cpu.yaml", [f"hardware={p}"]).hardware
        try: backends.check_hardware(hw, dev); res["profiles"][p] = "ok"
        except backends.HardwareError as e: res["profiles"][p] = str(e)
        print(f"profile {p}: {res['profiles'][p]}")
    checks = [("cpu", []), ("cpu-bf16", [])] if args.cpu else [("turing-2060", []), ("hopper-h200", [])]
    res["resume"] = {}
    for p, extra in checks:
        if res["profiles"].get(p) != "ok": continue
        res["resume"][p] = resume_check(p, extra)
        print(f"resume {p}: {res['resume'][p]}", flush=True)
    res["throughput"] = []
    tiny = load_config(ROOT / "configs/runs/pretrain-2060.yaml", ["hardware=cpu"]).model
    B, T = (2, 128) if args.cpu else (16, 1024)
    runs = [("cpu", "float32", "math"), ("cpu-bf16", "bfloat16", "flash")] if args.cpu else \
        [("turing-2060", "float16", k) for k in ("math", "mem_efficient", "flash")] + \
        [("hopper-h200", "bfloat16", k) for k in ("math", "mem_efficient", "flash")]
    for p, dtype, kernel in runs:
        hw = load_config(ROOT / "configs/runs/smoke-cpu.yaml", [f"hardware={p}", f"hardware.attention={kernel}"]).hardware
        if kernel not in dev.kernels: continue
        peak = backends.peak_flops(hw, dev)
        for compiled in (False, True):
            if compiled and args.cpu: continue
            try: tps = throughput(hw, tiny, B, T, compiled)
            except Exception as e: res["throughput"].append({"profile": p, "kernel": kernel, "compiled": compiled, "error": str(e)[:200]}); continue
            mfu = tps * flops_per_token(tiny, T) / peak if peak else None
            res["throughput"].append({"profile": p, "dtype": dtype, "kernel": kernel, "compiled": compiled, "tok_s": tps, "mfu": mfu})
            print(f"tiny-50m {dtype} {kernel} {'compiled' if compiled else 'eager'}: {tps:,.0f} tok/s, MFU {mfu:.1%}" if mfu else f"{tps:,.0f} tok/s", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
