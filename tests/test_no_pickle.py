"No pickle-based serialization in the package: every state is safetensors tensors plus JSON."
import ast

from conftest import ROOT

BANNED_MODULES = {"pickle", "dill", "cloudpickle", "joblib"}
BANNED_CALLS = {("torch", "save"), ("torch", "load")}


def offenders(source: str, name: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [f"{name}:{node.lineno} import {a.name}" for a in node.names if a.name.split(".")[0] in BANNED_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in BANNED_MODULES:
            out.append(f"{name}:{node.lineno} from {node.module}")
        elif isinstance(node, ast.ImportFrom) and node.module == "torch" and any(a.name in ("save", "load") for a in node.names):
            out.append(f"{name}:{node.lineno} from torch import save/load")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (node.value.id, node.attr) in BANNED_CALLS:
            out.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
    return out


def test_detector_catches_each_form():
    assert offenders("import pickle", "x") and offenders("from pickle import dumps", "x")
    assert offenders("import torch\ntorch.save({}, 'f')", "x") and offenders("torch.load('f')", "x")
    assert offenders("from torch import load", "x")
    assert not offenders("import torch\ntorch.tensor([1])\nimport json", "x")


def test_package_has_no_pickle():
    files = sorted((ROOT / "enlace").rglob("*.py"))
    assert len(files) > 3
    found = [o for f in files for o in offenders(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))]
    assert not found, found
