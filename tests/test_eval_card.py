"""python -m enlace.eval: the Spanish evaluation card (bpb, XStoryCloze-es, minimal pairs, tool choice), one-line
refusals, and the same XStoryCloze accuracy as lm-evaluation-harness itself on the transformers export."""
import json
import random
import shutil

import pytest
import torch
import yaml

from enlace.checkpoint import export_model
from enlace.config import load_layer
from enlace.conversation import CHAT_TEMPLATE
from enlace.eval import STORY_COLUMNS, EvalError, loglikelihoods, read_stories, task_assistant_natural, task_tools
from enlace.model import Transformer
from enlace.tokenizer import Tokenizer, train_tokenizer

from conftest import ROOT

WORDS = ("la casa de mi abuela tenía un patio con flores y un perro que ladraba cuando llegaba el cartero "
         "Ana fue al mercado compró pan y leche se alegró mucho porque todo estaba muy barato").split()


def sentence(rng, n=None):
    text = " ".join(rng.choice(WORDS) for _ in range(n or rng.randint(3, 9)))
    return text[0].upper() + text[1:] + rng.choice([".", ".", "!", '; "dijo" él.'])


def write_stories(path, n, seed=0):
    rng = random.Random(seed)
    rows = ["\t".join(STORY_COLUMNS)]
    for i in range(n):
        rows.append("\t".join([f"s{i}", *(sentence(rng) for _ in range(6)), str(rng.randint(1, 2))]))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory):
    "A small random BPE model file (and its model, tokenizer) in a module-wide folder."
    d = tmp_path_factory.mktemp("card")
    tok = train_tokenizer([" ".join(WORDS)] * 40, vocab_size=320)
    tok.save(d / "tok", corpus_hash="test")
    c = load_layer(ROOT / "configs/model/smoke.yaml", "model").model_copy(update={"vocab_size": tok.vocab_size})
    torch.manual_seed(0)
    model = Transformer(c).eval()
    return export_model(model, d / "model", tok), model, tok


def test_cli_card_with_every_text_task(tmp_path, cli, bpe_model):
    mf, model, tok = bpe_model
    (tmp_path / "novela.txt").write_text(" ".join(sentence(random.Random(1), 12) for _ in range(30)))
    tsv = write_stories(tmp_path / "s.tsv", 12)
    tasks = f"bpb={tmp_path / 'novela.txt'},xstorycloze={tsv},minimal-pairs"
    r = cli("enlace.eval", mf, "--tasks", tasks, "--limit", "5", "--json", tmp_path / "card.json")
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "card.json").read_text())
    assert list(res) == ["bpb", "xstorycloze", "minimal-pairs"]
    assert res["bpb"]["bpb"] > 0 and res["xstorycloze"]["n"] == 5
    per = [k for k in res["minimal-pairs"] if k.startswith("acc.")]
    assert len(per) >= 8 and res["minimal-pairs"]["n"] == 5 * len(per)  # --limit: 5 pairs of each phenomenon
    assert all(0 <= res["minimal-pairs"][k] <= 1 for k in per)
    assert "(chance 0.50)" in r.stdout and "acc_norm" in r.stdout


def test_int8_weights_cost_little_and_a_missing_torchao_is_one_line(tmp_path, cli, bpe_model, monkeypatch, capsys):
    "--int8 scores with torchao's int8 weights: bits per byte moves, a little; without torchao, one line and exit 2."
    pytest.importorskip("torchao", reason="torchao is not installed: pip install -e '.[int8]'")
    mf, model, tok = bpe_model
    (tmp_path / "novela.txt").write_text(" ".join(sentence(random.Random(1), 12) for _ in range(30)))
    got = {}
    for flags in ((), ("--int8",)):
        out = tmp_path / f"card{len(flags)}.json"
        r = cli("enlace.eval", mf, "--tasks", f"bpb={tmp_path / 'novela.txt'}", "--json", out, *flags)
        assert r.returncode == 0, r.stderr
        got[flags] = json.loads(out.read_text())["bpb"]["bpb"]
    assert got[()] != got[("--int8",)] and abs(got[("--int8",)] / got[()] - 1) < 0.01, got
    import importlib.util

    from enlace import eval as card_cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))
    assert card_cli.main([str(mf), "--tasks", f"bpb={tmp_path / 'novela.txt'}", "--int8"]) == 2
    assert capsys.readouterr().err == "eval error: --int8 needs torchao: pip install -e '.[int8]'\n"


