"""Benchmark: `prepare` end to end (raw text -> cleaned -> verified shards) on 1 core and on 2, with an existing
tokenizer and training one, and its scaling projected to more cores.

Each run is a fresh process pinned to its cores (`os.sched_setaffinity`) with `--workers` equal to them, writing a
new folder: 1 core / 1 worker and 2 cores / 2 workers, with the tokenizer given (`--tokenizer`, the one the first
training run made) and trained (`--train-tokenizer`, the README's flow). The figures are MB/s of raw text over the
whole `prepare` call, and MB per CPU-second (less sensitive to a busy machine). The speed-up from 1 to 2 cores gives
the serial fraction by Amdahl's law (s = 2/S - 1), and from it the projection to 4, 8 and 16 cores.

The machine's pace moves on a shared host (the same run has gone from 5.6 to 3.2 MB/s within an hour): a reference
pace, one thread encoding a fixed slice of the corpus with the trained tokenizer, is measured before and after
the runs. When the two differ by more than `--tolerance` (15 %), the figures are printed and written but marked
unsteady, and the exit status is 1.
Prints a table and writes JSON:
    .venv/bin/python scripts/bench_prepare.py [SOURCE...] [--vocab 4096] [--out runs/bench/prepare.json]
(SOURCE defaults to ../shared/corpus/es and ../shared/corpus/es-extra, 123 MB.)
"""
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT.parent / "shared/corpus/es", ROOT.parent / "shared/corpus/es-extra"]

CHILD = r"""
import json, os, resource, sys, time
cores, args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
os.sched_setaffinity(0, cores)
from enlace.prepare import prepare
t0 = time.perf_counter()
m = prepare(args.pop("sources"), args.pop("out"), progress=False, log=lambda *a: None, **args)
secs = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": secs, "cpu_seconds": ru.ru_utime + ru.ru_stime, "raw_bytes": m["raw_bytes"],
                  "tokens": m["tokens"], "bytes_per_token": m["bytes_per_token"]}))
"""

PACE = r"""
import json, os, sys, time
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.sched_setaffinity(0, [0])
from enlace.tokenizer import Tokenizer
tok = Tokenizer.load(sys.argv[1])
texts = json.loads(open(sys.argv[2], encoding="utf-8").read())
nbytes = sum(len(t.encode()) for t in texts)
best = 0.0
for _ in range(3):
    t0 = time.perf_counter()
    tok.encode_batch(texts)
    best = max(best, nbytes / 1e6 / (time.perf_counter() - t0))
print(json.dumps({"mb_per_s": best}))
"""


def amdahl(speedup: float, cores: int = 2) -> float:
    "The serial fraction s that gives `speedup` on `cores` cores: S = 1 / (s + (1 - s) / cores)."
    return (cores / speedup - 1) / (cores - 1)


def projected(one_core: float, serial: float, cores: int) -> float:
    "Throughput on `cores` cores from the 1-core figure and the serial fraction."
    return one_core / (serial + (1 - serial) / cores)


def child(code: str, *args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"bench_prepare: a run failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(sources, out: Path, cores: list, **kw) -> dict:
    args = {"sources": [str(s) for s in sources], "out": str(out), "workers": len(cores), **kw}
    r = child(CHILD, json.dumps(cores), json.dumps(args))
    r |= {"cores": len(cores), "mb_per_s": r["raw_bytes"] / 1e6 / r["seconds"],
          "mb_per_cpu_s": r["raw_bytes"] / 1e6 / r["cpu_seconds"]}
    print(f"  {kw.get('train_vocab') and 'train' or 'given'} tokenizer, {len(cores)} core(s): {r['seconds']:.1f} s, "
          f"{r['mb_per_s']:.2f} MB/s, {r['mb_per_cpu_s']:.2f} MB/CPU-s", flush=True)
    return r


def pace_texts(shards: Path, limit: int = 4_000_000) -> list:
    "About `limit` bytes of cleaned training documents: the fixed work of the reference pace."
    texts, n = [], 0
    for p in sorted((shards / "clean").glob("train_*.jsonl")):
        for line in open(p, encoding="utf-8"):
            texts.append(json.loads(line)["text"])
            n += len(texts[-1].encode())
            if n >= limit:
                return texts
    return texts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sources", nargs="*", default=[str(s) for s in SOURCES])
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--out", default=str(ROOT / "runs/bench/prepare.json"))
    a = ap.parse_args(argv)
    missing = [s for s in a.sources if not Path(s).exists()]
    if missing:
        print(f"bench_prepare: {missing[0]} does not exist; give the corpus folders as arguments", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    two = cpus[:2]
    if len(two) < 2:
        print("bench_prepare: this process may use only one core; the 2-core figures are on that core", flush=True)
        two = two * 2
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        print(f"prepare of {', '.join(map(str, a.sources))} (vocab {a.vocab}):", flush=True)
        runs = {"train_2": run(a.sources, d / "t2", two, train_vocab=a.vocab)}
        tok = d / "t2" / "tokenizer"
        texts = d / "pace.json"
        texts.write_text(json.dumps(pace_texts(d / "t2")), encoding="utf-8")
        pace_before = child(PACE, str(tok), str(texts))["mb_per_s"]
        runs["given_2"] = run(a.sources, d / "g2", two, tokenizer=str(tok))
        runs["given_1"] = run(a.sources, d / "g1", two[:1], tokenizer=str(tok))
        runs["train_1"] = run(a.sources, d / "t1", two[:1], train_vocab=a.vocab)
        pace_after = child(PACE, str(tok), str(texts))["mb_per_s"]
    moved = abs(pace_after - pace_before) / max(pace_before, pace_after)
    scaling = {}
    for kind in ("given", "train"):
        s = runs[f"{kind}_1"]["seconds"] / runs[f"{kind}_2"]["seconds"]
        serial = min(max(amdahl(s), 0.0), 1.0)
        one = runs[f"{kind}_1"]["mb_per_s"]
        scaling[kind] = {"speedup_2": s, "serial_fraction": serial,
                         "projected_mb_per_s": {n: projected(one, serial, n) for n in (4, 8, 16)}}
    print(f"\nreference pace (1 thread encoding a fixed slice): {pace_before:.2f} MB/s before, {pace_after:.2f} after")
    print(f"{'MB/s':28}{'1 core':>9}{'2 cores':>9}{'speed-up':>10}{'serial':>8}{'16 cores (proj.)':>18}")
    for kind, label in (("given", "existing tokenizer"), ("train", "training the tokenizer")):
        sc = scaling[kind]
        print(f"{label:28}{runs[kind + '_1']['mb_per_s']:>9.2f}{runs[kind + '_2']['mb_per_s']:>9.2f}"
              f"{sc['speedup_2']:>9.2f}x{sc['serial_fraction']:>8.0%}{sc['projected_mb_per_s'][16]:>18.1f}")
    steady = moved <= a.tolerance
    if not steady:
        print(f"unsteady: the reference pace moved {moved:.0%} during the runs (more than {a.tolerance:.0%}): "
              f"another process was probably competing for the cores; run again on an idle machine")
    res = {"sources": [str(s) for s in a.sources], "vocab": a.vocab, "runs": runs, "scaling": scaling,
           "pace_mb_per_s": {"before": pace_before, "after": pace_after}, "pace_moved": moved, "steady": steady,
           "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(f"wrote {a.out}")
    return 0 if steady else 1


if __name__ == "__main__":
    raise SystemExit(main())
