"""placer.apply at its edges (issues 60 and 63): the model and every device checked before anything
is touched, one line of placer's own error naming what is wrong and the fix; overlapping keys; and the
CPU dry run that keeps the map's split behind the same hooks, with the unplaced model's loss and
gradients. All on the CPU (a GPU-only case is skipped without one)."""

from __future__ import annotations

import copy
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from torch import nn  # noqa: E402

import placer  # noqa: E402
from placer.errors import InputError  # noqa: E402

N_GPU = torch.cuda.device_count() if torch.cuda.is_available() else 0
ABSENT = f"cuda:{N_GPU}"  # one past the GPUs torch sees: absent on every machine


class Tower(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return x + torch.tanh(self.ln(self.fc(x)))


class TwoTower(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.inp = nn.Linear(6, d)
        self.left = nn.Sequential(Tower(d), Tower(d))
        self.right = nn.Sequential(Tower(d), Tower(d))
        self.head = nn.Linear(2 * d, 3)

    def forward(self, x):
        h = self.inp(x)
        return self.head(torch.cat([self.left(h), self.right(h)], dim=-1))


def loss_of(out):
    return (out ** 2).mean()


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TwoTower()


X = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
GPU_MAP = {"inp": "cuda:0", "left": "cuda:0", "right": "cuda:1", "head": "cpu"}  # a map planned for 2 GPUs


def refused(model, device_map, *words, **kw) -> str:
    """placer.apply's InputError for this call: one line, no chained exception, every word in it, and
    the model untouched (no hook, the same parameter objects, the same output)."""
    params = {n: (p, p.detach().clone()) for n, p in model.named_parameters()} if isinstance(model, nn.Module) else {}
    before = model(X) if isinstance(model, nn.Module) else None
    with pytest.raises(InputError) as e:
        placer.apply(model, device_map, **kw)
    msg = str(e.value)
    assert "\n" not in msg and "\x1b" not in msg and msg.startswith("placer.apply: ")
    assert e.value.__cause__ is None and e.value.__context__ is None
    for w in words:
        assert w in msg, (w, msg)
    if isinstance(model, nn.Module):
        assert not any(hasattr(m, "_hf_hook") for m in model.modules())
        assert not hasattr(model, "hf_device_map")
        now = dict(model.named_parameters())
        for n, (p, v) in params.items():
            assert now[n] is p and torch.equal(p, v), n
        assert torch.equal(model(X), before)
    return msg


# ---------------------------------------------------------------------------------- the model
@pytest.mark.parametrize("bad, words", [(None, ["model: is None, not a torch.nn.Module"]),
                                        (42, ["model: is a number (42)"]),
                                        ("gpt2", ["model: is a string ('gpt2')"]),
                                        (TwoTower, ["is the class TwoTower", "placer.apply(TwoTower(...)"])])
def test_a_model_that_is_not_a_module_instance_is_refused(bad, words):
    refused(bad, {"inp": "cpu"}, *words)


def test_a_model_without_weights_is_refused():
    with torch.device("meta"):
        m = TwoTower()
    with pytest.raises(InputError, match=r"holds 'inp.weight' on the meta device.*load or initialise"):
        placer.apply(m, {"inp": "cpu", "left": "cpu", "right": "cpu", "head": "cpu"})
    assert not any(hasattr(s, "_hf_hook") for s in m.modules())


# ---------------------------------------------------------------------------------- device forms
@pytest.mark.parametrize("device, words", [
    ("tpu:0", ["module 'left': is mapped to 'tpu:0', which is not a torch device", "use 'cpu' or 'cuda:K'"]),
    ("bogus", ["'bogus', which is not a torch device"]),
    ("cuda:-1", ["'cuda:-1', which is not a torch device"]),
    ("CUDA:0", ["'CUDA:0', which is not a torch device"]),
    (" cuda:0", ["' cuda:0', which is not a torch device"]),
    (5, ["module 'left': is mapped to a number (5), not a device string", "'cuda:5' for GPU 5"]),
    (True, ["is mapped to a boolean (True), not a device string"]),
    (None, ["module 'left': is mapped to None, not a device string"]),
    (["cuda:0"], ["is mapped to a list"]),
    ("cpu:1", ["'cpu:1', but torch has one CPU device", "map it to 'cpu'"]),
    ("disk", ["'disk' (accelerate's disk offload)"]),
    ("meta", ["'meta', which holds no data: the module's weights would be thrown away", "dry_run=True"]),
])
def test_a_malformed_device_is_named_with_its_module(model, device, words):
    refused(model, {"inp": "cpu", "left": device, "head": "cpu"}, *words)


def test_meta_is_refused_in_a_dry_run_too(model):
    refused(model, {"inp": "meta"}, "'meta', which holds no data", dry_run=True)


def test_terminal_escapes_and_control_characters_are_escaped(model):
    msg = refused(model, {"left": "cuda:0\x1b[31m\x00\u202e"}, "'cuda:0\\x1b[31m\\x00\\u202e'")
    assert msg.isprintable()
    key = "left\x1b]0;pwned\x07"
    msg = refused(model, {key: "cpu"}, "module 'left\\x1b]0;pwned\\x07': is not a module of TwoTower")
    assert msg.isprintable()


def test_a_very_long_device_string_is_cut(model):
    msg = refused(model, {"left": "x" * 100_000}, "is not a torch device")
    assert len(msg) < 1000


# ---------------------------------------------------------------------------------- presence
def test_every_missing_device_is_named_in_one_error(model):
    dm = {"inp": ABSENT, "left": "cpu", "right": f"cuda:{N_GPU + 6}", "head": ABSENT}
    msg = refused(model, dm, f"device_map: names devices this machine lacks: {ABSENT}, cuda:{N_GPU + 6} (",
                  "3 of the map's 4 modules are on them", "dry_run=True", "placer export --map")
    assert ("this torch is built without CUDA" in msg) == (torch.version.cuda is None and N_GPU == 0)


def test_cuda_without_an_index_means_cuda_0(model):
    if N_GPU:
        pytest.skip("cuda:0 is here")
    refused(model, {"inp": "cuda", "left": "cpu"}, "names a device this machine lacks: cuda:0 (",
            "1 of the map's 2 modules are on it")


@pytest.mark.parametrize("device", ["mps", "xpu:0"])
def test_other_accelerators_are_checked_for_presence(model, device):
    kind = device.split(":")[0]
    backend = torch.backends.mps if kind == "mps" else getattr(torch, kind)
    if backend.is_available():
        pytest.skip(f"{device} is here")
    refused(model, {"inp": device, "head": "cpu"}, f"names a device this machine lacks: {device} (torch sees cpu")


def test_presence_counts_the_gpus_torch_sees(monkeypatch):
    """No GPU here: torch.cuda's two answers stand in for a machine with two (apply is not run)."""
    from placer.apply_map import missing_devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert missing_devices(["cpu", "cuda:0", "cuda:1", "cuda:7", "cuda:2"]) == ["cuda:2", "cuda:7"]
    with pytest.raises(InputError) as e:
        placer.apply(TwoTower(), {"inp": "cuda:0", "left": "cuda:1", "right": "cuda:7", "head": "cpu"})
    msg = str(e.value)
    assert "lacks: cuda:7 (torch sees cpu, cuda:0, cuda:1; 1 of the map's 4 modules are on it)" in msg
    assert "without CUDA" not in msg


@pytest.mark.skipif(N_GPU == 0, reason="needs a GPU")
def test_a_map_to_present_gpus_and_one_absent_names_only_the_absent(model):
    refused(model, {"inp": "cuda:0", "left": ABSENT, "head": "cpu"}, f"lacks: {ABSENT} (")
    placer.apply(model, {"inp": "cuda:0", "left": "cpu", "right": "cuda:0", "head": "cuda:0"})
    assert model.inp.weight.device.type == "cuda" and model.left[0].fc.weight.device.type == "cpu"


def test_a_missing_device_in_a_placer_export_file(model, tmp_path):
    dm = {**GPU_MAP, "right": ABSENT}
    doc = {"format": "device-map", "graph": "two-tower", "cluster": "k80x2", "depth": 1, "device_map": dm,
           "cluster_devices": {k: "gpu:0" for k in dm}}
    path = tmp_path / "map.json"
    path.write_text(json.dumps(doc))
    refused(model, str(path), "names ", f"this machine lacks: ", ABSENT)


# ---------------------------------------------------------------------------------- the map
def test_keys_must_be_module_paths_given_as_strings(model):
    refused(model, {0: "cpu"}, "key a number (0): is not a module path (a string)")
    refused(model, {"nope": "cpu"}, "module 'nope': is not a module of TwoTower")
    refused(model, {}, "device_map: is an object ({}), not a non-empty")
    refused(model, ["cpu"], "device_map: is a list")
    refused(model, {"inp": "cpu"}, "dry_run: is a string ('yes')", dry_run="yes")


def test_a_key_inside_another_on_another_device_is_refused(model):
    refused(model, {"left": "cpu", "left.1": ABSENT, "head": "cpu"},
            f"modules 'left' (cpu) and 'left.1' ({ABSENT}): overlap", "map the children of 'left' one by one")
    refused(model, {"": "cpu", "head": "cuda:0"}, "modules '' (cpu) and 'head' (cuda:0): overlap", dry_run=True)


def test_a_key_inside_another_on_the_same_device_is_dropped(model):
    placer.apply(model, {"inp": "cpu", "left": "cpu", "left.1.fc": "cpu", "right": "cpu", "head": "cpu"})
    assert model.hf_device_map == {"inp": "cpu", "left": "cpu", "right": "cpu", "head": "cpu"}


def test_a_root_key_maps_the_whole_model(model):
    placer.apply(model, {"": "cpu"})
    assert model.hf_device_map == {"": "cpu"}


def test_a_torch_device_value_is_accepted(model):
    placer.apply(model, {"inp": torch.device("cpu"), "left": "cpu", "right": "cpu", "head": "cpu"})
    assert model.hf_device_map["inp"] == "cpu"


# ---------------------------------------------------------------------------------- the dry run
def test_the_dry_run_keeps_the_split_and_the_unplaced_loss_and_gradients(model, tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"device_map": GPU_MAP}))
    ref, placed = copy.deepcopy(model), copy.deepcopy(model)
    out = placer.apply(placed, str(path), dry_run=True)
    assert out is placed and placed.hf_device_map == {k: "cpu" for k in GPU_MAP}
    for k in GPU_MAP:  # every module of the map behind its own hook, run on the CPU
        hook = placed.get_submodule(k)._hf_hook
        assert str(hook.execution_device) == "cpu" and hasattr(placed.get_submodule(k), "_old_forward")
    hooked = {n for n, m in placed.named_modules() if hasattr(m, "_hf_hook")}
    cpu_twin = copy.deepcopy(model)  # the same keys really mapped to this machine's CPU: the same hooks
    placer.apply(cpu_twin, {k: "cpu" for k in GPU_MAP})
    assert hooked == {n for n, m in cpu_twin.named_modules() if hasattr(m, "_hf_hook")} and set(GPU_MAP) <= hooked
    l0, l1 = loss_of(ref(X)), loss_of(placed(X))
    l0.backward()
    l1.backward()
    assert torch.equal(l0, l1)
    grads = dict(placed.named_parameters())
    for n, q in ref.named_parameters():
        assert torch.equal(q.grad, grads[n].grad), n


def test_the_dry_run_trains(model):
    m = placer.apply(model, GPU_MAP, dry_run=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(15):
        loss = loss_of(m(X))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]
