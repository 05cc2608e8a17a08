"""Benchmark: our pretraining recipe vs a nanoGPT-style recipe, same text, same wall-clock budget, same run.

Ours: configs/runs/pretrain-cpu.yaml (our BPE tokenizer, modern block, WSD), trained by enlace.train.
Baseline: nanoGPT's recipe (GPT-2 block with learned positions, tied head and nanoGPT's init; AdamW with
betas (0.9, 0.99); warmup + cosine to lr/10; random windows of byte tokens), in this file. Both get the same
training seconds (`--budget`, eval and checkpoints included for ours) and the same autocast dtype (the
hardware profile of ours), and both are scored with enlace.bpb on the same held-out novel (cleaned as the
training text is, and also as the raw file) and on the val split of the same cleaned corpus, in bits per
UTF-8 byte. Ours compiles (`hardware.compile: true` in its run file) and uses fused AdamW; the baseline runs
eager with the default AdamW, as nanoGPT does on a CPU (its README says `--compile=False` there, and it fuses
AdamW only on CUDA).

Trustworthy on a shared machine: before and after the two runs, both recipes train a short slice
(`--calibration-steps`, default 150 steps) in turn, ours, baseline, ours, baseline, and each run's own median
step is compared with its slices. When any pace of a recipe is more than `--tolerance` (15 %) from its median,
another process was probably competing for the cores: the figures are printed and written, but the ratio is
refused in one line (JSON `"ratio": null`, `"refused"`) and the exit status is 1. The paces go into the JSON.
It also reports ours' median MFU and splits the gain into throughput and sample efficiency: ours' val
bits/byte read off its curve at the bytes of text the baseline saw, against both final figures.

Needs the shards of scripts/prepare_smoke_data.sh; the ten-minute record trains on 123 MB, so that ten
minutes never repeat text: `--from ../shared/corpus/es --from ../shared/corpus/es-extra --vocab 4096 --out
data/shards/es-4k`. The byte shards for the baseline are made from the same raw folder on first use.
Prints a table and writes JSON:
    .venv/bin/python scripts/bench_pretrain.py [KEY=VALUE...] [--budget 600] [--out runs/bench/pretrain-vs-baseline.json]
"""
import argparse, functools, json, math, statistics, sys, tempfile, time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import GPT2  # noqa: E402  (the GPT-2 block shared with bench_model.py)

from enlace.config import TrainConfig, load_config
from enlace.shards import open_shards
from enlace.prepare import PrepareError, prepare
from enlace.bpb import bits_per_byte, read_text, score_file
from enlace.checkpoint import load_model
from enlace.report import finish_run
from enlace.tokenizer import MIN_VOCAB, Tokenizer
from enlace import backends
from enlace.model import flops_per_token
from enlace.train import lr_at, plan_steps, train

ROOT = Path(__file__).resolve().parent.parent

# nanoGPT's char-level recipe (config/train_shakespeare_char.py) at the size its README suggests for CPUs,
# widened a little; lengths in steps are re-planned from the time budget like ours.
BASELINE = {"n_layer": 4, "n_head": 4, "n_embd": 256, "block_size": 128, "batch_size": 16, "dropout": 0.0,
            "lr": 2e-3, "min_lr": 2e-4, "warmup_iters": 100, "betas": [0.9, 0.99], "weight_decay": 0.1, "grad_clip": 1.0}


def nanogpt_init(model: GPT2, n_layer: int) -> GPT2:
    "nanoGPT's init: N(0, 0.02) weights, zero biases, residual projections scaled by 1/sqrt(2 n_layer)."
    for name, p in model.named_parameters():
        if name.endswith("bias"): nn.init.zeros_(p)
        elif p.dim() == 2: nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02)
    return model


@functools.cache
def flat_tokens(folder: Path, split: str) -> np.ndarray:
    "All tokens of a split as one array (nanoGPT trains on random windows of one long stream)."
    return np.concatenate([np.asarray(s) for s in open_shards(folder, split)]).astype(np.int64)


