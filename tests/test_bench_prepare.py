"""The prepare benchmark's arithmetic: Amdahl's serial fraction from the 1- and 2-core runs, and the projection."""
import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("bench_prepare", ROOT / "scripts/bench_prepare.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.parametrize("serial", [0.0, 0.07, 0.3, 1.0])
def test_the_serial_fraction_is_recovered_from_the_speedup_it_gives(serial):
    speedup = 1 / (serial + (1 - serial) / 2)
    assert bench.amdahl(speedup) == pytest.approx(serial)
    assert bench.projected(2.0, serial, 2) == pytest.approx(2.0 * speedup)


def test_perfect_scaling_projects_linearly_and_no_scaling_stays_flat():
    assert bench.projected(1.5, 0.0, 16) == pytest.approx(24.0)
    assert bench.projected(1.5, 1.0, 16) == pytest.approx(1.5)


def test_a_missing_corpus_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "prepare.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts/bench_prepare.py"), str(tmp_path / "nope"), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nope does not exist" in r.stderr
    assert not out.exists()


def test_the_pace_slice_is_a_fixed_prefix_of_the_training_documents(tmp_path):
    (tmp_path / "clean").mkdir()
    docs = [f"documento {i} " * 20 for i in range(50)]
    (tmp_path / "clean" / "train_000000.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    got = bench.pace_texts(tmp_path, limit=1000)
    assert got == docs[: len(got)] and sum(len(d) for d in got[:-1]) < 1000 <= sum(len(d) for d in got)
