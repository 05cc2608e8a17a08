"""Stage 3, synthetic data with the Message Batches API (enlace.synth): against a fake client that answers in
reversed or shuffled order and can be killed at every stage, then once through the real SDK over an HTTP mock transport."""
import hashlib
import importlib.util
import json
import os
import random
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

import enlace.synth as gen
from enlace.synth import (JobError, collect, cost, dataset_conversations, expand, job_state, load_spec, main, outcome,
                          read_records, submit)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = next((p for p in (ROOT / "configs/gen/example.yaml", Path(__file__).parent / "example.yaml") if p.is_file()), None)

SPEC = """model: claude-haiku-4-5
max_tokens: 300
system: |
  Eres un asistente para familias hispanohablantes. Responde con calidez y en pocas frases.
user: "Un consejo práctico sobre {tema} para una familia con {quien}."
variables:
  tema: [el sueño, los deberes, las pantallas, la comida]
  quien: [un bebé, dos adolescentes]
"""
SCHEMA = """schema:
  type: object
  properties: {consejo: {type: string}}
  required: [consejo]
  additionalProperties: false
"""
N = 8  # requests in SPEC: 4 topics x 2 families, in batches of 3, 3 and 2


def noop(*a, **k): pass


class Crash(BaseException):
    "A simulated kill: derives from BaseException so that no `except Exception` in the code under test can stop it."


# ---------------------------------------------------------------- the fake API

def _now(): return datetime.now(timezone.utc).isoformat()


class Server:
    """The API's side, which outlives every client (process) that talks to it. `fail` maps a custom_id to the outcome
    of each attempt ('ok', 'expired', 'canceled', 'missing', 'bad_json' or an error type); later attempts succeed."""
    def __init__(self, order="reversed", polls_to_end=0, fail=None, seed=0):
        self.batches, self.creates, self.order, self.polls_to_end = {}, 0, order, polls_to_end
        self.fail, self.attempts, self.rng = fail or {}, Counter(), random.Random(seed)

    def sent(self) -> list[str]:
        "Every custom_id the API was ever given, with repetitions."
        return [r["custom_id"] for b in self.batches.values() for r in b["requests"]]

    def new_batch(self, requests) -> str:
        self.creates += 1
        bid = f"msgbatch_{len(self.batches):04d}"
        outs = {}
        for r in requests:
            cid = r["custom_id"]
            plan = self.fail.get(cid, [])
            outs[cid] = plan[self.attempts[cid]] if self.attempts[cid] < len(plan) else "ok"
            self.attempts[cid] += 1
        self.batches[bid] = {"id": bid, "created_at": _now(), "requests": list(requests), "outs": outs, "polls": 0}
        return bid

    def meta(self, bid) -> dict:
        b = self.batches[bid]
        ended = b["polls"] > self.polls_to_end
        kinds = Counter({"ok": "succeeded", "bad_json": "succeeded", "expired": "expired", "canceled": "canceled",
                         "missing": "succeeded"}.get(o, "errored") for o in b["outs"].values())
        counts = {k: (kinds[k] if ended else 0) for k in ("succeeded", "errored", "canceled", "expired")}
        counts["processing"] = 0 if ended else len(b["requests"])
        return {"id": bid, "type": "message_batch", "created_at": b["created_at"], "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "results_url": f"https://api.anthropic.com/v1/messages/batches/{bid}/results" if ended else None}

    def lines(self, bid) -> list[dict]:
        "The batch's results in the wrong order, on purpose."
        b, out = self.batches[bid], []
        for i, r in enumerate(b["requests"]):
            kind, p = b["outs"][r["custom_id"]], r["params"]
            if kind == "missing": continue
            if kind in ("expired", "canceled"): res = {"type": kind}
            elif kind not in ("ok", "bad_json"):
                res = {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": f"simulated {kind}"}}}
            else: res = {"type": "succeeded", "message": answer(p, i == 0, bad=kind == "bad_json")}
            out.append({"custom_id": r["custom_id"], "result": res})
        if self.order == "shuffled": self.rng.shuffle(out)
        else: out.reverse()
        return out


def answer(params, first, bad=False) -> dict:
    "A message whose content and usage can be traced back to its own prompt."
    prompt = params["messages"][0]["content"]
    text = "Respuesta a: " + prompt
    content = ([{"type": "tool_use", "id": "toolu_1", "name": params["tools"][0]["name"], "input": {"consejo": 3 if bad else text}}]
               if "tools" in params else [{"type": "text", "text": text}])
    w, r = (50, 0) if first else (0, 50)
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": params["model"], "content": content,
            "stop_reason": "tool_use" if "tools" in params else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": len(prompt), "output_tokens": 20, "cache_creation_input_tokens": w,
                      "cache_read_input_tokens": r, "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": w}}}