def train_baseline(data: Path, budget: float | None, hw, seed: int = 1337, max_steps: int | None = None,
                   log=print) -> tuple[GPT2, dict]:
    "nanoGPT's training loop on byte shards for `budget` seconds (or `max_steps` steps); returns the model and a summary."
    b = BASELINE
    torch.manual_seed(seed)
    train_ids = torch.from_numpy(flat_tokens(data, "train"))
    vocab = json.loads((data / "manifest.json").read_text())["vocab_size"]
    model = nanogpt_init(GPT2(vocab, b["n_embd"], b["n_layer"], b["n_head"], b["block_size"], 4 * b["n_embd"]), b["n_layer"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": b["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=b["lr"], betas=tuple(b["betas"]))
    # the schedule is expressed with our TrainConfig so that both recipes plan their length the same way
    t = TrainConfig(seed=seed, max_steps=max_steps or 10**6, time_budget_s=budget, seq_len=b["block_size"],
                    batch_size=b["batch_size"], lr=b["lr"], min_lr_ratio=b["min_lr"] / b["lr"], schedule="cosine",
                    warmup_steps=min(b["warmup_iters"], (max_steps or 10**6) // 2), decay_frac=0.5, decay_shape="cosine",
                    weight_decay=b["weight_decay"], betas=tuple(b["betas"]), eps=1e-8, grad_clip=b["grad_clip"], z_loss=0.0,
                    eval_every=10**6, eval_batches=1, ckpt_every=10**6, keep_last=1, log_every=100)
    g = torch.Generator().manual_seed(seed)
    step, total, t0, loss, step_s = 0, t.max_steps, time.perf_counter(), float("nan"), []
    while step < total and (budget is None or time.perf_counter() - t0 < budget):
        t1 = time.perf_counter()
        ix = torch.randint(len(train_ids) - b["block_size"] - 1, (b["batch_size"],), generator=g)
        x = torch.stack([train_ids[i:i + b["block_size"]] for i in ix])
        y = torch.stack([train_ids[i + 1:i + 1 + b["block_size"]] for i in ix])
        for group in opt.param_groups: group["lr"] = lr_at(step, t, total)
        with backends.autocast(hw):
            loss = F.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), b["grad_clip"])
        opt.step(); opt.zero_grad(set_to_none=True)
        step += 1
        step_s.append(time.perf_counter() - t1)
        if budget is not None: total = plan_steps(step, time.perf_counter() - t0, t, total)
        if step % 200 == 0: log(f"baseline step {step}/{total}: loss {loss.item():.4f} ({loss.item() / math.log(2):.3f} bits/byte)")
    return model.eval(), {"steps": step, "tokens": step * b["batch_size"] * b["block_size"], "seconds": time.perf_counter() - t0,
                          "train_loss": loss.item(), "step_s": median_pace(step_s)}


def median_pace(step_s: list, skip: int = 5) -> float:
    "Median seconds per step, leaving out the first `skip` steps (compilation, warm-up)."
    return statistics.median(step_s[skip:] if len(step_s) > 2 * skip else step_s)


def run_metrics(run_dir: Path) -> list:
    "The per-step records of a run of ours (its metrics.jsonl)."
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def run_pace(run_dir: Path) -> float:
    "Median training step of a run of ours (evaluation steps left out)."
    return median_pace([r["step_s"] for r in run_metrics(run_dir) if "val_loss" not in r])


