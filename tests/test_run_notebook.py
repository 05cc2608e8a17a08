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
    assert "HardwareError: hardware profile 'turing-2060' needs a CUDA GPU but none is visible" in r.stdout + r.stderr
    assert not (ROOT / "runs/smoke-cpu-turing-2060").exists()
