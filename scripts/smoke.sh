#!/usr/bin/env bash
# The main job on the embedded default: train the smoke model on the conjugation corpus on the CPU, through
# the run notebook (papermill). Output: runs/smoke-cpu/ (metrics.jsonl, checkpoints/, config.yaml) and the
# executed notebook runs/smoke-cpu/report.ipynb. Re-running resumes; extra args go to papermill
# (e.g. scripts/smoke.sh -p fresh True).
source "$(dirname "$0")/_venv.sh"
mkdir -p runs/smoke-cpu
papermill nbs/train.ipynb runs/smoke-cpu/report.ipynb --log-output -p hardware cpu -p run configs/runs/smoke-cpu.yaml "$@"
python -m enlace.track runs/smoke-cpu runs/smoke-cpu/report.ipynb  # attaches the report to the mlflow run, if any
echo "[smoke] report: runs/smoke-cpu/report.ipynb  summary: runs/smoke-cpu/summary.json  metrics: runs/smoke-cpu/metrics.jsonl"