def test_batched_scores_equal_one_by_one(bpe_model):
    _, model, tok = bpe_model
    rng = random.Random(2)
    reqs = [(sentence(rng), " " + sentence(rng)) for _ in range(9)] + [("", sentence(rng))]
    one = loglikelihoods(model, tok, reqs, batch=1)
    assert max(abs(a - b) for a, b in zip(one, loglikelihoods(model, tok, reqs, batch=4))) < 1e-4
    # a context longer than the model reads loses its start, and still scores the whole continuation
    ctx = " ".join([sentence(rng, 9)] * 200)
    ids = tok.document_ids(ctx + " casa")
    n = len(tok.document_ids(ctx + " casa")) - len(tok.document_ids(ctx))
    keep = torch.tensor([ids[-(model.cfg.max_seq_len + 1) :]])  # what the model can read, plus the last target
    with torch.no_grad():
        logp = torch.log_softmax(model(keep[:, :-1]).float(), -1)[0]
    want = sum(logp[-n + j, keep[0, -n + j]].item() for j in range(n))
    assert len(ids) > model.cfg.max_seq_len + 1
    assert abs(loglikelihoods(model, tok, [(ctx, " casa")])[0] - want) < 1e-4


def test_tools_task_on_a_chat_model(tmp_path):
    torch.manual_seed(0)
    model = Transformer(load_layer(ROOT / "configs/model/smoke.yaml", "model")).eval()
    mf = export_model(model, tmp_path, Tokenizer.bytes(), {"chat_template": CHAT_TEMPLATE})
    from enlace.checkpoint import load_model

    m, tok, man = load_model(mf)
    got = task_tools(m, tok, man, limit=3)
    assert got["n"] == 3 and 0 <= got["tool_choice"] <= 1
    from enlace.eval import default_tasks

    assert ("tools", None) in default_tasks(man) and ("tools", None) not in default_tasks({})
    assert ("assistant-natural", None) in default_tasks(man) and ("assistant-natural", None) not in default_tasks({})
    got = task_assistant_natural(m, tok, man, limit=3)  # the requests written apart, with the real tools
    assert got["n"] == 3 and 0 <= got["tool_choice"] <= 1 and got["ungrounded_executed"] == 0
    bad = tmp_path / "requests.jsonl"
    bad.write_text('{"id": "x1", "request": "apunta leche", "speaker": "Ana", "intent": "list_add", "tool": "list_add", '
                   '"args": {"items": ["huevos"]}, "source": "test"}\n', encoding="utf-8")
    with pytest.raises(EvalError, match=r"requests.jsonl:1: .*'huevos' of items is not in the request"):
        task_assistant_natural(m, tok, man, path=bad)
    with pytest.raises(EvalError, match="not found"):
        task_assistant_natural(m, tok, man, path=tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    "make,args,expect",
    [
        ("columns", ["--tasks", "xstorycloze={tsv}"], "missing column(s) AnswerRightEnding"),
        ("answer", ["--tasks", "xstorycloze={tsv}"], "line 3: AnswerRightEnding is '0'; it must be 1 or 2"),
        ("fields", ["--tasks", "xstorycloze={tsv}"], "line 2: 7 fields, the header has 8"),
        (None, ["--tasks", "bpb,minimal-pair"], "unknown task 'minimal-pair' (did you mean 'minimal-pairs'?)"),
        (None, ["--tasks", "xstorycloze={tmp}/nope.tsv"], "nope.tsv: not found; name the stories' TSV"),
        (None, ["--tasks", "tools"], "not a chat model"),
        (None, ["--tasks", "assistant-natural"], "not a chat model"),
        (None, ["--limit", "0"], "'0' is not a positive whole number"),
        (None, ["--batch", "0"], "'0' is not a positive whole number"),
        ("empty_ending", ["--tasks", "xstorycloze={tsv}"], "line 2: an empty ending"),
        ("no_pairs", ["--tasks", "minimal-pairs={tmp}/pairs.jsonl"], "pairs.jsonl: no pairs in it"),
        (None, ["--tasks", "minimal-pairs", "--json", "{tmp}/nope/card.json"], "cannot be written"),
        ("empty_text", ["--tasks", "bpb={tmp}/empty.txt"], "empty.txt: no text to score"),
    ],
)
def test_bad_input_is_one_line(tmp_path, cli, bpe_model, make, args, expect):
    mf = bpe_model[0]
    tsv = write_stories(tmp_path / "s.tsv", 3)
    lines = tsv.read_text().splitlines()
    if make == "columns":
        lines[0] = lines[0].replace("\tAnswerRightEnding", "")
    elif make == "answer":
        lines[2] = lines[2][:-1] + "0"
    elif make == "fields":
        lines[1] = lines[1].rsplit("\t", 1)[0]
    elif make == "empty_ending":
        cells = lines[1].split("\t")
        cells[5] = " "
        lines[1] = "\t".join(cells)
    elif make == "empty_text":
        (tmp_path / "empty.txt").write_text("")
    elif make == "no_pairs":
        (tmp_path / "pairs.jsonl").write_text("\n\n")
    tsv.write_text("\n".join(lines) + "\n")
    r = cli("enlace.eval", mf, *(a.format(tsv=tsv, tmp=tmp_path) for a in args))
    assert r.returncode == 2, r.stdout
    lines = r.stderr.strip().splitlines()
    assert expect in lines[-1], r.stderr
    assert len(lines) == 1 or lines[-1].startswith("python -m enlace.eval: error:"), r.stderr  # argparse adds usage