def calibrate(cfg, bytes_data: Path, steps: int, rounds: int, seed: int) -> dict:
    "Paces (median s/step) of both recipes in `rounds` interleaved slices of `steps` steps (ours, baseline, ...); peaks."
    slice_cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={
        "max_steps": steps, "time_budget_s": None, "warmup_steps": min(cfg.train.warmup_steps, steps // 4),
        "eval_every": 10**6, "ckpt_every": 10**6, "keep_last": 1})})
    paces = {"ours": [], "baseline": [], "peak_flops": []}  # and the matmul peak of the moment, for the MFU
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            train(slice_cfg, Path(tmp) / "ours", fresh=True, progress=False, log=lambda m: None)
            paces["ours"].append(run_pace(Path(tmp) / "ours"))
            paces["baseline"].append(train_baseline(bytes_data, None, cfg.hardware, seed, max_steps=steps, log=lambda m: None)[1]["step_s"])
            paces["peak_flops"].append(backends.measure_matmul_flops(getattr(torch, cfg.hardware.dtype), seconds=1.0))
    return paces


def trust(before: dict, after: dict, run: dict, tolerance: float) -> str | None:
    "None when every pace of each recipe is within `tolerance` of its median; else one line saying which moved."
    for who in ("ours", "baseline"):  # (the matmul peaks ride along; they are not judged)
        paces = {**{f"calibration {i + 1}": p for i, p in enumerate(before[who] + after[who])}, "its run": run[who]}
        mid = statistics.median(paces.values())
        for what, p in paces.items():
            if abs(p / mid - 1) > tolerance:
                return (f"no ratio: the pace of {who} in {what} was {1000 * p:.1f} ms/step against a median of {1000 * mid:.1f} "
                        f"(more than {tolerance:.0%} apart): the machine's pace moved, probably another process on the same "
                        "cores; stop it and rerun")
    return None


def bytes_curve(run_dir: Path, bytes_per_token: float) -> list:
    "Ours' (bytes of text seen, val bits/byte) at each evaluation of its run."
    return [(r["tokens"] * bytes_per_token, r["val_bpb"]) for r in run_metrics(run_dir) if r.get("val_bpb") is not None]


def at_bytes(curve: list, n: float) -> float | None:
    "Ours' val bits/byte after `n` bytes of text, interpolated in log(bytes); None outside the curve."
    for (b0, v0), (b1, v1) in zip(curve, curve[1:]):
        if b0 <= n <= b1:
            return v0 + (v1 - v0) * (math.log(n) - math.log(b0)) / (math.log(b1) - math.log(b0))
    return None


def val_bpb(forward, data: Path, window: int) -> float:
    "Bits per byte of the val split (documents separated by <|eos|>) scored in windows."
    man = json.loads((data / "manifest.json").read_text())
    return bits_per_byte(forward, flat_tokens(data, "val").tolist(), man["splits"]["val"]["bytes"], window)["bpb"]


