"python -m enlace.tasks.conjugations.evaluate MODEL_FILE: the report's figures recomputed from a model file."
import json

import torch

from enlace.config import load_layer
from enlace.tasks.conjugations.corpus import TENSES
from enlace.checkpoint import export_model
from enlace.tokenizer import Tokenizer
from enlace.model import Transformer

from conftest import ROOT


def make_model_file(tmp_path):
    torch.manual_seed(0)
    model = Transformer(load_layer(ROOT / "configs/model/smoke.yaml", "model"))
    return export_model(model, tmp_path, Tokenizer.bytes())


def test_recomputes_summary_figures(tmp_path, cli):
    path = make_model_file(tmp_path)
    r = cli("enlace.tasks.conjugations.evaluate", path, "--split", "heldout")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    h = res["heldout"]
    assert res["model_file"] == str(path)
    for who in ("model", "ngram"):
        assert 0.0 <= h[who]["exact_match"] <= 1.0
        assert h[who]["ppl"] > 1.0
        assert abs(h[who]["ppl"] - 2 ** h[who]["bpb"]) < 1e-9 * h[who]["ppl"]
        assert set(h[who]["by_tense"]) == set(TENSES)
        assert set(h[who]["by_group"]) == {"regular", "spelling", "irregular"}
        assert sum(v["n"] for v in h[who]["by_tense"].values()) == h[who]["n"] > 1000
    # an untrained transformer is close to uniform over bytes; the n-gram baseline is far better
    assert h["model"]["ppl"] > 100 > 3 > h["ngram"]["ppl"]
    assert 2 <= h["ngram"]["order"] <= 10
    assert "exact match" in r.stderr


def test_bad_model_file_is_one_line_exit_2(tmp_path, cli):
    r = cli("enlace.tasks.conjugations.evaluate", tmp_path / "model-000000000000.safetensors")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "model file not found" in r.stderr
    path = make_model_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-4])
    r = cli("enlace.tasks.conjugations.evaluate", path)
    assert r.returncode == 2 and "content does not match its sha256" in r.stderr
