"""The house, checked: a flat core in pipeline order with wings it never imports, one home for each shared helper,
one generation engine, no private imports across modules, and code that reads one statement per line."""
import ast
import json
import re
from pathlib import Path

import pytest

from conftest import ROOT

PKG = ROOT / "enlace"
MODULES = sorted(p for p in PKG.rglob("*.py") if p.name != "_modidx.py")
WINGS = ("enlace.tasks", "enlace.synth", "enlace.agent")
# reading nbs/ in order follows the data: these are the default_exp of the numbered notebooks, in order
PIPELINE = ["config", "common", "backends", "model", "tokenizer", "corpus", "shards", "prepare", "dataloader",
            "checkpoint", "engine", "train", "bpb", "eval", "report", "track", "drift", "conversation", "household", "tools",
            "chat", "serve", "export"]
WING_NOTEBOOKS = ["tasks.conjugations.corpus", "tasks.conjugations.ngram", "tasks.conjugations.evaluate",
                  "tasks.assistant.data", "tasks.assistant.evaluate", "tasks.conjugations.pairs", "tasks.assistant.lexicon",
                  "tasks.assistant.grammar", "tasks.assistant.client", "tasks.assistant.phrases", "tasks.assistant.recall",
                  "synth", "agent.tools.search"]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path):
    "(imported module, imported names, line, inside a function) for every import statement of a module."
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inner = {id(s) for f in funcs for s in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno, id(node) in inner
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base) if node.level else node.module
            yield mod, [a.name for a in node.names], node.lineno, id(node) in inner


def default_exps() -> dict[str, str]:
    "{notebook name: default_exp} of the numbered notebooks."
    out = {}
    for nb in sorted((ROOT / "nbs").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        exp = [m.group(1) for c in cells for m in re.finditer(r"^#\| default_exp (\S+)", "".join(c["source"]), re.M)]
        out[nb.name] = exp[0] if exp else None
    return out


def test_notebooks_follow_the_pipeline_then_the_wings():
    exps = default_exps()
    assert list(exps.values()) == PIPELINE + WING_NOTEBOOKS, exps
    for name, exp in exps.items():  # the docs page is the notebook's name: no clash with the run notebook's page
        assert name.split("_", 1)[1] != "train.ipynb", name


def test_every_cli_lives_in_its_module():
    "No shim modules: `python -m enlace.X` runs the module X that its notebook exports."
    assert not list(PKG.rglob("__main__.py")), list(PKG.rglob("__main__.py"))
    exported = {PKG / (exp.replace(".", "/") + ".py") for exp in default_exps().values()}
    clis = [p for p in MODULES if 'if __name__ == "__main__"' in p.read_text(encoding="utf-8")]
    assert clis and set(clis) <= exported, set(clis) - exported
    for p in clis:
        assert "raise SystemExit(run_cli(main))" in p.read_text(encoding="utf-8"), f"{p}: a pipe closed early must not trace"


def test_no_private_imports_across_modules():
    bad = [f"{p.relative_to(ROOT)}:{line}: from {mod} import {n}"
           for p in MODULES for mod, names, line, _ in imports(p)
           if mod and mod.startswith("enlace") and mod != module_name(p) for n in names if n.startswith("_")]
    assert not bad, "\n".join(bad)


def test_the_core_never_imports_a_wing():
    core = [p for p in MODULES if p.parent == PKG]
    bad = [f"{p.name}:{line}: {mod}" for p in core for mod, _, line, _ in imports(p)
           if mod and mod.startswith(WINGS)]
    assert not bad, "\n".join(bad)
    # the one dispatch point names the wing's hooks as strings, imported only when that data source is used
    assert "enlace.tasks.conjugations" in (PKG / "dataloader.py").read_text(encoding="utf-8")


def test_no_hidden_in_package_imports():
    "Dependencies are visible at the top of each module, not hidden in function bodies."
    bad = [f"{p.relative_to(ROOT)}:{line}: {mod}" for p in MODULES for mod, _, line, inner in imports(p)
           if inner and mod and mod.startswith("enlace")]
    assert not bad, "\n".join(bad)


def test_one_home_for_shared_helpers_and_for_generation():
    defs = {}
    for p in MODULES:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defs.setdefault(node.name, []).append(module_name(p))
    for name, home in [("sha256_file", "enlace.common"), ("atomic_write", "enlace.common"),
                       ("progress_interval", "enlace.common"), ("KVCache", "enlace.engine"),
                       ("sample_next_token", "enlace.engine"), ("load_model", "enlace.checkpoint"),
                       ("finish_run", "enlace.report"), ("Tokenizer", "enlace.tokenizer")]:
        assert defs.get(name) == [home], (name, defs.get(name))
    samplers = [p.name for p in MODULES if "torch.multinomial" in p.read_text(encoding="utf-8")]
    assert samplers == ["engine.py"], samplers
    assert defs.get("generate") == ["enlace.engine"], defs.get("generate")  # Engine.generate, and no other


def _style_problems(path: Path) -> list[str]:
    "Lines over 120 columns (not the docstring and __all__ that nbdev writes), `;`, compound one-liners."
    text = path.read_text(encoding="utf-8")
    out = []
    in_all = False
    for i, line in enumerate(text.splitlines(), 1):
        in_all = line.startswith("__all__") or (in_all and line.startswith(" "))
        if len(line) > 120 and i > 1 and not in_all:
            out.append(f"{path.name}:{i}: {len(line)} columns")
    tree = ast.parse(text)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                for a, b in zip(stmts, stmts[1:]):
                    if a.end_lineno == b.lineno:
                        out.append(f"{path.name}:{b.lineno}: two statements on one line")
        compound = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)
        if isinstance(node, compound) and node.body and node.body[0].lineno == node.lineno:
            if not (isinstance(node, ast.FunctionDef) and isinstance(node.body[0], ast.Expr)):
                out.append(f"{path.name}:{node.lineno}: a body on the line of its `{type(node).__name__.lower()}`")
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_one_statement_per_line_and_120_columns(path):
    assert not _style_problems(path), "\n".join(_style_problems(path))


