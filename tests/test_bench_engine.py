"""scripts/bench_engine.py on a trained model file: the cached decode gives the recomputation's tokens, the JSON
holds every context, the KV bytes per token of the model, and an exit status that follows the 5x target."""
import json
import subprocess
import sys

import torch

from enlace.checkpoint import export_model
from enlace.config import load_layer
from enlace.model import Transformer
from enlace.tokenizer import Tokenizer

from conftest import ROOT


def test_a_model_file_is_measured_and_the_target_decides_the_exit_status(tmp_path):
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model")
    model_file = export_model(Transformer(cfg), tmp_path / "m", Tokenizer.bytes())
    out = tmp_path / "engine.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts/bench_engine.py"), "--model", str(model_file),
                        "--contexts", "8,48", "--new", "4", "--repeats", "1", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    got = json.loads(out.read_text())
    assert got["trained"] and [row["context"] for row in got["rows"]] == [8, 48]
    assert got["kv_bytes_per_token"] == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4  # k and v in float32
    assert got["target_met"] == (got["rows"][-1]["speedup"] >= 5.0)
    assert r.returncode == (0 if got["target_met"] else 1), r.stderr
    verdict = r.stdout.strip().splitlines()[-1]
    assert verdict.startswith("the KV cache decodes") and verdict.endswith("met"), r.stdout
