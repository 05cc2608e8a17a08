"""Benchmark: the training-memory estimate of `python -m enlace.model` (enlace.model.memory_estimate) against the
peak measured on this CPU, for two model sizes, with and without activation checkpointing.

The measured peak is that of live tensors, tracked by torch's MemTracker (torch.distributed._tools.mem_tracker)
over a second optimizer step (the first one creates AdamW's moments): weights, optimizer state, gradients,
activations and temporaries. The process RSS is no measure here: malloc keeps freed memory (a 4 M-parameter model
shows 800 MB of RSS after one step). Checkpointing is the model's own (hardware.checkpointing in a run).
Target: every estimate within 20 % of its measured peak. Usage:
    .venv/bin/python scripts/bench_memory.py [--json runs/bench/memory.json]
"""
import argparse
import json
from pathlib import Path

import torch
from torch.distributed._tools.mem_tracker import MemTracker
from torch.nn.attention import SDPBackend, sdpa_kernel

from enlace.config import load_layer
from enlace.model import Transformer, lm_loss, memory_estimate

ROOT = Path(__file__).resolve().parent.parent
CASES = [  # (model file, micro-batch, sequence length, autocast dtype, attention kernel, checkpointing)
    ("pretrain-cpu", 8, 512, "float32", "math", False),
    ("pretrain-cpu", 8, 512, "float32", "math", True),
    ("pretrain-cpu", 4, 1024, "bfloat16", "math", False),
    ("pretrain-cpu", 4, 512, "float32", "flash", False),
    ("tiny-50m", 2, 512, "float32", "math", False),
    ("tiny-50m", 2, 512, "bfloat16", "flash", True),
]
KERNELS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}


def measure(name: str, batch: int, seq_len: int, dtype: str, attention: str, ckpt: bool) -> dict:
    "Peak live-tensor bytes of a second training step, by kind (MemTracker's categories)."
    torch.manual_seed(0)
    cfg = load_layer(ROOT / f"configs/model/{name}.yaml", "model")
    model = Transformer(cfg)
    model.checkpointing = ckpt  # what hardware.checkpointing does in the trainer
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, cfg.vocab_size, (batch, seq_len + 1))

    def step():
        with sdpa_kernel(KERNELS[attention]):  # backward inside: checkpointing recomputes with the same kernel
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype != "float32"):
                out = lm_loss(model(x[:, :-1]), x[:, 1:])
            (out["ce"] / out["n"]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        step()
        tracker.reset_mod_stats()
        step()
    peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    return {str(k).split(".")[-1].split(":")[0].lower(): v for k, v in peak.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="runs/bench/memory.json")
    args = ap.parse_args()
    rows = []
    for name, batch, seq_len, dtype, attention, ckpt in CASES:
        cfg = load_layer(ROOT / f"configs/model/{name}.yaml", "model")
        est = memory_estimate(cfg, batch, seq_len, dtype, attention, checkpointing=ckpt)
        got = measure(name, batch, seq_len, dtype, attention, ckpt)
        ratio = est["peak"] / got["total"]
        rows.append({"model": name, "batch": batch, "seq_len": seq_len, "dtype": dtype, "attention": attention,
                     "checkpointing": ckpt, "estimate": est, "measured": got, "ratio": ratio})
        print(f"[memory] {name:<13} {batch} x {seq_len:<5} {dtype:<8} {attention:<5} ckpt={ckpt!s:<5} "
              f"measured {got['total'] / 2**20:7.1f} MiB  estimate {est['peak'] / 2**20:7.1f} MiB  ratio {ratio:.3f}")
    worst = max(abs(r["ratio"] - 1) for r in rows)
    print(f"[memory] largest gap {worst:.1%} (target <= 20 %)")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"cases": rows, "largest_gap": worst}, indent=1))
    print(f"[memory] wrote {args.json}")


if __name__ == "__main__":
    main()
