"""Benchmark: forward+backward tokens/s and CPU MFU of the modern block vs a GPT-2 block of equal size.

Also measures the machine's fp32/bf16 matmul peaks and trains the smoke model briefly in float32 and in
bfloat16 autocast on the same bytes, to see whether the (much faster) bf16 CPU profile trains as well.
Prints a table and writes JSON. Usage:
    .venv/bin/python scripts/bench_model.py [--out runs/bench/model.json] [--quick]
"""
import argparse, json, math, platform, statistics, time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from enlace.config import load_layer
from enlace.model import Transformer, flops_per_token, lm_loss, param_count
from enlace.backends import KERNELS, measure_matmul_flops

ROOT = Path(__file__).resolve().parent.parent



class GPT2Block(nn.Module):
    "nanoGPT's block: LayerNorm, fused-qkv multi-head attention, GELU MLP, biases."
    def __init__(self, d, n_heads, d_ff):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1, self.c_attn, self.attn_proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_2, self.c_fc, self.mlp_proj = nn.LayerNorm(d), nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in self.c_attn(self.ln_1(x)).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    "GPT-2 with learned positions and a tied head, sized by `d_ff` to match another model's parameters."
    def __init__(self, vocab, d, n_layers, n_heads, max_len, d_ff):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.h = nn.ModuleList(GPT2Block(d, n_heads, d_ff) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h: x = b(x)
        return self.ln_f(x) @ self.wte.weight.T


def gpt2_like(c, seq_len):
    "A GPT-2 with the modern model's width, depth and heads and (nearly) its parameter count."
    target = param_count(c)["total"]
    d, L = c.d_model, c.n_layers
    fixed = c.vocab_size * d + seq_len * d + 2 * d + L * (4 * d * d + 3 * d + 4 * d + d)  # all but the MLP hidden
    d_ff = max(64, round((target - fixed) / (L * (2 * d + 1)) / 64) * 64)
    return GPT2(c.vocab_size, d, L, c.n_heads, seq_len, d_ff), d_ff


def gpt2_flops_per_token(m, c, T):
    n = sum(p.numel() for p in m.parameters()) - m.wpe.weight.numel()  # wte counts once, as the head matmul
    return 6 * n + 12 * c.n_layers * c.d_model * T


def fwd_bwd(model, idx, kernel, dtype):
    "One forward+backward of the mean next-token loss."
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bfloat16" else torch.autocast("cpu", enabled=False)
    with sdpa_kernel(KERNELS[kernel]), ctx:
        out = lm_loss(model(idx[:, :-1]), idx[:, 1:])
        loss = out["ce"] / out["n"]
    loss.backward()


def throughput(models, B, T, vocab, kernel, dtype, rounds):
    "Interleaved timing (A, B, A, B, ...) so both models see the same machine load; median tokens/s each."
    idx = torch.randint(0, vocab, (B, T + 1), generator=torch.Generator().manual_seed(0))
    times = {k: [] for k in models}
    for m in models.values(): fwd_bwd(m, idx, kernel, dtype)  # warm-up
    for _ in range(rounds):
        for k, m in models.items():
            t0 = time.perf_counter(); fwd_bwd(m, idx, kernel, dtype); times[k].append(time.perf_counter() - t0)
            m.zero_grad(set_to_none=True)
    return {k: B * T / statistics.median(v) for k, v in times.items()}


def corpus_bytes(n):
    "Up to n bytes of Spanish prose: the shared corpus when present, else this repo's own text."
    shared = ROOT.parent / "shared/corpus/es"
    files = sorted(shared.rglob("*.txt")) if shared.is_dir() else sorted(ROOT.glob("nbs/*.ipynb"))
    buf = bytearray()
    for f in files:
        buf += f.read_bytes()
        if len(buf) >= n: break
    return torch.tensor(list(buf[:n]), dtype=torch.long), ("shared/corpus/es" if shared.is_dir() else "repo notebooks")


def train_quality(c, dtype, steps, B, T, data, seed=0):
    "Train the smoke model from the same init on the same batches; return final val loss (bits/byte) and time."
    torch.manual_seed(seed)
    m = Transformer(c)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    n_train = int(len(data) * 0.9)
    g = torch.Generator().manual_seed(seed)
    def batch(lo, hi):
        starts = torch.randint(lo, hi - T - 1, (B,), generator=g)
        return torch.stack([data[s:s + T + 1] for s in starts])
    t0 = time.perf_counter()
    for step in range(steps):
        for pg in opt.param_groups: pg["lr"] = 3e-3 * min(1, (step + 1) / 20) * (1 - step / steps)
        fwd_bwd(m, batch(0, n_train), "math", dtype)
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
    secs = time.perf_counter() - t0
    g.manual_seed(123)
    with torch.no_grad():
        tot = n = 0
        for _ in range(16):
            idx = batch(n_train, len(data))
            out = lm_loss(m(idx[:, :-1]), idx[:, 1:])  # evaluated in float32 for both
            tot, n = tot + out["ce"].item(), n + out["n"].item()
    return {"val_bpb": tot / n / math.log(2), "seconds": secs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "runs/bench/model.json"))
    ap.add_argument("--quick", action="store_true", help="fewer rounds and steps (a smoke test of the script)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant (it compiles for ~1 min)")
    args = ap.parse_args()
    torch.manual_seed(0)
    rounds = 3 if args.quick else 8
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "cpu": platform.processor() or platform.machine()}
    res["peak_gflops"] = {dt: measure_matmul_flops(getattr(torch, dt), n=2048, seconds=1 if args.quick else 3) / 1e9
                          for dt in ("float32", "bfloat16")}
    print(f"matmul peak: fp32 {res['peak_gflops']['float32']:.0f} GFLOP/s, bf16 {res['peak_gflops']['bfloat16']:.0f} GFLOP/s "
          f"({res['peak_gflops']['bfloat16'] / res['peak_gflops']['float32']:.1f}x)")
    rows = []
    cases = [("smoke", 32, 64), ("smoke", 16, 256), ("tiny-50m", 4, 512)]
    for name, B, T in cases:
        c = load_layer(ROOT / f"configs/model/{name}.yaml", "model")
        modern = Transformer(c)
        gpt2, d_ff = gpt2_like(c, T)
        n_mod, n_gpt = param_count(c)["total"], sum(p.numel() for p in gpt2.parameters())
        variants = [("math", "float32", False), ("flash", "float32", False), ("flash", "bfloat16", False)]
        if not args.no_compile: variants.append(("flash", "float32", True))
        for kernel, dtype, compiled in variants:
            models = {"modern": modern, "gpt2": gpt2}
            if compiled: models = {k: torch.compile(m) for k, m in models.items()}
            n_rounds = rounds if name == "smoke" else max(2, rounds // 2)
            tps = throughput(models, B, T, c.vocab_size, kernel, dtype, n_rounds)
            peak = res["peak_gflops"][dtype] * 1e9
            row = {"model": name, "batch": B, "seq_len": T, "kernel": kernel, "dtype": dtype, "compiled": compiled,
                   "params_modern": n_mod, "params_gpt2": n_gpt, "gpt2_d_ff": d_ff,
                   "tok_s_modern": tps["modern"], "tok_s_gpt2": tps["gpt2"], "ratio": tps["modern"] / tps["gpt2"],
                   "mfu_modern": tps["modern"] * flops_per_token(c, T) / peak,
                   "mfu_gpt2": tps["gpt2"] * gpt2_flops_per_token(gpt2, c, T) / peak}
            rows.append(row)
            print(f"{name:9s} B={B:<3d} T={T:<4d} {kernel:6s} {dtype:9s} {'compiled' if compiled else 'eager':8s} modern {row['tok_s_modern']:8.0f} tok/s "
                  f"(MFU {row['mfu_modern']:5.1%})  gpt2 {row['tok_s_gpt2']:8.0f} tok/s (MFU {row['mfu_gpt2']:5.1%})  "
                  f"ratio {row['ratio']:.2f}   [params {n_mod / 1e6:.2f}M vs {n_gpt / 1e6:.2f}M]", flush=True)
    res["throughput"] = rows
    c = load_layer(ROOT / "configs/model/smoke.yaml", "model")
    data, source = corpus_bytes(4_000_000)
    steps = 60 if args.quick else 400
    q = {dt: train_quality(c, dt, steps, 32, 64, data) for dt in ("float32", "bfloat16")}
    res["bf16_training"] = {"data": source, "steps": steps, "batch": 32, "seq_len": 64, **q}
    print(f"smoke model, {steps} steps on {source}: val bpb fp32 {q['float32']['val_bpb']:.3f} in {q['float32']['seconds']:.1f}s, "
          f"bf16 autocast {q['bfloat16']['val_bpb']:.3f} in {q['bfloat16']['seconds']:.1f}s")
    out = Path(args.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