def test_a_text_of_one_byte_is_refused_in_one_line():
    "A byte-level model scores no byte of a one-byte file (the first has no context): a ZeroDivisionError before."
    from enlace.eval import EvalError, pooled_bpb

    with pytest.raises(EvalError, match="the text is too short to score"):
        pooled_bpb([{"bits": 0.0, "bytes": 0}])


def test_a_tsv_with_a_bom_and_blank_lines_reads(tmp_path):
    tsv = write_stories(tmp_path / "s.tsv", 4)
    tsv.write_bytes(b"\xef\xbb\xbf" + tsv.read_bytes().replace(b"\n", b"\n\n", 2))  # Excel's BOM, blank lines
    assert len(read_stories(tsv)) == 4


def test_model_file_without_its_tokenizer(tmp_path, cli, bpe_model):
    mf = bpe_model[0]
    shutil.copytree(mf.parent, tmp_path / "m")
    shutil.rmtree(next((tmp_path / "m").glob("tokenizer-*")))
    r = cli("enlace.eval", tmp_path / "m" / mf.name, "--tasks", "minimal-pairs")
    assert r.returncode == 2 and "tokenizer" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_empty_context_scores_as_the_harness(tmp_path, bpe_model):
    "Minimal pairs have no context: the harness prefixes the export's bos_token, <|eos|>, as enlace.eval does."
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from enlace.export import export

    mf, model, tok = bpe_model
    export(mf, tmp_path / "hf")
    lm = HFLM(pretrained=str(tmp_path / "hf"), dtype="float32", device="cpu", batch_size=4)
    texts = ["La casa de mi abuela tenía un patio.", "Ana fue al mercado y compró pan."]
    reqs = [Instance("loglikelihood", {}, ("", s), i) for i, s in enumerate(texts)]
    theirs = [ll for ll, _ in lm.loglikelihood(reqs)]
    ours = loglikelihoods(model, tok, [("", s) for s in texts])
    assert max(abs(a - b) for a, b in zip(theirs, ours)) < 1e-3, (theirs, ours)


def test_same_accuracy_as_lm_evaluation_harness(tmp_path, bpe_model, monkeypatch):
    "The shipped task YAML, run by lm_eval on the export, gives our per-choice scores and so our accuracies."
    lm_eval = pytest.importorskip("lm_eval")
    pytest.importorskip("transformers")
    from enlace.export import export
    from enlace.eval import multiple_choice

    mf, model, tok = bpe_model
    export(mf, tmp_path / "hf")
    src = ROOT / "../shared/eval/xstorycloze_es_dev.tsv"
    tsv = tmp_path / "stories.tsv"
    if src.is_file():  # real stories when they are beside the repo (40 of them), made-up ones otherwise
        tsv.write_text("\n".join(src.read_text(encoding="utf-8").splitlines()[:41]) + "\n", encoding="utf-8")
    else:
        write_stories(tsv, 40, seed=5)
    task = yaml.safe_load((ROOT / "configs/eval/xstorycloze_es_local.yaml").read_text())
    task["dataset_kwargs"]["data_files"]["validation"] = str(tsv)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "t.yaml").write_text(yaml.safe_dump(task))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tmp_path / 'hf'},dtype=float32",
        tasks=[task["task"]],
        task_manager=TaskManager(include_path=str(tmp_path / "tasks")),
        device="cpu",
        batch_size=8,
        log_samples=True,
    )
    theirs = out["results"][task["task"]]
    stories = read_stories(tsv)
    ours = multiple_choice(model, tok, stories)
    assert abs(theirs["acc,none"] - ours["acc"]) <= 0.005 and abs(theirs["acc_norm,none"] - ours["acc_norm"]) <= 0.005
    samples = out["samples"][task["task"]]
    assert len(samples) == len(stories) == 40
    first = lambda r: float(r[0] if isinstance(r, (list, tuple)) else r)  # (loglikelihood, is_greedy) or the value
    their_ll = {s["doc_id"]: [first(r) for r in s["filtered_resps"]] for s in samples}
    our_ll = loglikelihoods(model, tok, [(st["context"], " " + c) for st in stories for c in st["choices"]])
    for i in range(len(stories)):
        for j in range(2):
            assert abs(their_ll[i][j] - our_ll[2 * i + j]) < 1e-3, (i, j)


def test_default_data_is_found_from_any_folder(tmp_path, cli, bpe_model):
    "The default TSV is looked up in the current folder and then in the clone: the CLI works from anywhere."
    if not (ROOT / "../shared/eval/xstorycloze_es_dev.tsv").is_file():
        pytest.skip("no ../shared/eval beside the repo")
    r = cli("enlace.eval", bpe_model[0], "--tasks", "xstorycloze", "--limit", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "xstorycloze    acc " in r.stdout
