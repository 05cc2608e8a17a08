"""The ten-minute benchmark's judgement, without the twenty minutes: when it refuses a ratio, and the split."""
import importlib.util
import math

from conftest import ROOT

spec = importlib.util.spec_from_file_location("bench_pretrain", ROOT / "scripts/bench_pretrain.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

STEADY = {"ours": [0.100, 0.104], "baseline": [0.080, 0.082]}


def test_steady_paces_give_a_ratio():
    assert bench.trust(STEADY, STEADY, {"ours": 0.102, "baseline": 0.081}, 0.15) is None


def test_a_slow_run_refuses_the_ratio_naming_the_recipe_and_the_paces():
    why = bench.trust(STEADY, STEADY, {"ours": 0.130, "baseline": 0.081}, 0.15)
    assert why.startswith("no ratio: the pace of ours in its run was 130.0 ms/step") and "\n" not in why


def test_a_machine_that_sped_up_afterwards_refuses_too():
    after = {"ours": [0.100, 0.101], "baseline": [0.060, 0.061]}
    why = bench.trust(STEADY, after, {"ours": 0.101, "baseline": 0.080}, 0.15)
    assert "the pace of baseline in calibration" in why and "another process" in why


def test_the_curve_is_read_in_log_bytes():
    curve = [(1e6, 3.0), (1e8, 2.0)]
    assert math.isclose(bench.at_bytes(curve, 1e7), 2.5)
    assert bench.at_bytes(curve, 1e9) is None and bench.at_bytes(curve, 1e5) is None


def test_median_pace_leaves_out_the_compiling_steps():
    assert bench.median_pace([30.0, 2.0, 1.0, 1.0, 1.0, *[0.1] * 20]) == 0.1
    assert bench.median_pace([0.3, 0.1, 0.2]) == 0.2  # too few steps to leave any out
