"""A corpus of hostile or careless commands, run through the real CLI (issue 12).

Every case must end with exit status 2, exactly one line on stderr (``error: ...``), no traceback,
no raw control character, and nothing written in the folder it ran in. The cases that need a real
process (a FIFO, Ctrl-C, the umask of written files) run ``python -m placer`` in a subprocess.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import stat
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from conftest import run_cli

HAS_TORCH = __import__("importlib").util.find_spec("torch") is not None


# ---------------------------------------------------------------------- building bad files
def _doc(kind="graph", **kw):
    return {"format": "placer", "version": 1, "kind": kind, **kw}


OPS = [{"name": "a", "compute_us": {"gpu": 1, "cpu": 2}}, {"name": "b", "compute_us": {"gpu": 2, "cpu": 3}}]


def graph_json(ops=None, edges=None, **kw) -> str:
    return json.dumps(_doc(ops=OPS if ops is None else ops, edges=[["a", "b", 8]] if edges is None else edges, **kw))


def op_with(**fields):
    return [{**OPS[0], **fields}, OPS[1]]


CLUSTER = _doc("cluster", devices=[{"name": "gpu:0", "kind": "gpu", "memory_bytes": 2**34},
                                   {"name": "cpu:0", "kind": "cpu", "memory_bytes": 2**36}])


def cluster_json(**kw) -> str:
    return json.dumps({**CLUSTER, **kw})


def put(t: Path, name: str, data) -> str:
    p = t / name
    p.parent.mkdir(parents=True, exist_ok=True)
    (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
    return str(p)


def zero_bomb(t: Path) -> str:
    """400 MiB of zero bytes in a few hundred KiB of gzip (400 identical members)."""
    member = gzip.compress(b"\0" * 2**20, mtime=0)
    return put(t, "bomb.json.gz", member * 400)


def json_bomb(t: Path) -> str:
    """A gzip'd JSON array padded with 8 MiB of spaces (the case runs with a 4 MiB input limit)."""
    body = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = body.compress(b"[" + b" " * (8 * 2**20) + b"]") + body.flush()
    return put(t, "spaces.json.gz", data)


def checkpoint(t: Path, **state) -> str:
    import torch

    from placer.rl.reinforce import CHECKPOINT_FORMAT

    p = t / "policy.pt"
    torch.save({"format": CHECKPOINT_FORMAT, **state}, p)
    return str(p)


def policy_for_devices(t: Path, n: int) -> str:
    from placer.nn.placeto import PolicyConfig
    from placer.rl.env import EnvConfig
    from placer.methods.learned.placeto import PlacetoConfig

    return policy_file(t, PolicyConfig(n_actions=n))


def policy_file(t: Path, cfg=None, weights=None, edit=None) -> str:
    """A Placeto checkpoint with network settings ``cfg`` (default the paper's) and ``weights`` (default a
    fresh network's for ``cfg``); ``edit(state)`` spoils it."""
    from placer.methods.learned.placeto import PlacetoConfig
    from placer.nn.placeto import PlacetoNet, PolicyConfig
    from placer.rl.env import EnvConfig

    cfg = cfg or PolicyConfig()
    state = {"policy_config": cfg.to_dict(), "env_config": EnvConfig().to_dict(),
             "rl_config": PlacetoConfig().reinforce(0).to_dict(),
             "model": weights if weights is not None else dict(PlacetoNet(cfg).state_dict())}
    if edit is not None:
        edit(state)
    return checkpoint(t, **state)


def _nan_weight(state):
    k = next(iter(state["model"]))
    state["model"][k] = state["model"][k].clone().fill_(float("nan"))


def _drop_weight(state):
    state["model"].pop(next(iter(state["model"])))


def _wrong_shape(state):
    from placer.nn.placeto import PlacetoNet, PolicyConfig

    state["model"] = dict(PlacetoNet(PolicyConfig(hidden=16)).state_dict())  # the settings say hidden=8


def a_file(t: Path) -> str:
    return put(t, "plain.txt", "not a folder\n")


def ro_folder() -> str:
    """A folder no one can create files in, root included."""
    return "/proc"


G = "synthetic"  # a built-in graph: loads in well under a second


