"""Benchmark: ENLACE's models in llama.cpp (issue 46 §1). For each model file (or run folder), the GGUF export in
each --types, opened by llama.cpp through llama-cpp-python, and compared with ENLACE itself:
  - tokenization: the share of documents (the corpus' non-empty lines, the first --bytes of it) whose ids are
    identical in llama.cpp and in ENLACE, and the first ones that differ;
  - logits: max |Δlogit| on random ids against ENLACE with the weights rounded as the file holds them, and
    against the float32 model (what rounding the weights costs);
  - greedy: 20 Spanish prompts (chat turns for a chat model), 32 tokens each, identical continuations counted;
  - with --server PATH (llama.cpp's own llama-server, built from llama-cpp-python's vendored source by
    `bash scripts/llama_cpp.sh --server`, which prints its path), for a chat model: the
    prompt its --jinja template engine renders (POST /apply-template) against ENLACE's ids, and its greedy reply
    (POST /v1/chat/completions) against ENLACE's engine, on the chat prompts.
Prints a table, writes JSON. Needs the [gguf] extra (bash scripts/llama_cpp.sh). Usage:
    .venv/bin/python scripts/check_gguf.py [MODEL ...] [--types f16,q8_0] [--corpus ../shared/corpus/es]
                                           [--bytes 1000000] [--server PATH] [--out runs/bench/gguf.json]
"""

import argparse
import json
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import torch
from tqdm import tqdm

from enlace.checkpoint import load_model
from enlace.conversation import render_prompt
from enlace.engine import Engine
from enlace.export import check_gguf, llama_greedy, llama_logits, llama_model, write_gguf
from enlace.tokenizer import END, TOOL_CALL_END

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = [
    "En un lugar de la Mancha",
    "Había una vez una niña que",
    "La casa estaba en lo alto de",
    "Cuando llegó el invierno, los",
    "—¿Qué hora es? —preguntó",
    "El médico le dijo que",
    "Mañana iremos al mercado a comprar",
    "Nosotros comeremos",
    "El río bajaba crecido y",
    "Su madre le escribió una carta",
    "Pon leche en la lista de la compra",
    "¿Cuál es la capital de Francia?",
    "Recuérdame mañana a las nueve llamar al dentista",
    "¿Qué tengo en la lista?",
    "Apunta que Hugo calza un 32",
    "Cuéntame un cuento corto",
    "¿Cuánto es 17 por 23?",
    "¿Qué día es hoy?",
    "Olvida lo de las llaves",
    "Hola, ¿qué tal estás?",
]


def documents(corpus: Path, nbytes: int, seed: int = 0) -> list[str]:
    "Non-empty lines of the corpus' files, files in a seeded order, until `nbytes` of UTF-8."
    files = sorted(corpus.rglob("*.txt"))
    random.Random(seed).shuffle(files)
    docs, size = [], 0
    for f in files:
        for line in f.read_text(encoding="utf-8").split("\n"):
            if line.strip():
                docs.append(line)
                size += len(line.encode("utf-8"))
        if size >= nbytes:
            break
    return docs


def tokenization(llm, tok, docs: list[str]) -> dict:
    "Share of `docs` that llama.cpp tokenizes exactly as ENLACE (plain text: specials' texts stay text)."
    ours = tok.encode_batch(docs)
    bad = []
    for d, ids in zip(tqdm(docs, desc="tokenize", leave=False), ours):
        if llm.tokenize(d.encode("utf-8"), add_bos=False, special=False) != ids:
            bad.append(d)
    return {
        "documents": len(docs),
        "identical": len(docs) - len(bad),
        "share": 1 - len(bad) / len(docs),
        "tokens": sum(map(len, ours)),
        "first_different": [d[:160] for d in bad[:5]],
    }


@torch.no_grad()
def greedy(model, tok, man, llm, n: int = 32) -> dict:
    "Greedy continuations of PROMPTS by ENLACE (float32) and llama.cpp: how many are identical."
    chat = "chat_template" in man
    prompts = [render_prompt([{"role": "user", "content": p}], tok) if chat else tok.document_ids(p) for p in PROMPTS]
    engine, same, first = Engine(model, tok), 0, None
    for p in tqdm(prompts, desc="greedy", leave=False):
        a = engine.generate_batch([p], max_tokens=n, temperature=0)[0]
        b = llama_greedy(llm, p, len(a))
        same += a == b
        if a != b and first is None:
            first = {"prompt": tok.decode(p), "enlace": tok.decode(a), "llama.cpp": tok.decode(b)}
    return {"prompts": len(prompts), "identical": same, "first_different": first}


