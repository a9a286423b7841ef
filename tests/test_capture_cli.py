"""`placer capture`: a user's factory file and Hugging Face models from the command line, and the
one-line errors (exit 2) for bad factory paths, shapes and uncapturable ops."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, width)
        self.out = nn.Linear(width, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x))).flatten(1)
        return self.out(torch.tanh(self.fc(h)))


def build(width=16):
    return Net(width)


def with_inputs():
    return Net(8), (torch.randn(2, 3, 6, 6),)


def dynamic():
    class D(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            if self.fc(x).sum().item() > 0:  # data-dependent control flow
                return self.fc(x).mean()
            return x.mean()
    return D()


not_a_function = 3


def exits():
    import sys
    sys.exit(0)


def exits_3():
    import sys
    sys.exit(3)


def interrupts():
    raise KeyboardInterrupt


def linear():
    return nn.Linear(8, 4)
'''


@pytest.fixture
def model_file(tmp_path):
    p = tmp_path / "my_model.py"
    p.write_text(MODEL)
    return p


def test_capture_user_file(tmp_path, model_file, capsys, monkeypatch):
    out = tmp_path / "g.json"
    code, so, se = run_cli(capsys, monkeypatch, "capture", f"{model_file}:build", "--input", "3x6x6", "--batch", "4",
                           "--set", "width=12", "--loss", "cross-entropy", "-o", out, "--json")
    assert code == 0, se
    d = json.loads(so)
    assert d["ops"] > 20 and d["params"] == 8
    g = json.loads(out.read_text())
    assert g["meta"]["recipe"]["kind"] == "factory" and g["meta"]["recipe"]["kwargs"] == {"width": 12}
    assert g["meta"]["recipe"]["inputs"] == [{"shape": [4, 3, 6, 6], "dtype": "float32"}]
    # the factory may bring its own example inputs
    code, so, se = run_cli(capsys, monkeypatch, "capture", f"{model_file}:with_inputs", "-o", tmp_path / "h.json", "--json")
    assert code == 0, se and json.loads(so)["ops"] > 20


def test_capture_hf_models(tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformers")
    tiny = {"gpt2": ["n_layer=2", "n_embd=32", "n_head=2", "vocab_size=128", "n_positions=64"],
            "bert": ["num_hidden_layers=2", "hidden_size=32", "num_attention_heads=2", "intermediate_size=64",
                     "vocab_size=128"]}
    for name, sets in tiny.items():
        out = tmp_path / f"{name}.json"
        args = ["capture", f"hf:{name}", "--batch", "2", "--seq", "16", "-o", out, "--json"]
        for s in sets:
            args += ["--set", s]
        code, so, se = run_cli(capsys, monkeypatch, *args)
        assert code == 0, se
        d = json.loads(so)
        assert d["ops"] > 100, d
        recipe = json.loads(out.read_text())["meta"]["recipe"]
        assert recipe["kind"] == "hf" and recipe["batch"] == 2 and recipe["seq"] == 16


@pytest.mark.parametrize("args, needle", [
    (["{dir}/missing.py:build", "--input", "3x6x6"], "does not exist"),
    (["{file}:nope", "--input", "3x6x6"], "is not a function"),
    (["{file}:not_a_function", "--input", "3x6x6"], "is not a function"),
    (["{file}", "--input", "3x6x6"], "FILE.py:FACTORY"),
    (["no_such_module_xyz:build", "--input", "3x6x6"], "cannot be imported"),
    (["{file}:build", "--input", "3xfoo"], "not integers"),
    (["{file}:build", "--input", "0x6x6"], "below 1"),
    (["{file}:build", "--input", "3x6x6:complex7"], "dtype"),
    (["{file}:build"], "--input"),
    (["{file}:build", "--input", "3x5x5"], "could not be traced"),
    (["{file}:dynamic", "--input", "3"], "could not be traced"),
    (["{file}:build", "--input", "3x6x6", "--set", "bogus=1"], "raised TypeError"),
    (["hf:not_a_model_type"], "not a transformers model type"),
    (["hf:gpt2", "--set", "no_such_field=1"], "not an option"),
    # issue 52: tracebacks, wrong exit statuses and bad input accepted, now one line and status 2
    (["{file}:exits", "--input", "8"], "called sys.exit(0)"),
    (["{file}:exits_3", "--input", "8"], "called sys.exit(3)"),
    (["{file}:interrupts", "--input", "8"], "raised KeyboardInterrupt itself"),
    (["builtins:exit"], "called sys.exit()"),
    (["{file}:linear", "--input", "8:int64:5"], "mixes float32 and int64"),
    (["{file}:linear", "--input", "8:int64:-5"], "high"),
    (["{file}:linear", "--input", "99999999999x99999999999"], "the most placer allows"),
    (["{file}:linear", "--input", "8", "--batch", str(10**12)], "1,048,576"),
    (["{file}:linear", "--input", "8", "--name", "x\x1b]0;pwned\x07\x1b[2J\u202e"], "control characters"),
    (["hf:gpt2", "--set", "n_layer=abc"], "is not a whole number"),
    (["hf:gpt2", "--set", "n_layer=-1"], "is not from 1 to 1,000"),
    (["hf:bert", "--set", "num_hidden_layers=0"], "is not from 1 to 1,000"),
    (["hf:gpt2", "--seq", "5000"], "longer than the model's 1,024 positions"),
    (["hf:gpt2", "--batch", "100000", "--seq", "100000"], "the most placer allows"),
])
def test_capture_errors_are_one_line(tmp_path, model_file, capsys, monkeypatch, args, needle):
    if args[0].startswith("hf:"):
        pytest.importorskip("transformers")
    args = [a.format(dir=tmp_path, file=model_file) for a in args]
    out = tmp_path / "bad.json"
    code, so, se = run_cli(capsys, monkeypatch, "capture", *args, "-o", out)
    assert code == 2, (so, se)
    assert needle in se and len(se.strip().splitlines()) == 1 and "Traceback" not in se, se
    assert not out.exists()