class FakeClient:
    """The subset of anthropic.Anthropic that enlace.synth uses (client.messages.batches.create/retrieve/list/results,
    with_options). `crash={point: n}` raises Crash the n-th time the client reaches that point:
    before_create (killed after the intent, before create reached the API), after_create (the API created the batch,
    the reply never arrived), retrieve (killed while polling), results (killed while collecting, at the n-th line)."""
    def __init__(self, server, crash=None):
        self.server, self.crash, self.hits, self.options = server, crash or {}, Counter(), {}

    messages = batches = property(lambda self: self)

    def with_options(self, **kw):
        c = FakeClient(self.server, self.crash); c.hits, c.options = self.hits, kw
        return c

    def _hit(self, point):
        self.hits[point] += 1
        if self.crash.get(point) == self.hits[point]: raise Crash(point)

    def create(self, requests):
        assert self.options.get("max_retries") == 0, "create must never be retried by the SDK"
        self._hit("before_create")
        bid = self.server.new_batch(requests)
        self._hit("after_create")
        return self.server.meta(bid)

    def retrieve(self, bid):
        self._hit("retrieve")
        self.server.batches[bid]["polls"] += 1
        return self.server.meta(bid)

    def list(self, limit=20):
        return [self.server.meta(b) for b in sorted(self.server.batches, reverse=True)]

    def results(self, bid):
        assert self.server.meta(bid)["processing_status"] == "ended", "results of a batch that has not ended"
        for line in self.server.lines(bid):
            self._hit("results")
            yield line


# ---------------------------------------------------------------- helpers

def write_spec(tmp_path, extra="", per_batch=3) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC + extra + f"max_requests_per_batch: {per_batch}\n", encoding="utf-8")
    return p


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch):
    "No test may reach the real API, whatever the developer's environment holds."
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def run(client, spec, job, **kw):
    "What a user does: submit, then collect (polling without sleeping)."
    submit(client, spec, job, log=noop, **kw)
    return collect(client, spec, job, poll=0, sleep=noop, progress=False)


def check_dataset(job, spec):
    "Every planned request has exactly one row, in request order, holding the answer to its own prompt."
    rows = read_records(job / "dataset.jsonl")
    assert [r["custom_id"] for r in rows] == [r["custom_id"] for r in expand(spec)]
    for r in rows:
        text = "Respuesta a: " + r["prompt"]
        assert r["output"] == ({"consejo": text} if spec["schema"] else text), r
        assert r["usage"]["input_tokens"] == len(r["prompt"])
    got = [r["custom_id"] for r in read_records(job / "results.jsonl")]
    assert len(got) == len(set(got)), "a result was written twice"
    return rows


# ---------------------------------------------------------------- tests

