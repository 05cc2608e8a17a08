#!/usr/bin/env python3
"""The service's overhead and its behaviour under load, on this machine.

1. Time to first token and tokens/s of the same greedy answer, through the API (a `python -m enlace.serve`
   process, the official `openai` client, stream) and through `enlace.chat.answer` called directly; interleaved
   runs, medians, and the ratio (target: the service costs at most 10 %).
2. 100 sequential API requests and 20 concurrent ones (each queued or refused with 429), each also saving a
   memory: no other status, and every memory is there at the end.

    .venv/bin/python scripts/bench_serve.py [MODEL] [--runs 10] [--max-tokens 200] [--json runs/bench/serve.json]

MODEL defaults to the smoke assistant (runs/sft-smoke-cpu, made by scripts/smoke.sh), else a random smoke model.
Run it on an otherwise idle machine: a second busy torch process makes every figure meaningless. This script
itself is a second torch process next to the server: it sets OMP_WAIT_POLICY=PASSIVE for both (unless set), else
the OpenMP threads of whichever process ran last spin for a while and slow the other (measured: +37 % instead
of +6 % on 2 cores; docs/LOG.md).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP threads; the server inherits it

import httpx
import openai
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from enlace.chat import Ask, answer  # noqa: E402
from enlace.checkpoint import export_model, load_model  # noqa: E402
from enlace.config import load_layer  # noqa: E402
from enlace.engine import Engine, Sampling  # noqa: E402
from enlace.household import Household  # noqa: E402
from enlace.model import Transformer  # noqa: E402
from enlace.tokenizer import Tokenizer  # noqa: E402
from enlace.tools import ToolContext  # noqa: E402

# requests of the assistant evaluation's transcript: short answers, tool calls, longer answers
PROMPTS = ("hola", "¿cuánto es 12 por 7?", "¿qué hay en la lista de la compra?", "¿qué hora es?",
           "dame un consejo para estudiar", "¿cuál era la clave del wifi?")
MESSAGES = [{"role": "user", "content": PROMPTS[0]}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def direct(engine, tok, home, prompt: str, max_tokens: int) -> dict:
    "One greedy answer through enlace.chat.answer: seconds to the first text, total seconds, tokens."
    start, first = time.perf_counter(), []
    ask = Ask([{"role": "user", "content": prompt}], ToolContext(home=home), Sampling(max_tokens=max_tokens),
              on_text=lambda p: first or first.append(time.perf_counter()))
    out = answer(engine, ask)
    end = time.perf_counter()
    return {"ttft": (first[0] if first else end) - start, "total": end - start, "tokens": out.completion_tokens}


def through_api(client, name: str, prompt: str, max_tokens: int, url: str = "") -> dict:
    "The same answer streamed through the service."
    start, first, usage, text = time.perf_counter(), None, None, []
    messages = [{"role": "user", "content": prompt}]
    for chunk in client.chat.completions.create(model=name, messages=messages, max_tokens=max_tokens, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter()
            text.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    end = time.perf_counter()
    server = httpx.get(f"{url}/health").json()["last"]["seconds"] if url else None  # the worker's own time
    return {"ttft": (first or end) - start, "total": end - start, "tokens": usage, "text": "".join(text), "server": server}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=None)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--json", default=str(ROOT / "runs/bench/serve.json"))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="enlace-bench-serve-"))
    model_path = a.model or (ROOT / "runs/sft-smoke-cpu" if (ROOT / "runs/sft-smoke-cpu").is_dir() else None)
    if model_path is None:
        torch.manual_seed(0)
        model_path = export_model(Transformer(load_layer(ROOT / "configs/model/smoke.yaml", "model")), tmp,
                                  Tokenizer.bytes())
    model, tok, _ = load_model(model_path)
    engine = Engine(model, tok)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "enlace.serve", str(model_path), "--state", str(tmp / "state"),
                               "--port", str(port), "--person", "ana"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                    break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit(f"the server did not start: {server.stderr.read()}")
                time.sleep(0.1)
        name = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=120)
        # --- 1. overhead: each prompt both ways, interleaved, after one warm-up; both on a household on disk ---
        home = Household.open(tmp / "direct")
        for p in PROMPTS:
            direct(engine, tok, home, p, a.max_tokens)
            through_api(client, name, p, a.max_tokens)
        runs = {p: {"direct": [], "api": []} for p in PROMPTS}
        for i in range(a.runs):
            for p in PROMPTS:
                runs[p]["direct"].append(direct(engine, tok, home, p, a.max_tokens))
                runs[p]["api"].append(through_api(client, name, p, a.max_tokens, url))
            print(f"round {i + 1}/{a.runs}", flush=True)
        per = {}
        for p, r in runs.items():
            per[p] = {k: {m: statistics.median(x[m] for x in v) for m in ("ttft", "total")} for k, v in r.items()}
            per[p]["tokens"] = sorted({x["tokens"] for v in r.values() for x in v})
            per[p]["api"]["server"] = statistics.median(x["server"] for x in r["api"])
        med = {k: {m: sum(per[p][k][m] for p in PROMPTS) for m in ("ttft", "total")} for k in ("direct", "api")}
        tokens = sum(per[p]["tokens"][0] for p in PROMPTS)
        for k in med:
            med[k]["tokens_per_s"] = tokens / med[k]["total"]
        overhead = med["api"]["total"] / med["direct"]["total"] - 1
        # --- 2. load: 100 sequential, then 20 concurrent; each request also saves a memory ---
        statuses, lock = [], threading.Lock()

        def one(i):
            body = {"model": name, "messages": MESSAGES, "max_tokens": 8, "user": "ana"}
            r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
            m = httpx.post(f"{url}/v1/household/memories", json={"user": "ana", "text": f"recuerdo número {i}"},
                           timeout=300)
            with lock:
                statuses.append((r.status_code, m.status_code))

        start = time.perf_counter()
        for i in range(100):
            one(i)
        sequential_s = time.perf_counter() - start
        threads = [threading.Thread(target=one, args=(100 + i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        kept = httpx.get(f"{url}/v1/household/memories", params={"user": "ana"}).json()["memories"]
        health = httpx.get(f"{url}/health").json()
    finally:
        server.terminate()
        server.wait(30)
    seq_ok = all(s == (200, 200) for s in statuses[:100])
    conc = [s for s, _ in statuses[100:]]
    result = {
        "model": str(model_path),
        "threads": torch.get_num_threads(),
        "max_tokens": a.max_tokens,
        "prompts": per,
        "tokens": tokens,
        "sum_of_medians": med,
        "overhead": overhead,
        "same_tokens": all(len(per[p]["tokens"]) == 1 for p in PROMPTS),
        "sequential": {"requests": 100, "all_ok": seq_ok, "seconds": sequential_s},
        "concurrent": {"requests": 20, "ok": conc.count(200), "429": conc.count(429),
                       "other": len(conc) - conc.count(200) - conc.count(429)},
        "memories_kept": len(kept),
        "memories_saved": len(statuses),
        "health": health,
    }
    for p in PROMPTS:
        d, s = per[p]["direct"], per[p]["api"]
        print(f"{p[:34]:<34} {per[p]['tokens']} tokens: first text {d['ttft'] * 1000:5.0f} / {s['ttft'] * 1000:5.0f} ms, "
              f"whole {d['total'] * 1000:5.0f} / {s['total'] * 1000:5.0f} ms (direct / api; "
              f"of which generating in the server {s['server'] * 1000:.0f} ms)")
    print(f"all prompts: {tokens} tokens, direct {med['direct']['tokens_per_s']:.1f} tok/s, "
          f"api {med['api']['tokens_per_s']:.1f} tok/s")
    print(f"service overhead on the whole answer: {overhead * 100:+.1f} % (target <= 10 %)")
    print(f"100 sequential: all ok {seq_ok} in {sequential_s:.1f} s; 20 concurrent: {result['concurrent']}")
    print(f"memories: {len(kept)} kept of {len(statuses)} saved; health {health}")
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(result, indent=1))
    print(f"wrote {a.json}")
    return 0 if seq_ok and result["concurrent"]["other"] == 0 and len(kept) == len(statuses) else 1


if __name__ == "__main__":
    raise SystemExit(main())