# (id, argv builder taking the temp folder, text the error line must contain)
CASES = [
    # usage errors: click/typer must never show a traceback
    ("unknown command", lambda t: ["nosuchcmd"], "No such command"),
    ("unknown option", lambda t: ["info", G, "--bogus"], "No such option: --bogus"),
    ("unknown bench experiment", lambda t: ["bench", "nosuchexp"], "No such command"),
    ("missing argument", lambda t: ["info"], "Missing argument"),
    ("budget not an integer", lambda t: ["optimize", G, "--budget", "lots"], "--budget"),
    ("bad --max-input-size", lambda t: ["--max-input-size", "huge", "info", G], "is not a size"),
    # malformed files: every one an InputError naming the file
    ("JSON nested 10,000 deep", lambda t: ["info", put(t, "deep.json", "[" * 10_000 + "]" * 10_000)], "nested too deeply"),
    ("object nested 10,000 deep", lambda t: ["info", put(t, "deep2.json", '{"a":' * 10_000 + "1" + "}" * 10_000)],
     "nested too deeply"),
    ("400-digit integer cost", lambda t: ["info", put(t, "g.json", graph_json(op_with(compute_us={"gpu": int("9" * 400)})))],
     "400 digits"),
    ("5,000-digit integer", lambda t: ["info", put(t, "g.json", graph_json().replace('"gpu": 1', '"gpu": ' + "7" * 5000))],
     "g.json"),
    ("compute_us a list", lambda t: ["info", put(t, "g.json", graph_json(op_with(compute_us=[1, 2])))], "compute_us"),
    ("compute_us a string", lambda t: ["info", put(t, "g.json", graph_json(op_with(compute_us="fast")))], "compute_us"),
    ("compute_us value a string", lambda t: ["info", put(t, "g.json", graph_json(op_with(compute_us={"gpu": "1"})))],
     "not a number"),
    ("mirror a list", lambda t: ["info", put(t, "g.json", graph_json(op_with(mirror=["b"])))], "mirror"),
    ("mirror a number", lambda t: ["info", put(t, "g.json", graph_json(op_with(mirror=1)))], "mirror"),
    ("mirror unknown op", lambda t: ["info", put(t, "g.json", graph_json(op_with(mirror="zz")))], "unknown op"),
    ("meta a string", lambda t: ["info", put(t, "g.json", graph_json(meta="x"))], "meta"),
    ("meta a list", lambda t: ["info", put(t, "g.json", graph_json(meta=[1]))], "meta"),
    ("type an object", lambda t: ["info", put(t, "g.json", graph_json(op_with(type={"a": 1})))], "type"),
    ("role unknown", lambda t: ["info", put(t, "g.json", graph_json(op_with(role="sideways")))], "role"),
    ("colocation a string", lambda t: ["info", put(t, "g.json", graph_json(op_with(colocation="x")))], "colocation"),
    ("edge bytes a string", lambda t: ["info", put(t, "g.json", graph_json(edges=[["a", "b", "12"]]))], "not a number"),
    ("edge an object", lambda t: ["info", put(t, "g.json", graph_json(edges=[{"src": "a"}]))], "edge #0"),
    ("edge ends not names", lambda t: ["info", put(t, "g.json", graph_json(edges=[[["a"], "b", 1]]))], "edge #0"),
    ("edges a string", lambda t: ["info", put(t, "g.json", graph_json(edges="a->b"))], "edges"),
    ("edge bytes 1e308", lambda t: ["info", put(t, "g.json", graph_json(edges=[["a", "b", 1e308]]))], "larger than"),
    ("cost 1e308 in optimize", lambda t: ["optimize", put(t, "g.json", graph_json(op_with(compute_us={"gpu": 1e308})))],
     "larger than"),
    ("ops not a list", lambda t: ["info", put(t, "g.json", json.dumps(_doc(ops={"a": 1})))], "ops"),
    ("op without a name", lambda t: ["info", put(t, "g.json", graph_json([{"compute_us": {"gpu": 1}}], []))], "op #0"),
    ("no ops", lambda t: ["info", put(t, "g.json", graph_json([], []))], "no ops"),
    ("wrong format tag", lambda t: ["info", put(t, "g.json", json.dumps({**_doc(), "format": "onnx"}))], "format"),
    ("unsupported version", lambda t: ["info", put(t, "g.json", json.dumps({**_doc(ops=OPS), "version": 9}))], "version"),
    ("a cluster given as graph", lambda t: ["info", put(t, "c.json", cluster_json())], "kind"),
    ("top level an array", lambda t: ["info", put(t, "g.json", "[1, 2]")], "top level"),
    ("empty file", lambda t: ["info", put(t, "g.json", "")], "is empty"),
    ("binary garbage", lambda t: ["info", put(t, "g.json", b"{\xff\xfe\x00garbage")], "UTF-8"),
    ("truncated gzip", lambda t: ["info", put(t, "g.json.gz", gzip.compress(graph_json().encode())[:30])], "gzip"),
    ("400 MiB gzip bomb", lambda t: ["info", zero_bomb(t)], "does not hold JSON"),
    ("a Python file", lambda t: ["info", put(t, "mymodel.py", "import torch\nclass Net(torch.nn.Module): pass\n")],
     "PipeDream graph.txt"),
    ("/dev/zero", lambda t: ["info", "/dev/zero"], "not a regular file"),
    ("a folder as graph", lambda t: ["info", str(t)], "directory"),
    ("missing file", lambda t: ["info", str(t / "nope.json")], "neither a file"),
    ("unknown built-in", lambda t: ["info", "resnet9000"], "neither a file"),
    ("built-in typo", lambda t: ["info", "nasnet-mobil"], "did you mean nasnet_mobile?"),
    ("duplicate op name with a newline", lambda t: ["info", put(t, "g.json", graph_json(
        [{"name": "x\ny", "compute_us": {"gpu": 1}}, {"name": "x\ny", "compute_us": {"gpu": 1}}], []))], "x\\ny"),
    ("op name with terminal escapes", lambda t: ["info", put(t, "g.json", graph_json(
        [{"name": "evil\x1b]0;pwned\x07\x1b[2J", "compute_us": {"gpu": 1}, "mirror": "nobody"}], []))], "\\x1b"),
    ("PipeDream bad size", lambda t: ["info", put(t, "graph.txt", "node1 -- Conv2d -- forward_compute_time=1.0, "
                                                  "backward_compute_time=2.0, activation_size=big, parameter_size=1\n")],
     "size"),
    ("dnn-partitioning nodes not objects", lambda t: ["info", put(t, "dp.json", json.dumps(
        {"maxFPGAs": 2, "maxCPUs": 1, "maxSizePerFPGA": 1e9, "nodes": ["n1"], "edges": []}))], "nodes"),
    # clusters
    ("cluster links a string", lambda t: ["info", G, "--cluster", put(t, "c.json", cluster_json(links="fast"))], "links"),
    ("cluster pairs a string", lambda t: ["info", G, "--cluster", put(t, "c.json", cluster_json(links={"pairs": "x"}))],
     "links.pairs"),
    ("cluster default a list", lambda t: ["info", G, "--cluster", put(t, "c.json", cluster_json(links={"default": [1]}))],
     "links.default"),
    ("cluster pair not an object", lambda t: ["info", G, "--cluster", put(t, "c.json", cluster_json(links={"pairs": [1]}))],
     "link #0"),
    ("cluster memory a string", lambda t: ["info", G, "--cluster", put(t, "c.json", json.dumps(
        _doc("cluster", devices=[{"name": "g", "kind": "gpu", "memory_bytes": "16G"}])))], "memory_bytes"),
    ("cluster without devices", lambda t: ["info", G, "--cluster", put(t, "c.json", json.dumps(_doc("cluster")))],
     "devices"),
    ("unknown preset", lambda t: ["info", G, "--cluster", "tpu-pod"], "preset"),
    # a typo names what it most likely meant; a tie between presets suggests none
    ("preset typo", lambda t: ["info", G, "--cluster", "K80-x2"], "did you mean k80x2?"),
    ("preset typo between presets", lambda t: ["info", G, "--cluster", "k80x3"], "is not a known cluster preset or file; use"),
    # placements
    ("placement of the wrong kind", lambda t: ["simulate", G, "--placement", put(t, "p.json", graph_json())], "kind"),
    ("placement single:x", lambda t: ["simulate", G, "--placement", "single:x"], "single:<device index>"),
    ("placement single:99", lambda t: ["simulate", G, "--placement", "single:99"], "99"),
    # options of optimize / compare / simulate
    ("optimize --budget 0", lambda t: ["optimize", G, "--budget", "0"], "--budget"),
    ("optimize --budget -1", lambda t: ["optimize", G, "--budget", "-1"], "--budget"),
    ("optimize --seconds -1", lambda t: ["optimize", G, "--seconds", "-1"], "--seconds"),
    ("optimize --seconds nan", lambda t: ["optimize", G, "--seconds", "nan"], "--seconds"),
    ("optimize --seconds inf", lambda t: ["optimize", G, "--seconds", "inf"], "--seconds"),
    ("optimize --seed -1", lambda t: ["optimize", G, "--seed", "-1"], "--seed"),
    ("optimize unknown method", lambda t: ["optimize", G, "--method", "nope", "--out", str(t / "out.json")],
     "not a known method"),
    ("optimize --sim bogus", lambda t: ["optimize", G, "--sim", "bogus"], "--sim"),
    ("compare --budget -5", lambda t: ["compare", G, "--budget", "-5"], "--budget"),
    ("compare --seed -1", lambda t: ["compare", G, "--seed", "-1"], "--seed"),
    ("compare unknown method", lambda t: ["compare", G, "--methods", "single-gpu,nope"], "not a known method"),
    ("optimize method typo", lambda t: ["optimize", G, "--method", "local_search"], "did you mean local-search?"),
    ("compare method typo", lambda t: ["compare", G, "--methods", "single-gpu,Heft"], "did you mean heft?"),
    # output paths
    ("--out empty", lambda t: ["optimize", G, "--out", ""], "empty path"),
    ("--out a folder", lambda t: ["optimize", G, "--out", str(t)], "is a folder"),
    ("--out ends with a slash", lambda t: ["optimize", G, "--out", str(t / "new") + "/"], "is a folder"),
    ("--out under a file", lambda t: ["optimize", G, "--out", a_file(t) + "/p.json"], "which is a file"),
    ("--out in a read-only folder", lambda t: ["optimize", G, "--out", ro_folder() + "/p.json"], "cannot be written"),
    ("--out /dev/null", lambda t: ["optimize", G, "--out", "/dev/null"], "not a regular file"),
    ("convert to a folder", lambda t: ["convert", G, str(t)], "is a folder"),
    ("convert into a read-only folder", lambda t: ["convert", G, ro_folder() + "/g.json"], "cannot be written"),
    ("simulate --trace under a file", lambda t: ["simulate", G, "--placement", "single:0", "--trace",
                                                 a_file(t) + "/t.json"], "which is a file"),
    ("zoo export --out a folder", lambda t: ["zoo", "export", "resnet50", "--out", str(t)], "is a folder"),
    ("zoo export --batch 0", lambda t: ["zoo", "export", "resnet50", "--out", str(t / "o.json"), "--batch", "0"], "--batch"),
    ("zoo export --batch 10**12", lambda t: ["zoo", "export", "resnet50", "--out", str(t / "o.json"), "--batch",
                                             str(10**12)], "1,048,576"),
    # bench
    ("bench --methods nonexistent", lambda t: ["bench", "classical", "--quick", "--methods", "nonexistent"], "nonexistent"),
    # a label holding a comma is one method: only the unknown name is refused
    ("bench --methods a label with a comma", lambda t: ["bench", "real-graphs", "--quick", "--methods",
                                                        "placeto, frozen policy (ablation),nope"], "'nope'"),
    ("bench --rows nosuchrow", lambda t: ["bench", "classical", "--quick", "--rows", "nosuchrow"], "nosuchrow"),
    ("bench --seeds ,", lambda t: ["bench", "classical", "--quick", "--seeds", ","], "--seeds"),
    ("bench --seeds a,b", lambda t: ["bench", "classical", "--quick", "--seeds", "a,b"], "--seeds"),
    ("bench --seeds -1", lambda t: ["bench", "classical", "--quick", "--seeds", "-1"], "negative"),
    ("bench --jobs 0", lambda t: ["bench", "classical", "--quick", "--jobs", "0"], "--jobs"),
    ("bench --quick and --budget", lambda t: ["bench", "classical", "--quick", "--budget", "paper"], "two budgets"),
    ("bench --results a file", lambda t: ["bench", "classical", "--quick", "--results", a_file(t)], "is a file"),
    ("bench --results under a file", lambda t: ["bench", "classical", "--quick", "--results", a_file(t) + "/r"],
     "which is a file"),
    ("bench --results unwritable", lambda t: ["bench", "classical", "--quick", "--results", ro_folder() + "/results"],
     "cannot be written"),
    ("bench report missing folder", lambda t: ["bench", "report", "--results", str(t / "missing-folder"),
                                               "--out", str(t / "R.md")], "does not exist"),
    ("bench report --out a folder", lambda t: ["bench", "report", "--out", str(t)], "is a folder"),
    ("bench report on a results.csv that is not UTF-8", lambda t: [
        "bench", "report", "--results", put(t, "res/classical/results.csv", b"run_file\n\xff\xfe\n").rsplit("/", 2)[0],
        "--out", str(t / "R.md")], "is not UTF-8 text"),
    # issue 52: every count or size has a bound, checked before any work, named in the message
    ("optimize --budget 2**70", lambda t: ["optimize", G, "--budget", str(2**70)], "the most placer allows"),
    ("random --budget 10**12", lambda t: ["optimize", G, "-m", "random", "--budget", str(10**12)], "10,000,000"),
    ("compare --budget 10**12", lambda t: ["compare", G, "--budget", str(10**12)], "10,000,000"),
    ("optimize --seconds 1e9", lambda t: ["optimize", G, "--seconds", "1e9"], "86,400"),
    ("optimize --seed 2**40", lambda t: ["optimize", G, "--seed", str(2**40)], "4,294,967,295"),
    ("bench --jobs 1000000", lambda t: ["bench", "classical", "--quick", "--jobs", "1000000"], "the most"),
    ("bench --seeds 2**40", lambda t: ["bench", "classical", "--quick", "--seeds", str(2**40)], "4,294,967,295"),
    ("--max-input-size beyond memory", lambda t: ["--max-input-size", "1000TiB", "info", G], "machine's memory"),
    ("cluster of 5,000 devices", lambda t: ["info", G, "--cluster", put(t, "c.json", json.dumps(_doc(
        "cluster", devices=[{"name": f"d{i}", "kind": "cpu", "memory_bytes": 1e9} for i in range(5000)])))], "4,096"),
    # issue 52: wrong exit status, tracebacks, bad input accepted
    ("compare --objective bogus", lambda t: ["compare", G, "--methods", "single-gpu", "--objective", "bogus"],
     "not a known objective"),
    ("--objective latency:pieces=10**30", lambda t: ["optimize", G, "-m", "random", "--budget", "3", "--objective",
                                                    f"latency:pieces={10**30}"], "pieces=any"),
    ("cluster device FLOPs NaN", lambda t: ["info", G, "--cluster", put(t, "c.json", json.dumps(_doc(
        "cluster", devices=[{"name": "g", "kind": "gpu", "memory_bytes": 1e9, "peak_flops_per_us": float("nan")}])))],
     "peak_flops_per_us"),
    ("cluster device FLOPs negative", lambda t: ["info", G, "--cluster", put(t, "c.json", json.dumps(_doc(
        "cluster", devices=[{"name": "g", "kind": "gpu", "memory_bytes": 1e9, "peak_flops_per_us": -5}])))],
     "peak_flops_per_us"),
    ("cluster device launch negative", lambda t: ["info", G, "--cluster", put(t, "c.json", json.dumps(_doc(
        "cluster", devices=[{"name": "g", "kind": "gpu", "memory_bytes": 1e9, "launch_us": -3}])))], "launch_us"),
]