def test_same_spec_same_ids_and_a_rerun_pays_nothing(tmp_path):
    spec, job = load_spec(write_spec(tmp_path)), tmp_path / "job"
    ids = [r["custom_id"] for r in expand(spec)]
    assert len(ids) == len(set(ids)) == N and ids == [r["custom_id"] for r in expand(load_spec(write_spec(tmp_path)))]
    assert all(0 < len(i) <= 64 and i.replace("_", "").replace("-", "").isalnum() for i in ids)
    server = Server()
    submit(FakeClient(server), spec, job, log=noop)
    submit(FakeClient(server), spec, job, log=noop)  # again before anything ended: the ids are in flight
    assert server.creates == 3
    run(FakeClient(server), spec, job)
    run(FakeClient(server), spec, job)  # again once everything is done
    assert server.creates == 3 and sorted(server.sent()) == sorted(ids)
    check_dataset(job, spec)
    assert (job / "dataset.parquet").is_file() == (importlib.util.find_spec("pyarrow") is not None)
    # a changed request is a new id; the unchanged ones are recognised and not paid again
    spec2 = load_spec(write_spec(tmp_path, "samples: 2\n"))
    run(FakeClient(server), spec2, job)
    assert len(server.sent()) == 2 * N and len(set(server.sent())) == 2 * N
    check_dataset(job, spec2)


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
@pytest.mark.parametrize("schema", [False, True])
def test_results_land_under_their_own_id(tmp_path, order, schema):
    spec, job = load_spec(write_spec(tmp_path, SCHEMA if schema else "")), tmp_path / "job"
    server = Server(order=order, polls_to_end=2, seed=7)
    run(FakeClient(server), spec, job)
    rows = check_dataset(job, spec)
    assert {r["prompt"] for r in rows} == {r["params"]["messages"][0]["content"] for r in expand(spec)}
    sent = [r for b in server.batches.values() for r in b["requests"]]
    assert all(r["params"]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"} for r in sent)
    assert all(("tool_choice" in r["params"]) == schema for r in sent)


@pytest.mark.parametrize("stage, nth", [("before_create", 2), ("after_create", 2), ("retrieve", 2), ("results", 5)])
def test_killed_at_every_stage_then_resumed(tmp_path, stage, nth):
    spec, job = load_spec(write_spec(tmp_path)), tmp_path / "job"
    server = Server(polls_to_end=1)
    with pytest.raises(Crash):
        run(FakeClient(server, crash={stage: nth}), spec, job)
    if stage == "results":  # and the kill tore the line being written
        with open(job / "results.jsonl", "a") as f: f.write('{"custom_id": "half')
    creates_at_crash = server.creates
    for attempt in range(3):  # each attempt is a new process: a new client, the same server and files
        client = FakeClient(server)
        try:
            run(client, spec, job)
            break
        except JobError as e:
            # only when the kill came before create reached the API: there is nothing to adopt, and we are told so
            assert stage == "before_create" and attempt == 0
            assert "has no batch record" in str(e) and "--abandon" in str(e) and "--adopt" in str(e)
            assert server.creates == creates_at_crash, "created again although an intent was dangling"
            # the user checks the batch list (nothing was created after the intent) and says so
            intent = job_state(job)["dangling"][0]
            assert not [b for b in server.batches.values() if b["created_at"] >= intent["ts"]]
            submit(client, spec, job, log=noop, abandon=[intent["intent"]])
    sent = server.sent()
    assert len(sent) == len(set(sent)) == N, f"duplicate submissions: {Counter(sent).most_common(2)}"
    assert server.creates == 3
    check_dataset(job, spec)
    adopted = [b for b in read_records(job / "batches.jsonl") if b["adopted"]]
    assert len(adopted) == (stage == "after_create")


def test_two_orphans_that_look_alike_are_not_guessed(tmp_path):
    "A dangling intent with two unknown batches of its size, still processing: tell the user, create nothing."
    spec, job = load_spec(write_spec(tmp_path, per_batch=8)), tmp_path / "job"
    server = Server(polls_to_end=5)
    with pytest.raises(Crash):
        submit(FakeClient(server, crash={"after_create": 1}), spec, job, log=noop)
    other = server.new_batch([{"custom_id": f"x{i}", "params": {}} for i in range(N)])  # another job's batch, same size
    with pytest.raises(JobError, match="cannot be told apart"):
        submit(FakeClient(server), spec, job, log=noop)
    assert server.creates == 2
    mine = next(b for b in server.batches if b != other)
    iid = job_state(job)["dangling"][0]["intent"]
    run(FakeClient(server), spec, job, adopt={iid: mine})
    assert server.creates == 2
    check_dataset(job, spec)


def test_failures_are_recorded_and_only_retryable_ones_resubmitted(tmp_path):
    spec, job = load_spec(write_spec(tmp_path, SCHEMA)), tmp_path / "job"
    ids = [r["custom_id"] for r in expand(spec)]
    fail = {ids[0]: ["overloaded_error"], ids[1]: ["invalid_request_error"], ids[2]: ["expired"], ids[3]: ["canceled"],
            ids[4]: ["bad_json"], ids[5]: ["missing"], ids[6]: ["api_error", "api_error"]}
    server = Server(fail=fail)
    run(FakeClient(server), spec, job)
    errs = {e["custom_id"]: e for e in read_records(job / "errors.jsonl")}
    assert {c: (e["reason"], e.get("error_type"), e["retryable"]) for c, e in errs.items()} == {
        ids[0]: ("errored", "overloaded_error", True), ids[1]: ("errored", "invalid_request_error", False),
        ids[2]: ("expired", None, True), ids[3]: ("canceled", None, True), ids[4]: ("invalid_output", None, True),
        ids[5]: ("missing", None, True), ids[6]: ("errored", "api_error", True)}
    assert errs[ids[4]]["usage"]["output_tokens"] == 20  # invalid output was paid: its usage is kept
    assert submit(FakeClient(server), spec, job, log=noop) == []  # plain submit does not touch failures
    said = []
    new = submit(FakeClient(server), spec, job, retry=True, log=said.append)
    assert [b["n"] for b in new] == [3, 3]
    assert sorted(server.sent()[N:]) == sorted(ids[i] for i in (0, 2, 3, 4, 5, 6))
    assert ids[1] in said[0] and "invalid_request_error" in said[0]
    collect(FakeClient(server), spec, job, poll=0, sleep=noop, progress=False)
    assert set(job_state(job)["failed"]) == {ids[1], ids[6]}
    submit(FakeClient(server), spec, job, retry=True, log=noop)
    collect(FakeClient(server), spec, job, poll=0, sleep=noop, progress=False)
    assert set(job_state(job)["failed"]) == {ids[1]} and Counter(server.sent())[ids[1]] == 1
    rows = read_records(job / "dataset.jsonl")
    assert len(rows) == N - 1 and ids[1] not in {r["custom_id"] for r in rows}


def test_cost_comes_from_usage(tmp_path):
    p = {"input": 1.0, "output": 5.0}
    assert cost({"input_tokens": 10**6}, p) == 0.5 and cost({"output_tokens": 10**6}, p) == 2.5
    assert cost({"cache_read_input_tokens": 10**6}, p) == pytest.approx(0.05)
    assert cost({"cache_creation_input_tokens": 10**6, "cache_creation": {"ephemeral_1h_input_tokens": 10**6}}, p) == 1.0
    assert cost({"cache_creation_input_tokens": 10**6, "cache_creation": {"ephemeral_5m_input_tokens": 10**6}}, p) == 0.625
    spec, job = load_spec(write_spec(tmp_path)), tmp_path / "job"
    server = Server()
    run(FakeClient(server), spec, job)
    usages = [l["result"]["message"]["usage"] for b in server.batches for l in server.lines(b)]
    expected = sum(0.5 * (u["input_tokens"] + 2.0 * u["cache_creation_input_tokens"] + 0.1 * u["cache_read_input_tokens"]
                          + 5.0 * u["output_tokens"]) / 1e6 for u in usages)  # haiku 4.5: $1 / $5 per MTok
    assert gen.summary(job, spec)["cost_usd"] == pytest.approx(expected)


def test_status_shows_batches_and_cost(tmp_path, monkeypatch, capsys):
    server = Server(polls_to_end=3)
    monkeypatch.setattr(gen, "make_client", lambda env_file: FakeClient(server))
    spec = write_spec(tmp_path)
    assert main(["submit", str(spec)]) == 0
    assert main(["status", str(spec)]) == 0
    out = capsys.readouterr().out
    assert out.count("in_progress") == 3 and "8 in flight" in out and "cost so far $0.0000" in out
    assert main(["collect", str(spec), "--poll", "0", "--no-progress"]) == 0
    assert main(["status", str(spec)]) == 0
    out = capsys.readouterr().out
    assert out.count("collected") == 3 and "8 done" in out and (tmp_path / "spec" / "dataset.jsonl").is_file()


def test_key_from_dotenv_is_never_written(tmp_path, monkeypatch, capsys):
    secret = "sk-ant-api03-SECRET-never-in-a-file"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / ".env").write_text(f"# local secrets\nexport ANTHROPIC_API_KEY='{secret}'\n")
    assert gen.api_key(tmp_path / ".env") == secret
    server, seen = Server(), []
    monkeypatch.setattr(gen, "make_client", lambda env_file: (seen.append(gen.api_key(env_file)), FakeClient(server))[1])
    spec = write_spec(tmp_path)
    for cmd in ("submit", "status", "collect"):
        assert main([cmd, str(spec), "--env-file", str(tmp_path / ".env"), "--poll", "0", "--no-progress"]) == 0
    assert seen == [secret] * 3
    out = capsys.readouterr()
    assert secret not in out.out + out.err
    assert not [p for p in (tmp_path / "spec").rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("extra, culprit", [
    ("modle: claude-haiku-4-5\n", "spec.yaml: modle: unknown key (did you mean 'model'?)"),
    ("temperature: 3\n", "spec.yaml: temperature: Input should be less than or equal to 1 (got 3)"),
    ("seeds: [{tema: x}]\n", "spec.yaml: seeds[0].tema: also given in variables"),
    ("schema: {type: array}\n", "spec.yaml: schema: top-level type must be 'object'"),
    ("schema: {type: object, required: 3}\n", "spec.yaml: schema: invalid JSON schema: 3 is not of type 'array'"),
    ("prices: {input: 1}\n", "spec.yaml: prices.output: missing required key"),
    (None, "spec.yaml: max_requests_per_batch: Input should be less than or equal to 100000"),
])
def test_bad_spec_is_one_line_and_exit_2(tmp_path, capsys, extra, culprit):
    assert main(["plan", str(write_spec(tmp_path, extra or "", per_batch=200000 if extra is None else 3))]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and culprit in out.err, out.err


@pytest.mark.parametrize("old, new, culprit", [
    ("{tema}", "{temaa}", "user: no value for {temaa} (did you mean 'tema'?)"),
    ("{tema}", "{tema", "user: invalid template"),
    ("claude-haiku-4-5", "claude-nuevo-9", "model: no price known for 'claude-nuevo-9'"),
    ("max_tokens: 300", "max_tokens: cien", "max_tokens: Input should be a valid integer"),
    ("system: |", "system: [\n", "invalid YAML at line"),
])
def test_bad_spec_edits(tmp_path, capsys, old, new, culprit):
    p = write_spec(tmp_path)
    p.write_text(p.read_text().replace(old, new, 1))
    assert main(["plan", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and culprit in err, err


def test_missing_key_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    spec = write_spec(tmp_path)
    for cmd in ("submit", "status", "collect", "retry-failed"):
        assert main([cmd, str(spec), "--env-file", str(tmp_path / ".env")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "ANTHROPIC_API_KEY" in err and ".env" in err, err
    assert not (tmp_path / "spec" / "intents.jsonl").exists()


# ---------------------------------------------------------------- entry points, in fresh processes

BLOCK_SDK = "import sys, runpy; sys.modules['anthropic'] = None; "


def python(code, cwd, **env_extra):
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**env, **env_extra})


def test_plan_works_offline_without_key_or_sdk(tmp_path):
    spec = EXAMPLE or write_spec(tmp_path)
    r = python(BLOCK_SDK + f"sys.argv = ['enlace.synth', 'plan', {str(spec)!r}, '--dir', {str(tmp_path / 'job')!r}]; "
               "runpy.run_module('enlace.synth', run_name='__main__', alter_sys=True)", tmp_path, HTTPS_PROXY="http://127.0.0.1:9")
    assert r.returncode == 0, r.stderr
    assert "to submit:" in r.stdout and "batch(es)" in r.stdout and "worst-case cost: $" in r.stdout
    n = int(r.stdout.split("to submit: ")[1].split()[0])
    assert n == len(read_records(tmp_path / "job" / "requests.jsonl")) > 0


def test_help_and_import_without_the_sdk(tmp_path):
    r = python(BLOCK_SDK + "import enlace, enlace.synth; sys.argv = ['enlace.synth', '--help']; "
               "runpy.run_module('enlace.synth', run_name='__main__', alter_sys=True)", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "plan" in r.stdout and "retry-failed" in r.stdout
    r = python(BLOCK_SDK + "import enlace, enlace.synth; assert sys.modules['anthropic'] is None",
               tmp_path)
    assert r.returncode == 0, r.stderr


def test_python_m_enlace_synth_plan(tmp_path):
    r = subprocess.run([sys.executable, "-m", "enlace.synth", "plan", str(write_spec(tmp_path))], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"})
    assert r.returncode == 0, r.stderr
    assert f"to submit: {N} requests in 3 batch(es)" in r.stdout


# ---------------------------------------------------------------- once through the real SDK

def hx():
    "The HTTP library the installed SDK runs on: httpx2 since anthropic 2 (it rejects httpx clients), httpx before."
    pytest.importorskip("anthropic")
    import anthropic._base_client as bc
    return getattr(bc, "httpx2", None) or bc.httpx


def sdk_client(handler, max_retries=2):
    "anthropic.Anthropic over an in-process HTTP mock: the SDK builds the requests and parses the answers itself."
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(api_key="test", max_retries=max_retries,
                               http_client=hx().Client(transport=hx().MockTransport(handler)))


class MockAPI:
    "Answers the batch endpoints with the API's JSON and JSONL shapes; records what the SDK sent."
    def __init__(self, create_status=200):
        self.posts, self.batch, self.polls, self.create_status = [], None, 0, create_status

    def meta(self):
        ended = self.polls > 1
        n = len(self.posts[-1]["requests"])
        t = datetime.now(timezone.utc)
        return {"id": "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d", "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else n, "succeeded": n - 2 if ended else 0,
                                   "errored": int(ended), "canceled": 0, "expired": int(ended)},
                "created_at": self.created, "expires_at": (t + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
                "ended_at": t.isoformat().replace("+00:00", "Z") if ended else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": "https://api.anthropic.com/v1/messages/batches/msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d/results" if ended else None}

    def results(self) -> str:
        reqs, lines = self.posts[-1]["requests"], []
        for i, r in enumerate(reqs):
            if i == 0: res = {"type": "errored", "error": {"type": "error", "request_id": "req_1",
                              "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}}
            elif i == 1: res = {"type": "expired"}
            else: res = {"type": "succeeded", "message": {**answer(r["params"], i == 2), "model": "claude-haiku-4-5-20251001",
                                                          "id": f"msg_{i:03d}"}}
            lines.append(json.dumps({"custom_id": r["custom_id"], "result": res}))
        return "\n".join(reversed(lines)) + "\n"

    def __call__(self, request):
        Response = hx().Response
        path = request.url.path
        if request.method == "POST" and path == "/v1/messages/batches":
            self.posts.append(json.loads(request.content))
            if self.create_status != 200:
                return Response(self.create_status, json={"type": "error", "error": {"type": "api_error", "message": "boom"}})
            self.created = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
            self.batch = True
            return Response(200, json=self.meta())
        if request.method == "GET" and path == "/v1/messages/batches":
            return Response(200, json={"data": [self.meta()] if self.batch else [], "has_more": False,
                                       "first_id": None, "last_id": None})
        if request.method == "GET" and path.endswith("/results"):
            return Response(200, content=self.results().encode(), headers={"content-type": "application/binary"})
        if request.method == "GET" and path.startswith("/v1/messages/batches/"):
            self.polls += 1
            return Response(200, json=self.meta())
        return Response(404, json={"type": "error", "error": {"type": "not_found_error", "message": path}})


def test_through_the_real_sdk(tmp_path):
    spec, job = load_spec(write_spec(tmp_path, SCHEMA, per_batch=8)), tmp_path / "job"
    api = MockAPI()
    client = sdk_client(api)
    submit(client, spec, job, log=noop)
    assert len(api.posts) == 1
    sent = api.posts[0]["requests"]
    assert [r["custom_id"] for r in sent] == [r["custom_id"] for r in expand(spec)]
    p = sent[0]["params"]
    assert p["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert (p["model"], p["max_tokens"]) == ("claude-haiku-4-5", 300)
    assert p["tool_choice"] == {"type": "tool", "name": p["tools"][0]["name"]} and p["tools"][0]["input_schema"]["required"] == ["consejo"]
    collect(client, spec, job, poll=0, sleep=noop, progress=False)
    errs = {e["custom_id"]: e for e in read_records(job / "errors.jsonl")}
    assert {(e["reason"], e.get("error_type"), e["retryable"]) for e in errs.values()} == {
        ("errored", "invalid_request_error", False), ("expired", None, True)}
    rows = read_records(job / "dataset.jsonl")
    assert len(rows) == len(sent) - 2 and all(r["output"] == {"consejo": "Respuesta a: " + r["prompt"]} for r in rows)
    assert rows[0]["model"] == "claude-haiku-4-5-20251001"
    assert rows[0]["usage"]["cache_creation"]["ephemeral_1h_input_tokens"] == 50
    assert gen.summary(job, spec)["cost_usd"] > 0


def test_create_is_never_retried_and_a_lost_reply_is_adopted(tmp_path):
    spec, job = load_spec(write_spec(tmp_path)), tmp_path / "job"
    api = MockAPI(create_status=500)  # the SDK would retry a 500 twice; create must not be retried at all
    client = sdk_client(api)
    with pytest.raises(Exception) as e:
        submit(client, spec, job, log=noop)
    assert getattr(e.value, "status_code", None) == 500 and len(api.posts) == 1
    assert len(job_state(job)["dangling"]) == 1  # a 5xx is ambiguous: the intent stays
    # say the batch was created after all (the 500 came from a proxy): the next run finds it with list and adopts it
    api.create_status, api.created, api.batch = 200, datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"), True
    st = gen.resolve_intents(sdk_client(api), job)
    assert len(api.posts) == 1 and st["batches"][0]["id"] == "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d"


def test_a_refused_create_voids_its_intent(tmp_path):
    spec, job = load_spec(write_spec(tmp_path)), tmp_path / "job"
    api = MockAPI(create_status=400)
    client = sdk_client(api)
    with pytest.raises(Exception):
        submit(client, spec, job, log=noop)
    assert len(api.posts) == 1 and job_state(job)["dangling"] == []  # a 4xx created nothing: safe to submit again
    assert len(gen.pending(expand(spec), job_state(job))) == N


def test_family_tools_spec_plans_and_its_outputs_become_conversations(tmp_path, capsys):
    "The second example spec plans offline; an output that fits its schema converts into a valid conversation."
    import jsonschema
    from enlace.conversation import read_conversations

    spec_path = ROOT / "configs/gen/family-tools.yaml"
    assert gen.main(["plan", str(spec_path), "--dir", str(tmp_path / "job")]) == 0
    assert "48 requests" in capsys.readouterr().out
    spec = gen.load_spec(spec_path)
    output = {"messages": [
        {"role": "user", "content": "apunta leche en la lista de la compra"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "list_add", "arguments": '{"list": "compra", "items": ["leche"]}'}]},
        {"role": "tool", "content": '{"list":"compra","items":["leche"]}'},
        {"role": "assistant", "content": "Apuntado."}]}
    jsonschema.validate(output, spec["schema"])
    bad = {"messages": [{"role": "user", "content": "hola"}]}  # fits the schema, but has no assistant turn
    job = tmp_path / "job"
    gen.append_jsonl(job / "dataset.jsonl", [{"custom_id": "x1", "output": output, "model": "m"},
                                               {"custom_id": "x2", "output": bad, "model": "m"}])
    assert gen.main(["conversations", str(spec_path), "--dir", str(job), "--val-fraction", "0"]) == 0
    assert "1 train, 0 val, 1 rejected" in capsys.readouterr().out
    conv = read_conversations(job / "conversations/train.jsonl")[0]
    assert conv["messages"][1]["tool_calls"] == [{"name": "list_add", "arguments": {"list": "compra", "items": ["leche"]}}]


# ---------------------------------------------------------------- issue 19: key order, edited specs, format specs, lock

def reorder(x):
    "Every mapping with its keys in reverse order, all the way down."
    if isinstance(x, dict):
        return {k: reorder(x[k]) for k in reversed(list(x))}
    return [reorder(v) for v in x] if isinstance(x, list) else x


def reordered(p: Path) -> Path:
    "A copy of spec file `p` with every mapping reordered (same content, other key order)."
    q = p.with_name(p.stem + "-r.yaml")
    q.write_text(yaml.safe_dump(reorder(yaml.safe_load(p.read_text(encoding="utf-8"))), sort_keys=False,
                                allow_unicode=True), encoding="utf-8")
    return q


def ids_of(spec) -> list[str]:
    return [r["custom_id"] for r in expand(spec)]


def legacy_id(params, sample=0) -> str:
    "custom_id as the code before issue 19 computed it: the JSON of the params in the spec's key order."
    text = json.dumps({"params": params, "sample": sample}, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def test_reordered_keys_keep_every_id(tmp_path, capsys):
    p = write_spec(tmp_path, SCHEMA + "prices: {input: 1, output: 5}\nseeds: [{a: 1, b: 2}]\n")
    spec, job, server = load_spec(p), tmp_path / "job", Server()
    run(FakeClient(server), spec, job)
    q = reordered(p)
    spec2 = load_spec(q)
    assert list(spec2["schema"]) == list(reversed(list(spec["schema"])))  # the order did change...
    assert sorted(ids_of(spec2)) == sorted(ids_of(spec))  # ...and no id did
    capsys.readouterr()
    assert main(["plan", str(q), "--dir", str(job)]) == 0
    assert "to submit: 0 requests" in capsys.readouterr().out
    assert submit(FakeClient(server), spec2, job, log=noop) == [] and server.creates == 3


@pytest.mark.parametrize("stage", ["collected", "in_flight"])
@pytest.mark.parametrize("first", ["same order", "reordered", "same order, requests.jsonl lost"])
def test_a_job_from_before_canonical_ids_is_not_paid_again(tmp_path, monkeypatch, capsys, stage, first):
    "A job submitted with the old ids (keys in spec order) is recognised: nothing is sent or dropped, in any order."
    p, job = write_spec(tmp_path, SCHEMA), tmp_path / "job"
    server = Server(polls_to_end=0 if stage == "collected" else 1)
    with monkeypatch.context() as m:  # the code before issue 19
        m.setattr(gen, "custom_id", legacy_id)
        spec = load_spec(p)
        if stage == "collected":
            run(FakeClient(server), spec, job)
        else:
            submit(FakeClient(server), spec, job, log=noop)
        old = ids_of(spec)
    # what that code left on disk: requests.jsonl with these four keys, nothing else
    recs = [{k: r[k] for k in ("custom_id", "inputs", "sample", "params")} for r in read_records(job / "requests.jsonl")]
    (job / "requests.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    for f in set(job.iterdir()) - {job / n for n in ("requests.jsonl", "intents.jsonl", "batches.jsonl",
                                                      "results.jsonl", "errors.jsonl")}:
        f.unlink()
    if first.endswith("lost"):  # only the spec can say what the old ids were
        (job / "requests.jsonl").unlink()
    assert set(old).isdisjoint(ids_of(load_spec(p)))  # the id scheme did change
    q = reordered(p) if first == "reordered" else p
    capsys.readouterr()
    assert main(["plan", str(q), "--dir", str(job)]) == 0
    out = capsys.readouterr().out
    assert "to submit: 0 requests" in out and ("8 done" if stage == "collected" else "8 in flight") in out, out
    run(FakeClient(server), load_spec(q), job)
    assert server.creates == 3 and sorted(server.sent()) == sorted(old)
    assert "8 results of the current spec, 0 of an earlier version" in capsys.readouterr().out
    rows = read_records(job / "dataset.jsonl")
    assert sorted(r["custom_id"] for r in rows) == sorted(old)  # a row keeps the id its result came back under
    assert all(r["current_spec"] and r["output"] == {"consejo": "Respuesta a: " + r["prompt"]} for r in rows)
    # once the new code has seen the job, any key order is recognised
    q2 = reordered(q)
    assert submit(FakeClient(server), load_spec(q2), job, log=noop) == [] and server.creates == 3
    assert gen.summary(job, load_spec(q2))["done"] == N


def test_an_edited_spec_keeps_every_result_already_paid_for(tmp_path, monkeypatch, capsys):
    server = Server(polls_to_end=1)
    monkeypatch.setattr(gen, "make_client", lambda env_file: FakeClient(server))
    p, job = write_spec(tmp_path), tmp_path / "spec"
    assert main(["submit", str(p)]) == 0
    first = ids_of(load_spec(p))
    p.write_text(p.read_text(encoding="utf-8").replace("las pantallas", "el móvil"), encoding="utf-8")  # 2 of 8 change
    capsys.readouterr()
    assert main(["collect", str(p), "--poll", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "6 results of the current spec, 2 of an earlier version" in out, out
    rows = read_records(job / "dataset.jsonl")
    assert sorted(r["custom_id"] for r in rows) == sorted(first)  # every result held is written
    earlier = [r for r in rows if not r["current_spec"]]
    assert len(earlier) == 2 and all("las pantallas" in r["prompt"] for r in earlier)
    assert all(r["output"] == "Respuesta a: " + r["prompt"] for r in rows)
    # the two new prompts are submitted; the earlier results stay in the dataset, after the current ones
    assert main(["submit", str(p)]) == 0 and server.creates == 4
    assert main(["collect", str(p), "--poll", "0", "--no-progress"]) == 0
    assert "8 results of the current spec, 2 of an earlier version" in capsys.readouterr().out
    rows = read_records(job / "dataset.jsonl")
    assert [r["custom_id"] for r in rows[:N]] == ids_of(load_spec(p)) and len(rows) == N + 2
    assert [r["current_spec"] for r in rows] == [True] * N + [False] * 2


def test_results_are_checked_against_the_schema_they_were_sent_with(tmp_path, capsys):
    p, job = write_spec(tmp_path, SCHEMA), tmp_path / "job"
    server = Server(polls_to_end=1)
    submit(FakeClient(server), load_spec(p), job, log=noop)
    p.write_text(p.read_text().replace("required: [consejo]", "required: [consejo, fuente]"))  # every id changes
    collect(FakeClient(server), load_spec(p), job, poll=0, sleep=noop, progress=False)
    assert "0 results of the current spec, 8 of an earlier version" in capsys.readouterr().out
    assert read_records(job / "errors.jsonl") == [] and len(read_records(job / "dataset.jsonl")) == N


@pytest.mark.parametrize("old, new, culprit", [
    ("{tema}", "{tema:05d}", "spec.yaml: user: {tema:05d} cannot format 'el sueño' (str, variables.tema[0]): "
                             "Unknown format code 'd' for object of type 'str'"),
    ("{tema}", "{tema:zz}", "spec.yaml: user: {tema:zz} cannot format 'el sueño' (str, variables.tema[0]): "
                            "Unknown format code 'z'"),
    ("{tema}", "{tema!x}", "spec.yaml: user: {tema!x} cannot format 'el sueño' (str, variables.tema[0]): "
                           "Unknown conversion specifier x"),
    ("{tema}", "{tema:{anchura}}", "spec.yaml: seeds[0]: no value for {anchura} (did you mean 'ancho'?)"),
    ("{tema}", "{tema:{0}}", "spec.yaml: user: {0} must be a plain variable name"),
    ("{tema}", "{tema:>{ancho}}", "spec.yaml: user: {tema:>{ancho}} cannot format 'el sueño' (str, variables.tema[0]), "
                                  "'diez' (str, seeds[0].ancho): "),
    ("{tema}", "{tema} {n:05d}", "spec.yaml: user: {n:05d} cannot format 'tres' (str, seeds[1].n): "
                                 "Unknown format code 'd' for object of type 'str'"),
])
def test_a_template_that_cannot_format_a_value_is_one_line(tmp_path, capsys, old, new, culprit):
    p = write_spec(tmp_path, "seeds: [{n: 3, ancho: diez}, {n: tres, ancho: 5}]\n")
    p.write_text(p.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
    assert main(["plan", str(p)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and culprit in out.err, out.err


def test_a_second_command_on_a_busy_job_is_one_line(tmp_path, monkeypatch, capsys):
    spec, job = write_spec(tmp_path), tmp_path / "spec"
    code = ("import sys, time\nfrom enlace.common import own_folder\nwith own_folder(sys.argv[1], 'test'):\n"
            "    print('ready', flush=True)\n    time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(job)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "ready"
        server = Server()
        monkeypatch.setattr(gen, "make_client", lambda env_file: FakeClient(server))
        assert main(["submit", str(spec)]) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"pid {holder.pid}" in err and "enlace.synth command" in err, err
        assert server.creates == 0
    finally:
        holder.kill()
        holder.wait()
    assert main(["submit", str(spec)]) == 0  # the lock went with its holder


def test_torn_lines_and_unknown_result_shapes_are_skipped_and_counted(tmp_path):
    "A kill during an append can leave a torn line in the middle once more lines follow; the job goes on."
    f = tmp_path / "results.jsonl"
    deep = b'{"custom_id": "deep", "output": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"  # RecursionError in json
    f.write_bytes(b'{"custom_id": "a"}\n{"custom_id": "b", "out\n\xff\xfe\n[1, 2]\n' + deep
                  + b'{"custom_id": "c"}\n{"custom_id": "d"')
    said = []
    assert [r["custom_id"] for r in read_records(f, log=said.append)] == ["a", "c"]
    assert said == [f"warning: {f}: skipped 4 unreadable line(s); skipped a torn last line (a write that was cut short)"]
    for result in ({"type": "succeeded"}, {"type": "succeeded", "message": "text"}, {"type": "new_kind", "x": 1}, {}):
        rec = outcome(result, None)
        assert rec["reason"] == "unexpected_result" and rec["retryable"], (result, rec)


def test_a_custom_id_with_two_contents_is_reported_and_kept_out(tmp_path):
    def row(cid, q):
        return json.dumps({"custom_id": cid, "output": {"pregunta": q, "respuesta": "Vale."}}) + "\n"

    (tmp_path / "dataset.jsonl").write_text(row("a", "hola") + row("a", "adiós") + row("b", "¿qué tal?") + row("b", "¿qué tal?"))
    counts = dataset_conversations(tmp_path, val_fraction=0.0)
    assert (counts["train"], counts["val"], counts["rejected"]) == (1, 0, 2), counts
    kept = [json.loads(line) for line in (tmp_path / "conversations" / "train.jsonl").read_text().splitlines()]
    assert [c["meta"]["custom_id"] for c in kept] == ["b"]
    rejected = [json.loads(line) for line in (tmp_path / "conversations" / "rejected.jsonl").read_text().splitlines()]
    assert {r["custom_id"] for r in rejected} == {"a"} and "holds 2 different outputs" in rejected[0]["reason"]
