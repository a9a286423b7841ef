"""The package's layout: no import cycle among placer's modules, and the layers of
docs/architecture.md ("nothing imports a layer above it") kept where they are easy to state.

Imports are read with ``ast`` from every module under src/placer, at module level and inside
functions alike: a function-level import is a dependency too (it only runs later)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "placer"

# Imports allowed to close a cycle, each with who answers for it: none (issue 49 cut the last ones).
KNOWN_BACK_EDGES: dict[tuple[str, str], str] = {}

# layer -> the packages (first name under placer) it must not import
_ABOVE_SOURCES = {"zoo", "grouping", "sim", "objectives", "methods", "rl", "nn", "runtime", "bench", "viz", "cli",
                  "build", "resolve", "compare"}
FORBIDDEN = {
    "frontends": _ABOVE_SOURCES,  # frontends build OpGraphs from files and PyTorch: nothing above them
    "zoo": _ABOVE_SOURCES - {"zoo"},  # the zoo captures through the frontends, and no higher
    "sim": {"grouping", "objectives", "methods", "rl", "nn", "runtime", "bench", "viz", "cli", "frontends", "zoo"},
    "grouping": {"objectives", "methods", "rl", "nn", "runtime", "bench", "viz", "cli", "frontends", "zoo"},
    "objectives": {"methods", "rl", "nn", "runtime", "bench", "viz", "cli", "frontends", "zoo"},
    # a method knows no file format and no experiment
    "methods": {"bench", "viz", "cli", "runtime", "frontends", "zoo", "build", "resolve", "compare"},
    # the bound engine reads a Problem and the simulator's semantics; no method, file or experiment
    "lowerbound": {"methods", "rl", "nn", "runtime", "bench", "viz", "cli", "frontends", "zoo", "build", "resolve",
                   "compare"},
}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _nearest(name: str, mods) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the placer modules it imports (``from placer.x import y`` names ``placer.x.y`` when
    that is a module, else ``placer.x``)."""
    mods = _modules()
    graph = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(_nearest(a.name, mods) for a in node.names if a.name.split(".")[0] == "placer")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                if full.split(".")[0] != "placer":
                    continue
                for a in node.names:
                    sub = f"{full}.{a.name}"
                    out.add(sub if sub in mods else _nearest(full, mods))
        out.discard(None)
        out.discard(mod)
        graph[mod] = out
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_cycles_finds_a_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [{"a", "b", "c"}]


def test_import_graph_reads_function_level_imports():
    g = import_graph()
    assert "placer.frontends.torch" in g["placer.zoo.models"]  # imported inside zoo_capture


def test_no_import_cycle():
    graph = import_graph()
    for a, b in KNOWN_BACK_EDGES:
        graph.get(a, set()).discard(b)
    bad = [sorted(c) for c in cycles(graph)]
    assert not bad, f"import cycles among placer's modules: {bad}"


def test_layers():
    def layer(mod):
        parts = mod.split(".")
        return parts[1] if len(parts) > 1 else ""

    bad = [f"{a} imports {b}" for a, outs in sorted(import_graph().items()) for b in sorted(outs)
           if layer(b) in FORBIDDEN.get(layer(a), ())]
    assert not bad, "imports of a layer above (docs/architecture.md): " + "; ".join(bad)


def test_torch_load_is_called_only_by_the_one_checkpoint_reader():
    """Every checkpoint goes through placer.io.read_checkpoint (size cap, regular files only,
    weights_only=True): no other module calls torch.load."""
    callers = []
    for mod, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
                callers.append(mod)
    assert callers == ["placer.io"], callers


def _docstring_share(path: Path) -> float:
    lines, doc = len(path.read_text().splitlines()), 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc += first.end_lineno - first.lineno + 1
    return doc / lines


def test_learned_method_docstrings_say_what_the_code_does_not_what_it_measured():
    """Measurements and tuning notes live in docs/methods/, not in docstrings: the learned methods'
    modules are under a fifth docstring (Post and Placeto were 41-43%, most of it a lab notebook)."""
    for name in ("post", "placeto"):
        assert _docstring_share(SRC / "methods" / "learned" / f"{name}.py") < 0.2, name
        assert (SRC.parents[1] / "docs" / "methods" / f"{name}.md").exists()


def test_no_method_config_field_takes_a_file():
    """Methods know no files: a learned method's policy or encoder is an object, and a file name given
    for one is refused (the CLI reads the file), as is any config field named for a path."""
    import dataclasses

    import pytest

    from placer.cluster import preset
    from placer.errors import InputError
    from placer.methods import METHODS, Budget, run_method
    from placer.problem import Problem
    from placer.zoo.synthetic import layered_training_graph

    problem = Problem(layered_training_graph(8, seed=0), preset("k80x2"))
    for name, info in METHODS.items():
        names = {f.name for f in dataclasses.fields(info.config)}
        assert not names & {"save", "log", "pretrained", "path", "out", "checkpoint"}, (name, names)
        for field in sorted(names & {"policy", "encoder"}):
            if info.available():
                continue
            with pytest.raises(InputError):  # when the config is built, or else when the run starts
                run_method(name, problem, Budget(2), 0, **{field: "some/file.pt"})
