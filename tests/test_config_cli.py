"Entry points of Stage 0a, called as users call them: python -m enlace.config / enlace.model."
import pytest
import yaml

from conftest import ROOT


def test_config_prints_yaml_and_hash(cli):
    r = cli("enlace.config", "configs/runs/smoke-cpu.yaml", "train.seed=99")
    assert r.returncode == 0, r.stderr
    body, last = r.stdout.rsplit("# config hash: ", 1)
    cfg = yaml.safe_load(body)
    assert cfg["train"]["seed"] == 99 and cfg["hardware"]["name"] == "cpu"
    assert len(last.strip()) == 16


def test_hash_is_stable_across_processes_and_changes_with_values(cli):
    h = [cli("enlace.config", "configs/runs/smoke-cpu.yaml", env={"PYTHONHASHSEED": s}).stdout.rsplit(" ", 1)[-1] for s in "12"]
    assert h[0] == h[1]
    other = cli("enlace.config", "configs/runs/smoke-cpu.yaml", "train.seed=2").stdout.rsplit(" ", 1)[-1]
    assert other != h[0]


@pytest.mark.parametrize("args, culprit", [
    (["configs/runs/smoke-cpu.yaml", "model.n_head=2"], "command line: model.n_head: unknown key (did you mean 'n_heads'?)"),
    (["configs/runs/smoke-cpu.yaml", "model.d_model=100", "model.n_heads=3"], "model.n_heads: d_model=100 is not divisible by n_heads=3"),
    (["configs/runs/smoke-cpu.yaml", "hardware=turing-2060", "hardware.dtype=bfloat16"], "hardware.dtype: bfloat16 is not allowed by hardware profile 'turing-2060'"),
    (["configs/runs/smoke-cpu.yaml", "model.vocab_size=300", "data.token_dtype=uint8"], "command line: model.vocab_size: 300 does not fit data.token_dtype=uint8"),
    (["configs/runs/missing.yaml"], "configs/runs/missing.yaml: run config not found"),
])
def test_bad_config_is_one_line_and_exit_2(cli, args, culprit):
    r = cli("enlace.config", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and culprit in lines[0], r.stderr


def test_model_cli_counts(cli):
    r = cli("enlace.model", "configs/model/tiny-50m.yaml")
    assert r.returncode == 0, r.stderr
    total = int(r.stdout.split()[1].replace(",", ""))
    assert 45e6 <= total <= 55e6
    assert "FLOPs per token" in r.stdout
    bad = cli("enlace.model", "configs/train/smoke.yaml")
    assert bad.returncode == 2 and "model.seed: unknown key" in bad.stderr


def test_every_shipped_run_config_resolves(cli):
    for run in sorted((ROOT / "configs/runs").glob("*.yaml")):
        r = cli("enlace.config", run.relative_to(ROOT))
        assert r.returncode == 0, (run, r.stderr)


RUNS = sorted((ROOT / "configs/runs").glob("*.yaml"))


@pytest.mark.parametrize("run", [r for r in RUNS if "init_from:" in r.read_text()], ids=lambda r: r.stem)
def test_a_fine_tuning_starts_from_the_run_file_that_trains_its_base(run):
    """init_from: runs/X names the folder that configs/runs/X.yaml writes (locally and on the GPU server alike), and
    that run trains the same model on the same card."""
    from enlace.config import load_config
    cfg = load_config(run)
    assert cfg.init_from.startswith("runs/"), cfg.init_from
    base_file = ROOT / "configs" / (cfg.init_from + ".yaml")
    assert base_file.is_file(), f"{run.name}: init_from {cfg.init_from} is trained by no configs/{cfg.init_from}.yaml"
    base = load_config(base_file)
    assert base.name == base_file.stem and not base.init_from
    assert cfg.model == base.model, f"{run.name}: the model differs from {base_file.name}'s"
    assert cfg.hardware.name == base.hardware.name


def test_the_gpu_path_has_its_runs():
    "Pretraining and fine-tuning for both cards of docs/remoto.md."
    from enlace.config import load_config
    for card, profile in (("2060", "turing-2060"), ("5090", "blackwell-5090")):
        pre = load_config(ROOT / f"configs/runs/pretrain-{card}.yaml")
        sft = load_config(ROOT / f"configs/runs/sft-{card}.yaml")
        assert pre.hardware.name == sft.hardware.name == profile and pre.data.source == "shards"
        assert sft.data.source == "assistant" and sft.init_from == f"runs/pretrain-{card}"
        assert not sft.hardware.compile  # micro-batches of changing lengths would recompile


def test_init_from_is_overridden_like_any_key(cli, tmp_path):
    "The base of a fine-tuning comes from the command line too: a run fetched from the server, a model file."
    r = cli("enlace.config", "configs/runs/sft-2060.yaml", "init_from=runs/remote/pretrain-2060")
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout.rsplit("# config hash: ", 1)[0])["init_from"] == "runs/remote/pretrain-2060"
    # the trainer takes the same override (hardware=cpu: no GPU needed to see where it looks for the base)
    base = tmp_path / "base folder" / "model-x.safetensors"
    r = cli("enlace.train", "configs/runs/sft-2060.yaml", f"init_from={base}", "hardware=cpu",
            "--out", tmp_path / "out", "--no-progress")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == f"error: {base}: model file not found", r.stderr


LOUD = "def main(argv):\n    for i in range(200000):\n        print('line', i)\n    return 0\n"


@pytest.mark.parametrize("wrapped", [True, False])
def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(wrapped):
    "`python -m enlace.X ... | head -1`: with run_cli (every CLI's __main__) the output is cut and nothing is printed."
    import subprocess, sys
    call = "run_cli(main)" if wrapped else "main(None)"
    code = f"from enlace.common import run_cli\n{LOUD}raise SystemExit({call})"
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()  # what `head -1` does once it has its line
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert first == b"line 0\n"
    assert ("BrokenPipeError" in err) is not wrapped, err