def served(server: str, gguf: Path, model, tok, n: int = 64) -> dict:
    "llama-server --jinja on `gguf`: its rendered prompts and greedy replies on the chat PROMPTS against ENLACE's."
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [server, "-m", str(gguf), "--jinja", "-c", "1024", "--host", "127.0.0.1", "--port", str(port), "-np", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def post(path: str, body: dict) -> dict:
        req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req, timeout=120).read())

    try:
        for _ in range(240):  # loading: /health answers 503, then 200
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        engine, stops = Engine(model, tok), [tok.special(END), tok.special(TOOL_CALL_END)]
        prompts, template, replies, first = PROMPTS[10:], 0, 0, None
        for text in prompts:
            msgs = [{"role": "user", "content": text}]
            ours = render_prompt(msgs, tok)
            template += tok.encode(post("/apply-template", {"messages": msgs})["prompt"]) == ours
            out = post("/v1/chat/completions", {"messages": msgs, "temperature": 0, "max_tokens": n})
            got = out["choices"][0]["message"].get("content") or ""
            want = tok.decode(engine.generate_batch([ours], max_tokens=n, temperature=0, stop=stops)[0])
            # llama-server keeps the end-of-message token's text (<|/tool_call|>) in the content; ENLACE stops before
            same = got in (want, want + TOOL_CALL_END)
            replies += same
            if not same and first is None:
                first = {"request": text, "enlace": want, "llama-server": got}
        return {
            "prompts": len(prompts),
            "template_identical": template,
            "replies_identical": replies,
            "first_different": first,
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=["runs/pretrain-cpu", "runs/sft-smoke-cpu"])
    ap.add_argument("--types", default="f16,q8_0")
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared/corpus/es"))
    ap.add_argument("--bytes", type=int, default=1_000_000)
    ap.add_argument("--server", help="llama.cpp's llama-server binary: check its template and replies too")
    ap.add_argument("--out", default="runs/bench/gguf.json")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    docs = documents(corpus, args.bytes) if corpus.is_dir() else []
    if not docs:
        print(f"{corpus}: no corpus; tokenization not measured", file=sys.stderr)
    results = []
    for path in args.models:
        model, tok, man = load_model(path)
        row = {"model": path, "parameters": sum(p.numel() for p in model.parameters()), "types": {}}
        with tempfile.TemporaryDirectory() as t:
            for i, q in enumerate(args.types.split(",")):
                f = write_gguf(model, tok, man, Path(t, f"m-{q}.gguf"), q)
                llm = llama_model(f, n_ctx=min(512, model.cfg.max_seq_len))
                try:
                    res = check_gguf(model, tok, f, q, llm=llm)
                    ids = torch.randint(0, tok.vocab_size, (64,), generator=torch.Generator().manual_seed(1)).tolist()
                    full = (model(torch.tensor([ids]))[0] - llama_logits(llm, ids)).abs().max().item()
                    res |= {
                        "bytes": f.stat().st_size,
                        "max_abs_logit_diff_vs_float32": full,
                        "greedy": greedy(model, tok, man, llm),
                    }
                    if i == 0 and docs:
                        row["tokenization"] = tokenization(llm, tok, docs)
                    if i == 0 and args.server and "chat_template" in man:
                        row["llama_server"] = served(args.server, f, model, tok)
                finally:
                    llm.close()
                row["types"][q] = res
        results.append(row)
        tk = row.get("tokenization")
        if tk:
            print(
                f"{path}: tokenization identical on {tk['identical']}/{tk['documents']} documents "
                f"({100 * tk['share']:.2f} %, {tk['tokens']:,} tokens)"
            )
        sv = row.get("llama_server")
        if sv:
            print(
                f"  llama-server --jinja: template identical {sv['template_identical']}/{sv['prompts']}, "
                f"greedy replies identical {sv['replies_identical']}/{sv['prompts']}"
            )
        for q, r in row["types"].items():
            g = r["greedy"]
            print(
                f"  {q:5s} {r['bytes'] / 2**20:7.2f} MiB  max|Δlogit| {r['max_abs_logit_diff']:.3g} (rounded alike; "
                f"tolerance {r['tolerance']:.3g}), {r['max_abs_logit_diff_vs_float32']:.3g} vs float32; "
                f"greedy identical {g['identical']}/{g['prompts']}"
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"corpus": str(corpus), "bytes": args.bytes, "models": results}, indent=1, ensure_ascii=False)
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