TORCH_CASES = [
    ("train --workers 0", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--workers", "0"], "--workers"),
    ("train --backend bogus", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--backend", "bogus"],
     "--backend"),
    ("train --episodes 0", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--episodes", "0"], "--episodes"),
    ("train --gamma 2", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--gamma", "2"], "--gamma"),
    ("train --lr nan", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--lr", "nan"], "--lr"),
    ("train --out a folder", lambda t: ["train", "--graph", G, "--out", str(t)], "is a folder"),
    ("train without graphs", lambda t: ["train", "--out", str(t / "p.pt")], "--graph"),
    ("place --grouping contiguous:0", lambda t: ["place", G, "--policy", str(t / "p.pt"), "--grouping", "contiguous:0"], "--grouping"),
    ("place --grouping bogus", lambda t: ["place", G, "--policy", str(t / "p.pt"), "--grouping", "bogus"], "--grouping"),
    ("place missing policy", lambda t: ["place", G, "--policy", str(t / "none.pt")], "does not exist"),
    ("place policy not a checkpoint", lambda t: ["place", G, "--policy", put(t, "junk.pt", b"PK\x03\x04 junk" * 50)],
     "not a loadable checkpoint"),
    ("place policy of pickled code", lambda t: ["place", G, "--policy", _pickled_object(t)], "not a loadable checkpoint"),
    ("capture --out a folder", lambda t: ["capture", "hf:gpt2", "--out", str(t)], "is a folder"),
    ("capture --batch 0", lambda t: ["capture", "hf:gpt2", "--out", str(t / "g.json"), "--batch", "0"], "--batch"),
    ("run --steps 0", lambda t: ["run", G, "--placement", "single:0", "--steps", "0"], "--steps"),
    ("run a graph with no program", lambda t: ["run", G, "--placement", "single:0"], "no executable program"),
    ("checkpoint missing keys", lambda t: ["place", G, "--policy", checkpoint(t)], "missing"),
    ("policy for another device count", lambda t: ["place", G, "--cluster", "k80x4", "--policy", policy_for_devices(t, 2)],
     "chooses among 2 devices"),
    # issue 52: bounds on train / place counts, seeds through the one seed option, bad policy files
    ("train --episodes 10**7", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--episodes", str(10**7)],
     "1,000,000"),
    ("train --workers 2000", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--workers", "2000"], "1,024"),
    ("train --processes 10**6", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--backend", "process",
                                           "--processes", str(10**6)], "4 per CPU core"),
    ("train --stop-window > --episodes", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--episodes", "10",
                                                    "--stop-window", "50"], "--stop-window"),
    ("train --seed 2**40", lambda t: ["train", "--graph", G, "--out", str(t / "p.pt"), "--seed", str(2**40)],
     "4,294,967,295"),
    ("place --finetune 10**7", lambda t: ["place", G, "--policy", policy_file(t), "--finetune", str(10**7)], "1,000,000"),
    ("place --episodes 10**7", lambda t: ["place", G, "--policy", policy_file(t), "--episodes", str(10**7)], "1,000,000"),
    ("place --workers 5000", lambda t: ["place", G, "--policy", policy_file(t), "--workers", "5000"], "1,024"),
    ("place --seed 2**40", lambda t: ["place", G, "--policy", policy_file(t), "--seed", str(2**40)], "4,294,967,295"),
    ("place policy of the wrong shape", lambda t: ["place", G, "--policy", policy_file(t, edit=_wrong_shape)], "has shape"),
    ("place policy missing a weight", lambda t: ["place", G, "--policy", policy_file(t, edit=_drop_weight)],
     "missing weight"),
    ("place policy with NaN weights", lambda t: ["place", G, "--policy", policy_file(t, edit=_nan_weight)], "NaN"),
    ("place policy with a negative hidden size", lambda t: ["place", G, "--policy", policy_file(
        t, edit=lambda s: s["policy_config"].update(hidden=-3))], "'hidden'"),
    ("place policy with a huge hidden size", lambda t: ["place", G, "--policy", policy_file(
        t, edit=lambda s: s["policy_config"].update(hidden=10**9))], "4,096"),
    ("place policy with a non-integer round count", lambda t: ["place", G, "--policy", policy_file(
        t, edit=lambda s: s["policy_config"].update(rounds=2.5))], "'rounds'"),
]


class _Thing:  # pickled by _pickled_object: weights_only loading must refuse it, in one line
    pass


def _pickled_object(t: Path) -> str:
    import torch

    p = t / "pickled.pt"
    torch.save({"obj": _Thing()}, p)
    return str(p)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _assert_clean_failure(code, out, err, must_contain, case):
    assert code == 2, (case, code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), (case, err)
    assert lines[0].startswith("error: "), (case, err)
    assert "Traceback" not in err and "Traceback" not in out, case
    assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in lines[0]), (case, lines[0])
    assert must_contain in lines[0], (case, lines[0])


def _run_case(capsys, monkeypatch, tmp_path, build, must_contain, case):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = build(work)
    before = _files(work)
    code, out, err = run_cli(capsys, monkeypatch, *args)
    _assert_clean_failure(code, out, err, must_contain, case)
    assert _files(work) == before, (case, _files(work) - before)


@pytest.mark.parametrize("case,build,must_contain", CASES, ids=[c[0] for c in CASES])
def test_bad_input(capsys, monkeypatch, tmp_path, case, build, must_contain):
    _run_case(capsys, monkeypatch, tmp_path, build, must_contain, case)


@pytest.mark.skipif(not HAS_TORCH, reason="needs the torch extra")
@pytest.mark.parametrize("case,build,must_contain", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_bad_input_learned(capsys, monkeypatch, tmp_path, case, build, must_contain):
    _run_case(capsys, monkeypatch, tmp_path, build, must_contain, case)


def test_corpus_size():
    assert len(CASES) + len(TORCH_CASES) >= 60


# ---------------------------------------------------------------------- the input size limit
def test_gzip_bomb_over_the_limit_refused_and_limit_can_be_raised(capsys, monkeypatch, tmp_path):
    bomb = json_bomb(tmp_path)
    monkeypatch.setenv("PLACER_MAX_INPUT_BYTES", "4MiB")
    code, out, err = run_cli(capsys, monkeypatch, "info", bomb)
    _assert_clean_failure(code, out, err, "decompresses to more than the input limit of 4 MiB", "bomb")
    assert "--max-input-size" in err
    # raised: the file is read in full, and then it is (correctly) not a graph
    code, out, err = run_cli(capsys, monkeypatch, "--max-input-size", "64MiB", "info", bomb)
    _assert_clean_failure(code, out, err, "top level", "bomb, limit raised")


def test_plain_file_over_the_limit(capsys, monkeypatch, tmp_path):
    big = put(tmp_path, "big.json", graph_json(meta={"pad": "x" * 3000}))
    code, out, err = run_cli(capsys, monkeypatch, "--max-input-size", "1KiB", "info", big)
    _assert_clean_failure(code, out, err, "input limit", "big file")
    code, out, err = run_cli(capsys, monkeypatch, "info", big, "--json")
    assert code == 0, err


# ---------------------------------------------------------------------- things that work
def test_version(capsys, monkeypatch):
    from placer import __version__

    code, out, err = run_cli(capsys, monkeypatch, "--version")
    assert code == 0 and out.strip() == f"placer {__version__}" and not err


def test_help_is_not_an_error(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, "--help")
    assert code == 0 and "optimize" in out


# ---------------------------------------------------------------------- real processes
def _placer(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "placer", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "graph.json"
    os.mkfifo(fifo)
    p = _placer("info", fifo, cwd=tmp_path)
    try:
        out, err = p.communicate(timeout=120)  # a blocked read would never end: no writer ever opens the FIFO
    finally:
        if p.poll() is None:
            p.kill()
    _assert_clean_failure(p.returncode, out, err, "not a regular file", "fifo")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_during_optimize_exits_130_and_says_so(tmp_path):
    out_file = tmp_path / "p.json"
    p = _placer("optimize", "synthetic", "--method", "random", "--budget", "10000000", "--out", out_file, cwd=tmp_path)
    try:
        # interrupt once the command is busy placing (by CPU time used, not wall time: a loaded machine
        # only makes this wait longer); any moment after start-up gives the same answer
        while p.poll() is None and _cpu_seconds(p.pid) < 3.0:
            time.sleep(0.1)
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert err.splitlines() == [err.strip()] and "interrupted" in err and "Traceback" not in err
    assert not out_file.exists() and not [f for f in tmp_path.iterdir() if f.name.startswith(".p.json")]


def test_written_files_follow_the_umask(tmp_path):
    script = (
        "import os, sys\n"
        "os.umask(0o027)\n"
        "sys.argv = ['placer', 'convert', 'synthetic', sys.argv[1]]\n"
        "from placer.cli import main\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path / "g.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((tmp_path / "g.json").stat().st_mode) == 0o640
    r = subprocess.run([sys.executable, "-c", script.replace("0o027", "0o022"), str(tmp_path / "h.json.gz")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((tmp_path / "h.json.gz").stat().st_mode) == 0o644


def test_atomic_write_keeps_an_existing_files_mode(tmp_path):
    from placer.io import write_text_atomic

    p = tmp_path / "x.json"
    p.write_text("{}")
    p.chmod(0o600)
    write_text_atomic(p, "[]\n")
    assert p.read_text() == "[]\n" and stat.S_IMODE(p.stat().st_mode) == 0o600


def test_second_ctrl_c_stops_even_when_the_first_was_swallowed(tmp_path):
    """A library that catches the first interrupt (OR-Tools stops its search on SIGINT and carries
    on) must not trap the user: the second Ctrl-C ends the process at once, with status 130."""
    ready = tmp_path / "ready"
    script = (
        "import sys, time, typer\n"
        "from pathlib import Path\n"
        "from placer.cli.guard import run_guarded\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def stubborn(ready: str):\n"
        "    try:\n"
        "        Path(ready).write_text('1')\n"
        "        while True: time.sleep(0.05)\n"
        "    except BaseException:\n"
        "        Path(ready).write_text('2')\n"
        "    while True: time.sleep(0.05)\n"
        "sys.exit(run_guarded(app, [str(sys.argv[1])]))\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script, str(ready)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        for want in ("1", "2"):
            while p.poll() is None and (not ready.exists() or ready.read_text() != want):
                time.sleep(0.05)
            assert p.poll() is None, p.communicate()
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    assert err.splitlines() == ["error: interrupted twice; stopped"]


def test_ctrl_c_inside_a_c_callback_still_ends_as_an_interrupt():
    """A Ctrl-C that arrives while a C library calls back into Python (numba saving its cache on a
    fresh machine) cannot propagate: Python reports it as unraisable and the library then fails with
    its own error. The command must still end with one "interrupted" line and status 130."""
    script = (
        "import os, signal, sys, typer\n"
        "from placer.cli.guard import run_guarded\n"
        "app = typer.Typer()\n"
        "class Callback:\n"
        "    def __del__(self):  # like a ctypes callback: exceptions raised here are unraisable\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        for _ in range(1000): pass  # the handler runs here, between bytecodes\n"
        "@app.command()\n"
        "def compile(name: str):\n"
        "    Callback()\n"
        "    raise RuntimeError('no compiled object yet for ' + name)\n"
        "sys.exit(run_guarded(app, ['views']))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.splitlines() == ["error: " + __import__("placer.cli.guard").cli.guard.INTERRUPTED]


def test_leaving_after_an_interrupt_keeps_what_was_printed():
    """After Ctrl-C the process ends without the interpreter's teardown (a native library the interrupt
    caught mid-call can crash there: SIGSEGV once in CI), but what it printed still reaches the pipes."""
    code = ("import sys; from placer.cli.guard import leave_now; "
            "sys.stdout.write('out'); sys.stderr.write('err'); leave_now(130)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout, p.stderr) == (130, "out", "err")


@pytest.mark.skipif(not HAS_TORCH, reason="no torch")
def test_a_log_says_it_stays_on_ctrl_c(tmp_path, monkeypatch):
    """train / place --log writes one line per episode: Ctrl-C keeps it, and the interrupted line says so."""
    from placer.cli import guard
    from placer.cli.learned_files import progress_log as _log

    monkeypatch.setattr(guard, "_kept", [])
    assert guard.interrupted_message() == guard.INTERRUPTED
    lines, write = _log(str(tmp_path / "run.jsonl"))
    try:
        write({"episode": 1, "objective_us": float("inf")})
    finally:
        lines.close()
    msg = guard.interrupted_message()
    assert "kept: the log" in msg and "run.jsonl" in msg
