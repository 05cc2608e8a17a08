"""Benchmark: how fast is a person's memory with 10,000 memories (and another person's 10,000 beside them)?

Builds a household in a temporary state folder (the real file: WAL, secure_delete, the FTS5 index), fills it with
Spanish-like memories for two people, then times `memory_search` (a short query, what the model asks) and `recall`
(a whole user message, what the chat does before every answer) over 200 queries each: median and p95 in ms. Also
times `memory_save` and a `memory_forget` (which rewrites the index). Two corpora: "varied" (a 3,000-word vocabulary,
Zipf-distributed: memories about many things) and "narrow" (the 193 words listed below: a few words in most memories, so a message
matches most of the 20,000 and BM25 ranks them all: a worst case). Target: median <= 5 ms. Usage:
    .venv/bin/python scripts/bench_household.py [--memories 10000] [--queries 200] [--json runs/bench/household.json]
"""
import argparse
import itertools
import json
import random
import re
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from enlace.household import STOPWORDS, Household, _count

ROOT = Path(__file__).resolve().parent.parent
WORDS = """abuela abuelo agua aire alergia alquiler amigo armario arroz autobús avión azúcar baño banco barrio basura
biblioteca bicicleta boda bolso botas cafetera caja cajón calle cama camisa campo canción carne carpeta carta casa
cena cepillo cereza champú chocolate cilantro cine cita clave coche cocina colegio comida contraseña correo cortina
cuaderno cuadro cumpleaños cuñado dentista deporte desayuno dinero doctor ducha edificio entrada escalera escuela
espejo estación examen factura farmacia fiesta fontanero foto fresa fruta fútbol gafas garaje gato gimnasio guitarra
habitación helado hermano hija hijo horno hospital huevo impuesto invierno jardín jarabe jefe juguete lámpara lavadora
leche libro limón llave luz madre maleta mantequilla manzana mapa mar médico mercado mesa miel móvil montaña museo
música naranja nevera nieto niña niño noche notario nueces nuevo oficina olivo ordenador otoño padre pan pantalón
papel paraguas parque pasaporte pastel patata peluquería perro pescado piano pintura piscina pizza planta playa
pollo primo puerta queso radio receta recibo regalo reloj restaurante revista ropa sábana sal salón seguro semana
silla sobrino sofá sopa suegra supermercado taller tarta taxi teatro teléfono televisión tienda tijeras tío toalla
tomate tren universidad vacaciones vaso vecino ventana verano vestido viaje vino wifi yogur zapatos zumo""".split()
NAMES = "Marta Pablo Lucía Javier Carmen Ana Luis Elena Diego Sara Pilar Andrés Rosa Tomás Irene Nuria".split()
GLUE = [w for w in ("el", "la", "de", "del", "en", "es", "que", "a", "con", "para", "los", "las", "se", "su", "y")
        if w in STOPWORDS]


SYLLABLES = "ba be bi bo bu ca ce co cu da de di do fa fe fi fo ga go la le li lo lu ma me mi mo mu na ne ni no " \
            "pa pe pi po ra re ri ro ru sa se si so ta te ti to tu va ve vi za zo".split()


class Words:
    "Content words with Zipf frequencies (the first much more often than the last), as words are in real text."

    def __init__(self, rng: random.Random, size: int):
        extra = {"".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))) for _ in range(3 * size)} - set(WORDS)
        self.words = (WORDS + sorted(extra))[:size]
        rng.shuffle(self.words)
        self.cum = list(itertools.accumulate(1 / (i + 1) for i in range(len(self.words))))

    def pick(self, rng: random.Random) -> str:
        return rng.choices(self.words, cum_weights=self.cum)[0]


def sentence(rng: random.Random, words: Words, n: int) -> str:
    "A memory-like sentence of about `n` words: content words, names and numbers between stop words."
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(rng.choice(GLUE) if r < 0.45 else rng.choice(NAMES) if r < 0.55 else
                   str(rng.randint(1, 9999)) if r < 0.6 else words.pick(rng))
    return " ".join(out)


