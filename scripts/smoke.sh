#!/usr/bin/env bash
# The main job on the embedded default, through the run notebook (papermill), on the CPU:
#   1. the smoke model learns the embedded conjugation corpus -> runs/smoke-cpu/ (its report: report.ipynb)
#   2. it becomes an assistant: fine-tuned on the embedded assistant task -> runs/sft-smoke-cpu/ (report.ipynb,
#      summary.json with the held-out tool-choice figures, transcript.md; chat: python -m enlace.chat runs/sft-smoke-cpu)
# Re-running resumes; extra args go to both papermill calls (e.g. scripts/smoke.sh -p fresh True).
source "$(dirname "$0")/_venv.sh"
set -e
for run in smoke-cpu sft-smoke-cpu; do
    mkdir -p "runs/$run"
    papermill nbs/train.ipynb "runs/$run/report.ipynb" --log-output -p hardware cpu -p run "configs/runs/$run.yaml" "$@"
    python -m enlace.track "runs/$run" "runs/$run/report.ipynb"  # attaches the report to the mlflow run, if any
done
echo "[smoke] base: runs/smoke-cpu/report.ipynb  assistant: runs/sft-smoke-cpu/report.ipynb, runs/sft-smoke-cpu/summary.json"
echo "[smoke] talk to it: .venv/bin/python -m enlace.chat runs/sft-smoke-cpu"