def test_the_style_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"doc"\nx = 1; y = 2\nif x: y = 3\n' + "z = '" + "a" * 130 + "'\n")
    assert len(_style_problems(bad)) == 3, _style_problems(bad)


# %% the wing rule, kept in substance: registries only, no methods attached from outside, no wing importing another

WING_PATH = re.compile(r"^enlace\.(tasks|synth|agent)\b[\w.]*(:\w+)?$")  # a wing's module, or 'module:function'
REGISTRIES = {"enlace.dataloader": {"TASKS"}, "enlace.tools": {"SEARCH"}}  # where the core names its wings' hooks
LOADER = ("enlace.dataloader", "load_hook")  # the one function that imports by name


def _is_core(mod: str) -> bool:
    return mod == "enlace" or (mod.count(".") == 1 and (PKG / (mod.split(".")[1] + ".py")).is_file())


def wing_of(mod: str) -> str | None:
    "The wing a module belongs to: 'enlace.tasks.X', 'enlace.synth' or 'enlace.agent'; None for the core."
    parts = mod.split(".")
    if mod.startswith("enlace.tasks."):
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if mod.startswith(("enlace.synth", "enlace.agent")) else None


def hidden_wing_reaches(source: str, mod: str) -> list[str]:
    "In a core module: import_module/__import__ outside the loader, and wing names outside a registry assignment."
    tree = ast.parse(source)
    out = []
    registry_nodes = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in REGISTRIES.get(mod, ())
                                                for t in node.targets):
            registry_nodes |= {id(n) for n in ast.walk(node)}
    loader = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and (mod, n.name) == LOADER]
    allowed_calls = {id(n) for f in loader for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__") and id(node) not in allowed_calls:
                out.append(f"{mod}:{node.lineno}: {name}(...) outside {LOADER[0]}.{LOADER[1]}: use a registry")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and WING_PATH.match(node.value):
            if id(node) not in registry_nodes:
                out.append(f"{mod}:{node.lineno}: {node.value!r} named outside a registry")
    return out


def attached_methods(source: str, mod: str) -> list[str]:
    "Module-level `Class.attr = ...` assignments to a class of the module: methods assembled from outside."
    tree = ast.parse(source)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id in classes:
                    out.append(f"{mod}:{node.lineno}: {el.value.id}.{el.attr} assigned from outside the class")
    return out


def cross_wing_imports(path: Path) -> list[str]:
    "Imports of a wing module from another wing (the core, or its own wing, only)."
    own = wing_of(module_name(path))
    return [f"{module_name(path)}:{line}: imports {mod}" for mod, _, line, _ in imports(path)
            if mod and mod.startswith("enlace") and not _is_core(mod) and wing_of(mod) != own]


def test_the_core_reaches_wings_only_through_registries():
    core = [p for p in MODULES if p.parent == PKG]
    bad = [b for p in core for b in hidden_wing_reaches(p.read_text(encoding="utf-8"), module_name(p))]
    assert not bad, "\n".join(bad)
    # each registry names real hooks: a 'module:function' that exists in that wing
    from enlace.dataloader import TASKS, load_hook
    from enlace.tools import SEARCH
    specs = [s for hooks in TASKS.values() for s in hooks.values() if ":" in s] + [SEARCH]
    assert len(specs) >= 10 and all(callable(load_hook(s)) for s in specs), specs


def test_no_method_is_attached_from_outside_its_class():
    bad = [b for p in MODULES for b in attached_methods(p.read_text(encoding="utf-8"), module_name(p))]
    assert not bad, "\n".join(bad)


def test_wings_never_import_each_other():
    wings = [p for p in MODULES if wing_of(module_name(p))]
    assert len({wing_of(module_name(p)) for p in wings}) >= 4  # conjugations, assistant, synth, agent
    bad = [b for p in wings for b in cross_wing_imports(p)]
    assert not bad, "\n".join(bad)


def test_the_wing_rule_checks_can_fail(tmp_path):
    core = 'import importlib\nW = "enlace.tasks.pairs"\ndef f():\n    return importlib.import_module("enlace.tasks.pairs")\n'
    assert len(hidden_wing_reaches(core, "enlace.eval")) == 3, hidden_wing_reaches(core, "enlace.eval")
    registry = 'TASKS = {"a": {"make_data": "enlace.tasks.x.corpus:make_data"}}\n'
    assert hidden_wing_reaches(registry, "enlace.dataloader") == []
    assert len(hidden_wing_reaches(registry, "enlace.eval")) == 1  # a registry only where the rule says
    attached = "class Member:\n    pass\ndef _recall(self):\n    pass\nMember.recall, Member.x = _recall, 1\n"
    assert len(attached_methods(attached, "enlace.household")) == 2
    wing = PKG / "tasks" / "assistant" / "probe_cross_wing.py"
    wing.write_text("from ..conjugations.corpus import examples\nfrom ...household import MONTHS\n")
    try:
        assert [b.split(": ", 1)[1] for b in cross_wing_imports(wing)] == ["imports enlace.tasks.conjugations.corpus"]
    finally:
        wing.unlink()
