#!/usr/bin/env bash
# The main job on the embedded default. Until the trainer lands (Stage 0b) it is the model smoke check:
# resolve the smoke config, validate the CPU profile, count parameters, run forward/backward and generate.
source "$(dirname "$0")/_venv.sh"
python -m enlace.config configs/runs/smoke-cpu.yaml
python -m enlace.model configs/runs/smoke-cpu.yaml
python - <<'PY'
import torch
from enlace.config.schema import load_config
from enlace.model.transformer import Transformer, generate, lm_loss
from enlace.train import backends
cfg = load_config("configs/runs/smoke-cpu.yaml")
device, _ = backends.setup(cfg.hardware)
torch.manual_seed(cfg.train.seed)
model = Transformer(cfg.model).to(device)
idx = torch.randint(0, cfg.model.vocab_size, (2, cfg.train.seq_len + 1), device=device)
with backends.attention_kernel(cfg.hardware), backends.autocast(cfg.hardware):
    out = lm_loss(model(idx[:, :-1]), idx[:, 1:])
(out["ce"] / out["n"]).backward()
print(f"smoke: device={device} loss={out['ce'].item() / out['n'].item():.3f} (ln 256 = 5.545)")
print("smoke: generated", generate(model, idx[:, :4], 8, temperature=0).shape)
PY
