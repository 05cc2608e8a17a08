"The run notebook under papermill, as documented: on a machine without the profile's GPU it stops at once."
import subprocess
import sys

import pytest
import torch

from conftest import ROOT


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present")
def test_gpu_profile_fails_at_first_cell_with_backend_message(tmp_path):
    out = tmp_path / "out.ipynb"
    r = subprocess.run([sys.executable, "-m", "papermill", "nbs/train.ipynb", str(out), "-p", "hardware", "turing-2060"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    # the one clear line comes last, without the traceback through the backend's code (papermill's own header stays)
    last = (r.stdout + r.stderr).strip().splitlines()[-1]
    assert last.startswith("SystemExit: error: hardware profile 'turing-2060' needs a CUDA GPU but none is visible"), last
    assert "backends.py" not in r.stdout + r.stderr and "HardwareError" not in r.stdout + r.stderr
    assert not (ROOT / "runs/smoke-cpu-turing-2060").exists()  # no folder, so no lock file either


def test_papermill_lists_every_parameter():
    r = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", "nbs/train.ipynb"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("hardware", "run", "overrides", "out", "fresh", "tiny"):
        assert f"  {name}:" in r.stdout, (name, r.stdout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present")
@pytest.mark.parametrize("overrides", ['["train.seed=7", "train.lr=1e-3"]', "train.seed=7 train.lr=1e-3"])
def test_documented_overrides_forms_are_understood(tmp_path, overrides):
    "The README's `-p overrides '[\"train.seed=7\"]'` (and the space-separated form) reach load_config as a list."
    r = subprocess.run([sys.executable, "-m", "papermill", "nbs/train.ipynb", str(tmp_path / "out.ipynb"),
                        "-p", "hardware", "turing-2060", "-p", "overrides", overrides],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert "overrides look like key=value" not in out and "Passed unknown parameter" not in out, out[-2000:]
    assert "error: hardware profile 'turing-2060' needs a CUDA GPU" in out  # parsed, then stopped at the board
