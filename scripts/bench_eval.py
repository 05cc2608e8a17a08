"""Benchmark and cross-check of the evaluation card (enlace.eval) on a model file.

Times each task of the card on this machine (model already loaded; the XStoryCloze-es target: the 359 dev stories
in under a minute on 2 CPU cores for the pretrain-cpu model), prints the card with the chance levels, and with
--harness exports the model to transformers (enlace.export) and runs lm-evaluation-harness on the shipped task
(configs/eval/xstorycloze_es_local.yaml, the same TSV) to compare accuracies (target: within 0.5 points). Usage:
    .venv/bin/python scripts/bench_eval.py [--model runs/bench/ours] [--harness] [--json runs/bench/eval.json]
"""
import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch
import yaml

from enlace.checkpoint import load_model
from enlace.eval import STORIES, TASKS, card_rows, data_path, default_tasks

ROOT = Path(__file__).resolve().parent.parent


def harness(model_path, stories: str) -> dict:
    "lm_eval --model hf on the export of `model_path`, with the shipped task pointed at `stories`."
    import lm_eval
    from lm_eval.tasks import TaskManager

    from enlace.export import export

    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as d:
        export(model_path, Path(d) / "hf", log=lambda m: None)
        task = yaml.safe_load((ROOT / "configs/eval/xstorycloze_es_local.yaml").read_text())
        task["dataset_kwargs"]["data_files"]["validation"] = str(Path(stories).resolve())
        (Path(d) / "tasks").mkdir()
        (Path(d) / "tasks" / "t.yaml").write_text(yaml.safe_dump(task))
        t0 = time.perf_counter()
        out = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={Path(d) / 'hf'},dtype=float32",
            tasks=[task["task"]],
            task_manager=TaskManager(include_path=str(Path(d) / "tasks")),
            device="cpu",
            batch_size=32,
        )
        res = out["results"][task["task"]]
        return {"acc": res["acc,none"], "acc_norm": res["acc_norm,none"], "seconds": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="runs/bench/ours", help="model file or run folder")
    ap.add_argument("--harness", action="store_true", help="cross-check XStoryCloze-es with lm-evaluation-harness")
    ap.add_argument("--json", default="runs/bench/eval.json")
    args = ap.parse_args()
    model, tok, man = load_model(args.model)
    result, seconds = {}, {}
    for name, path in default_tasks(man):
        t0 = time.perf_counter()
        result[name] = TASKS[name](model, tok, man, path)
        seconds[name] = time.perf_counter() - t0
        print(f"[eval] {name}: {seconds[name]:.1f} s")
    for row in card_rows(result):
        chance = f"  (chance {row['chance']:.2f})" if row["chance"] is not None else ""
        print(f"{row['task']:<14} {row['metric']:<36} {row['value']:.4f}{chance}")
    out = {
        "model": str(args.model),
        "machine": {"cpus": os.cpu_count(), "threads": torch.get_num_threads(), "platform": platform.platform()},
        "card": result,
        "seconds": seconds,
    }
    if "xstorycloze" in result:
        n = result["xstorycloze"]["n"]
        print(f"[eval] xstorycloze: {n} stories in {seconds['xstorycloze']:.1f} s (target < 60 s)")
    if args.harness and not data_path(STORIES).is_file():
        print(f"[eval] no {STORIES} here: no cross-check with lm-evaluation-harness")
    elif args.harness:
        h = harness(args.model, data_path(STORIES))
        ours = result["xstorycloze"]
        gap = max(abs(h["acc"] - ours["acc"]), abs(h["acc_norm"] - ours["acc_norm"])) * 100
        out["harness"] = {**h, "max_gap_points": gap}
        print(f"[eval] lm-eval: acc {h['acc']:.4f} acc_norm {h['acc_norm']:.4f} ({h['seconds']:.1f} s); "
              f"largest gap to enlace.eval {gap:.2f} points (target <= 0.5)")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"[eval] wrote {args.json}")


if __name__ == "__main__":
    main()