def heldout_bpb(forward, tok, files: list, window: int, raw: bool) -> float:
    "Bits per byte over all held-out files, each scored as one text (cleaned as for training unless `raw`)."
    rs = [score_file(forward, {}, tok, p, window, raw=raw) for p in files]
    return sum(r["bits"] for r in rs) / sum(r["bytes"] for r in rs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("overrides", nargs="*", help="dotted overrides of our run, e.g. model.d_model=256")
    ap.add_argument("--budget", type=float, default=600.0, help="training seconds for each recipe")
    ap.add_argument("--run", default="configs/runs/pretrain-cpu.yaml", help="our run file")
    ap.add_argument("--raw", default="data/raw/es", help="raw text both shard folders are made from")
    ap.add_argument("--bytes-data", default="data/shards/es-bytes", help="byte shards for the baseline (made if missing)")
    ap.add_argument("--heldout", nargs="+", default=None, help="held-out text files (default data/heldout/*.txt)")
    ap.add_argument("--calibration-steps", type=int, default=150, help="steps per calibration slice (0: no calibration)")
    ap.add_argument("--tolerance", type=float, default=0.15, help="largest pace difference that still gives a ratio")
    ap.add_argument("--out", default="runs/bench/pretrain-vs-baseline.json")
    a = ap.parse_args()
    cfg = load_config(ROOT / a.run, [*a.overrides, f"train.time_budget_s={a.budget}"])
    ours_data, raw_dir, bytes_data = ROOT / cfg.data.path, ROOT / a.raw, ROOT / a.bytes_data
    heldout = [Path(p) for p in a.heldout] if a.heldout else sorted((ROOT / "data/heldout").glob("*.txt"))
    if not (ours_data / "manifest.json").is_file() or not raw_dir.is_dir() or not heldout:
        sys.exit(f"error: no shards in {ours_data}, raw text in {raw_dir} or held-out text in data/heldout; "
                 f"run scripts/prepare_smoke_data.sh --from ../shared/corpus/es --from ../shared/corpus/es-extra "
                 f"--vocab {cfg.model.vocab_size} --out {cfg.data.path} first")
    for p in heldout: read_text(p)  # an unreadable held-out file fails now, not after 20 minutes
    try: prepare([str(raw_dir)], bytes_data, train_vocab=MIN_VOCAB, progress=False, log=lambda m: None)  # resumable: free once done
    except PrepareError as e: sys.exit(f"error: {e}")
    backends.setup(cfg.hardware)  # a profile this machine cannot honour stops here, before any training
    calib = a.calibration_steps > 0
    if calib:
        print(f"calibration: {a.calibration_steps} steps of each recipe, twice, interleaved ...", flush=True)
        before = calibrate(cfg, bytes_data, a.calibration_steps, 2, cfg.train.seed)

    print(f"ours: {cfg.name} for {a.budget:.0f} s ...", flush=True)
    run_dir = ROOT / "runs/bench/ours"
    summary = train(cfg, run_dir, fresh=True, progress=False, log=lambda m: None)
    # the one door out of a run, as for the CLI and the run notebook: model file, held-out bpb, samples, summary.json
    report = finish_run(run_dir, cfg, summary.tokenizer, heldout=heldout, tracking=False, log=lambda m: None)
    path = report["model_file"]
    model, tok, man = load_model(path)
    ours = {False: sum(r["bits"] for r in report["heldout"]) / sum(r["bytes"] for r in report["heldout"]),
            True: heldout_bpb(model, tok, heldout, cfg.train.seq_len, raw=True)}
    ours_val = val_bpb(model, ours_data, cfg.train.seq_len)

    print(f"baseline: nanoGPT-style on bytes for {a.budget:.0f} s ...", flush=True)
    base_model, bsum = train_baseline(bytes_data, a.budget, cfg.hardware, cfg.train.seed, log=lambda m: print(m, flush=True))
    w = BASELINE["block_size"]
    base_tok = Tokenizer.load(bytes_data / "tokenizer")  # 256 byte symbols + our specials, no merges
    base = {raw: heldout_bpb(base_model, base_tok, heldout, w, raw) for raw in (False, True)}
    base_val = val_bpb(base_model, bytes_data, w)
    paces = {"ours": {"run": run_pace(run_dir)}, "baseline": {"run": bsum["step_s"]}}
    refused, peak, mfu_now = None, None, None
    if calib:
        print("calibration again ...", flush=True)
        after = calibrate(cfg, bytes_data, a.calibration_steps, 2, cfg.train.seed)
        for who in ("ours", "baseline"): paces[who].update(before=before[who], after=after[who])
        refused = trust(before, after, {k: v["run"] for k, v in paces.items()}, a.tolerance)
        # MFU against the matmul peak measured beside the runs (the trainer's cached peak may be a faster day's)
        peak = statistics.median(before["peak_flops"] + after["peak_flops"])
        fpt = flops_per_token(cfg.model, cfg.train.seq_len)
        mfu_now = fpt * cfg.train.batch_size * cfg.train.seq_len / paces["ours"]["run"] / peak

    # throughput vs sample efficiency: ours' val curve read at the bytes of text the baseline saw in its budget
    bpt = json.loads((ours_data / "manifest.json").read_text())["bytes_per_token"]
    ours_bytes = summary.tokens * bpt
    same_text = at_bytes(bytes_curve(run_dir, bpt), bsum["tokens"])
    split = {"ours_text_bytes": ours_bytes, "baseline_text_bytes": bsum["tokens"], "ours_val_at_baseline_bytes": same_text,
             "sample_efficiency_bpb": None if same_text is None else base_val - same_text,
             "throughput_bpb": None if same_text is None else same_text - ours_val}
    ok = refused is None
    res = {"budget_s": a.budget, "heldout": [str(p) for p in heldout], "trusted": ok, "refused": refused, "paces_s": paces,
           "tolerance": a.tolerance, "ours_bpb": ours[False], "baseline_bpb": base[False], "ours_val_bpb": ours_val,
           "baseline_val_bpb": base_val, "ratio": ours[False] / base[False] if ok else None,
           "val_ratio": ours_val / base_val if ok else None, "ours_bpb_raw": ours[True], "baseline_bpb_raw": base[True],
           "ratio_raw": ours[True] / base[True] if ok else None, "split": split,
           "ours": {"config": cfg.model_dump(mode="json"), "model_file": str(path), "steps": summary.step,
                    "tokens": summary.tokens, "train_seconds": summary.elapsed_s, "mfu": run_mfu(run_dir),
                    "mfu_measured_peak": mfu_now, "peak_flops": peak},
           "baseline": {"config": BASELINE, "vocab": "bytes", "dtype": cfg.hardware.dtype, **bsum},
           "torch": torch.__version__, "threads": torch.get_num_threads()}
    print(f"\n{'':10} {'held-out bpb':>13} {'(raw file)':>11} {'val bpb':>9} {'steps':>7} {'tokens':>11} {'ms/step':>8}")
    print(f"{'ours':10} {ours[False]:13.4f} {ours[True]:11.4f} {ours_val:9.4f} {summary.step:7d} {summary.tokens:11,} "
          f"{1000 * paces['ours']['run']:8.1f}")
    print(f"{'baseline':10} {base[False]:13.4f} {base[True]:11.4f} {base_val:9.4f} {bsum['steps']:7d} {bsum['tokens']:11,} "
          f"{1000 * paces['baseline']['run']:8.1f}")
    if calib:
        for who in paces:
            print(f"pace of {who} (ms/step): calibration before {', '.join(f'{1000 * p:.1f}' for p in paces[who]['before'])}; "
                  f"run {1000 * paces[who]['run']:.1f}; after {', '.join(f'{1000 * p:.1f}' for p in paces[who]['after'])}")
    print(f"ours: median MFU {res['ours']['mfu']:.0%} of the trainer's cached {cfg.hardware.dtype} matmul peak"
          + (f", {mfu_now:.0%} of the {peak / 1e9:.0f} GFLOP/s measured beside the runs" if mfu_now else ""))
    if same_text is not None:
        print(f"split: ours saw {ours_bytes / 1e6:.1f} MB of text, the baseline {bsum['tokens'] / 1e6:.1f} MB; at the baseline's "
              f"{bsum['tokens'] / 1e6:.1f} MB ours was at {same_text:.3f} val bits/byte: sample efficiency "
              f"{split['sample_efficiency_bpb']:.3f}, throughput {split['throughput_bpb']:.3f} bits/byte of the gap")
    if ok:
        print(f"ratio ours/baseline: {res['ratio']:.3f} held-out ({res['ratio_raw']:.3f} raw), {res['val_ratio']:.3f} val "
              f"(target <= 0.75); ours {res['ours_bpb']:.3f} bits/byte on the held-out novel")
    else:
        print(refused)
    out = ROOT / a.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")
    return 0 if ok else 1


def run_mfu(run_dir: Path) -> float:
    "Median MFU of ours' training steps (the trainer's figure: against this machine's measured matmul peak)."
    return statistics.median(r["mfu"] for r in run_metrics(run_dir)[5:] if r.get("mfu") and "val_loss" not in r)


if __name__ == "__main__":
    sys.exit(main())