def timed(fn, items) -> list[float]:
    "Milliseconds of fn(x) for each x."
    out = []
    for x in items:
        t0 = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def summary(ms: list[float]) -> dict:
    ms = sorted(ms)
    return {"n": len(ms), "median_ms": statistics.median(ms), "p95_ms": ms[int(0.95 * (len(ms) - 1))],
            "max_ms": ms[-1]}


def run(corpus: str, vocab: int, memories: int, queries: int, seed: int) -> dict:
    "The figures of one corpus."
    rng = random.Random(seed)
    words = Words(rng, vocab)
    with tempfile.TemporaryDirectory() as t:
        home = Household.open(Path(t) / "state")
        home.add_person("Marta")
        home.add_person("Pablo")
        now = time.time()
        t0 = time.perf_counter()
        with home.lock:  # one transaction for the bulk fill: what is measured below is the lookups
            home.db.execute("BEGIN")
            for person in ("marta", "pablo"):
                rows = [(person, sentence(rng, words, rng.randint(6, 16)), now - rng.uniform(0, 365 * 86400))
                        for _ in range(memories)]
                home.db.executemany("INSERT INTO memories (person, text, added) VALUES (?, ?, ?)", rows)
                for _, text, _ in rows:  # each member's word counts, as memory_save keeps them (schema 4)
                    _count(home.db, person, text, +1)
            home.db.execute("COMMIT")
        fill_s = time.perf_counter() - t0
        marta = home.person("Marta")
        searches = [" ".join(words.pick(rng) for _ in range(rng.randint(1, 3))) for _ in range(queries)]
        messages = [sentence(rng, words, rng.randint(6, 20)) + "?" for _ in range(queries)]
        marta.memory_search(searches[0])  # a first query pages the index in
        search_ms = timed(marta.memory_search, searches)
        recall_ms = timed(marta.recall, messages)
        hits = statistics.mean(len(marta.memory_search(q)["results"]) for q in searches)
        matched = statistics.median(
            home.db.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (_or(m),)).fetchone()[0]
            for m in messages
        )
        save_ms = timed(marta.memory_save, [sentence(rng, words, 10) for _ in range(50)])
        marta.memory_save("la clave del wifi es gato123")
        forget_ms = timed(marta.memory_forget, ["wifi gato123"])
        size = sum(p.stat().st_size for p in (Path(t) / "state").iterdir())
        home.close()
    res = {
        "corpus": corpus, "vocabulary": len(words.words), "memories_per_person": memories, "people": 2,
        "fill_s": fill_s, "file_mb": size / 1e6, "memory_search": summary(search_ms), "recall": summary(recall_ms),
        "mean_results_per_search": hits, "median_memories_a_message_matches": matched,
        "memory_save": summary(save_ms), "memory_forget_one": summary(forget_ms),
    }
    print(f"{corpus}: {len(words.words):,}-word vocabulary, {memories:,} memories x 2 people, file {size / 1e6:.1f} MB; "
          f"a message matches {matched:,.0f} memories (median)")
    for name in ("memory_search", "recall", "memory_save", "memory_forget_one"):
        f = res[name]
        print(f"  {name:>17}: median {f['median_ms']:.2f} ms  p95 {f['p95_ms']:.2f} ms  max {f['max_ms']:.2f} ms"
              f"  (n={f['n']})")
    return res


def _or(text: str) -> str:
    "The OR query a message makes (both people's memories), to count what BM25 has to rank."
    return " OR ".join('"' + w + '"' for w in _terms_of(text))


def _terms_of(text: str) -> list[str]:
    return [w for w in dict.fromkeys(re.findall(r"[^\W_]+", text.casefold())) if w not in STOPWORDS][:32]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000, help="memories per person (two people)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", default=str(ROOT / "runs/bench/household.json"), help="where to write the figures")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    res = {"target_median_ms": 5.0, "sqlite": sqlite3.sqlite_version, "corpora": []}
    for corpus, vocab in (("varied", 3000), ("narrow", len(WORDS))):
        res["corpora"].append(run(corpus, vocab, a.memories, a.queries, a.seed))
    varied = res["corpora"][0]
    res["meets_target"] = max(varied["memory_search"]["median_ms"], varied["recall"]["median_ms"]) <= 5.0
    print(f"target (varied corpus) median <= 5 ms: {'met' if res['meets_target'] else 'NOT met'}")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
