"""Capture a PyTorch model's forward pass or full training step as an :class:`OpGraph` of aten ops.

How (needs the ``torch`` extra):

* Parameters, buffers, optimizer state and inputs become fake tensors (``FakeTensorMode``): capture
  allocates no real memory and runs no kernels, so a 300M-parameter model is captured on a laptop.
* The step is written functionally and traced by ``make_fx`` under ``torch.func.functionalize``:
  ``torch.func.grad_and_value`` over ``torch.func.functional_call(module, params + buffers)``, then
  an optimizer update per parameter. Buffers are explicit inputs of the differentiated function
  (a naive ``make_fx`` of ``loss.backward(); opt.step()`` fails on them as captured, mutated
  tensors): ``native_batch_norm`` reads and updates its running-mean / running-variance inputs
  itself, and the ``num_batches_tracked`` increment is written back by an explicit ``copy_`` op.
* Every forward op carries the module path it ran in (forward pre/post hooks push the path with
  ``torch.fx.traceback.annotate``), every backward op the autograd sequence number of the node it
  computes the gradient of (hooks on the autograd graph), every update op its parameter.
  A backward op *mirrors* the forward op that created that autograd node (same ``seq_nr``).

Ops kept, one per aten call: ``aten.<name>.<overload>`` with FLOPs (``torch.utils.flop_counter``;
convolution gradients counted here, see :func:`~placer.frontends.torch_ops.node_flops`),
``bytes_accessed`` = bytes read + written (read = ``bytes_accessed - output_bytes``), output
bytes, and in ``meta['op_dtype']`` / ``meta['op_shapes']`` the dtype and the input -> output
shapes (``f32[64,3,299,299];f32[32,3,3,3] -> f32[64,32,149,149]``). Sources are ops too: one ``parameter`` op per
parameter (owning the parameter's and its optimizer state's bytes), one ``buffer`` op per buffer,
one ``input`` op per input, ``constant`` for traced constants. **Views are folded into their
producer** (``view``, ``t``, ``permute``, ``expand``, ``split``/``chunk`` outputs, ``select``,
``slice``, ``detach``, ``_unsafe_view`` and tuple indexing): they cost nothing and alias their
input, so a consumer of a view is wired to the op that produced the viewed tensor, the edge
carrying the view's bytes. Dead ops are dropped. A parameter op, its update ops and its
optimizer state are put in one colocation group (as TensorFlow colocates a variable with its
``Apply*`` op); so are a buffer and the op writing it back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from placer.errors import InputError
from placer.frontends.torch_ops import (aten_name, describe, is_view, materialize, node_flops, value_bytes,
                                        value_dtype)
from placer.graph import BACKWARD, FORWARD, UPDATE, OpGraph

OPTIMIZERS = ("sgd", "sgd-momentum", "adam")
STATE_SLOTS = {"sgd": 0, "sgd-momentum": 1, "adam": 2}
CAPTURE_VERSION = 1  # bump when the captured graph of the same model changes (zoo cache key)


@dataclass
class Capture:
    """A captured step: the OpGraph, the traced fx graph, and per op its main fx node (None for
    parameter / buffer / input / constant ops) so that :mod:`placer.cost.profile` can run it."""

    graph: OpGraph
    gm: fx.GraphModule
    op_nodes: list
    capture_s: float
    info: dict = field(default_factory=dict)
    node_op: dict = field(default_factory=dict)  # every fx node -> the op computing (or aliased by) its value


# ---------------------------------------------------------------------- public API
def capture_training_step(module: torch.nn.Module, example_inputs: Sequence[Any], *,
                          loss_fn: Callable[[Any], torch.Tensor] | None = None, optimizer: str = "sgd-momentum",
                          name: str | None = None, cost_keys: Sequence[str] | None = None) -> OpGraph:
    """The full training step (forward, loss, backward, ``optimizer`` update) as an OpGraph, with
    roofline compute costs for ``cost_keys`` (default :data:`placer.cost.DEFAULT_COST_KEYS`).

    ``loss_fn(output) -> scalar``; by default the output itself when it is a scalar (a model that
    computes its own loss), else its mean. ``example_inputs`` may be real, meta or fake tensors:
    only their shapes and dtypes are used."""
    return trace_training_step(module, example_inputs, loss_fn=loss_fn, optimizer=optimizer, name=name,
                               cost_keys=cost_keys).graph


def capture_forward(module: torch.nn.Module, example_inputs: Sequence[Any], *, name: str | None = None,
                    cost_keys: Sequence[str] | None = None) -> OpGraph:
    """The forward pass only (no gradients, no update) as an OpGraph; every op has role forward."""
    return trace_forward(module, example_inputs, name=name, cost_keys=cost_keys).graph


def trace_training_step(module, example_inputs, *, loss_fn=None, optimizer="sgd-momentum", name=None,
                        cost_keys=None, lr: float = 0.1) -> Capture:
    """:func:`capture_training_step`, returning the :class:`Capture` (for profiling)."""
    if optimizer not in OPTIMIZERS:
        raise InputError("capture", f"optimizer '{optimizer}'", "is not supported", f"use one of {', '.join(OPTIMIZERS)}")
    return _trace(module, example_inputs, train=True, loss_fn=loss_fn, optimizer=optimizer, lr=lr,
                  name=name, cost_keys=cost_keys)


def trace_forward(module, example_inputs, *, name=None, cost_keys=None) -> Capture:
    """:func:`capture_forward`, returning the :class:`Capture`."""
    return _trace(module, example_inputs, train=False, loss_fn=None, optimizer="sgd", lr=0.0,
                  name=name, cost_keys=cost_keys)


# ---------------------------------------------------------------------- optimizers (functional)
def _update(optimizer: str, p, g, state, lr: float):
    """One functional update of a parameter; returns (new parameter, new state list).
    SGD with momentum follows ``torch.optim.SGD`` (buf = m * buf + g; p -= lr * buf), Adam
    ``torch.optim.Adam`` (Kingma & Ba 2015, Algorithm 1) at step 1."""
    if optimizer == "sgd":
        return torch.add(p, g, alpha=-lr), []
    if optimizer == "sgd-momentum":
        buf = torch.add(g, state[0], alpha=0.9)
        return torch.add(p, buf, alpha=-lr), [buf]
    b1, b2, eps = 0.9, 0.999, 1e-8
    m = torch.lerp(state[0], g, 1 - b1)
    v = torch.addcmul(state[1] * b2, g, g, value=1 - b2)
    denom = torch.add(torch.sqrt(v) / (1 - b2) ** 0.5, eps)
    return torch.addcdiv(p, m, denom, value=-lr / (1 - b1)), [m, v]


def _default_loss(out):
    if isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = next(iter(out.values()))
    if not isinstance(out, torch.Tensor):
        raise InputError("capture", "model output", f"is a {type(out).__name__}, not a tensor",
                         "return a tensor (or a loss) from forward, or pass loss_fn")
    return out if out.numel() == 1 else out.float().mean()


# ---------------------------------------------------------------------- annotation hooks
class _Annotator:
    """Module forward hooks and autograd-node hooks that tag every traced fx node
    (``node.meta['custom']``) with its module path or the autograd node it differentiates."""

    def __init__(self, module: torch.nn.Module):
        self.handles = []
        self.stack = []
        for path, mod in module.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._enter({"module": path})))
            self.handles.append(mod.register_forward_hook(self._exit, always_call=True))

    def _enter(self, note):
        def hook(*_):
            cm = fx_traceback.annotate(note)
            cm.__enter__()
            self.stack.append(cm)
        return hook

    def _exit(self, *_):
        if self.stack:
            self.stack.pop().__exit__(None, None, None)

    def hook_backward(self, loss: torch.Tensor) -> None:
        seen, todo = set(), [loss.grad_fn]
        while todo:
            fn = todo.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            seq = fn._sequence_nr()
            self.handles.append(fn.register_prehook(self._pre_grad(seq)))
            self.handles.append(fn.register_hook(self._exit))
            todo.extend(f for f, _ in fn.next_functions)

    def _pre_grad(self, seq):
        enter = self._enter({"grad_of": seq})

        def hook(grad_outputs):
            enter()
        return hook

    def close(self):
        for h in self.handles:
            h.remove()
        while self.stack:
            self._exit()


# ---------------------------------------------------------------------- tracing
def _fake(mode: FakeTensorMode, t: torch.Tensor) -> torch.Tensor:
    with mode:
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu")


def _trace(module, example_inputs, *, train, loss_fn, optimizer, lr, name, cost_keys) -> Capture:
    if not isinstance(module, torch.nn.Module):
        raise InputError("capture", "module", f"is a {type(module).__name__}", "give a torch.nn.Module")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    inputs = list(example_inputs)
    t0 = time.perf_counter()
    mode = FakeTensorMode()
    pnames = [k for k, _ in module.named_parameters()]
    bnames = [k for k, _ in module.named_buffers()]
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    fp = [_fake(mode, params[k]) for k in pnames]
    fb = [_fake(mode, buffers[k]) for k in bnames]
    slots = STATE_SLOTS[optimizer] if train else 0
    fs = [[_fake(mode, params[k]) for _ in range(slots)] for k in pnames]
    tensor_pos = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    fx_in = [_fake(mode, inputs[i]) for i in tensor_pos]
    loss_fn = loss_fn or _default_loss
    ann = _Annotator(module)

    def call_model(p_list, b_list, xs):
        args = list(inputs)
        for i, x in zip(tensor_pos, xs):
            args[i] = x
        state = {**dict(zip(pnames, p_list)), **dict(zip(bnames, b_list))}
        return torch.func.functional_call(module, state, tuple(args))

    def train_step(p_list, b_list, s_list, xs):
        def lossf(p, b):
            with fx_traceback.annotate({"phase": "forward"}):
                loss = loss_fn(call_model(p, b, xs))
            ann.hook_backward(loss)
            return loss

        with fx_traceback.annotate({"phase": "backward"}):
            grads, loss = torch.func.grad_and_value(lossf)(p_list, b_list)
        new_p, new_s = [], []
        for k, p, g, s in zip(pnames, p_list, grads, s_list):
            with fx_traceback.annotate({"phase": "update", "param": k}):
                np_, ns = _update(optimizer, p, g, s, lr)
            new_p.append(np_)
            new_s.append(ns)
        return loss, new_p, new_s, list(grads)  # the gradients too: placer.runtime checks them

    def forward(p_list, b_list, s_list, xs):
        with torch.no_grad(), fx_traceback.annotate({"phase": "forward"}):
            return call_model(p_list, b_list, xs)

    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # it logs every failing op before raising
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with fx_traceback.preserve_node_meta(), mode:
            gm = make_fx(torch.func.functionalize(train_step if train else forward))(fp, fb, fs, fx_in)
    except InputError:
        raise
    except Exception as e:  # report the model's own error in the project's one-line format
        raise InputError("capture", type(module).__name__, f"could not be traced ({type(e).__name__}: {e})".strip(),
                         "check that the inputs match the model and forward is traceable (no data-dependent control flow)") from e
    finally:
        ann.close()
        quiet.setLevel(level)
    gm.graph.eliminate_dead_code()
    _check_dtypes(gm, type(module).__name__)
    graph, op_nodes, info, node_op = _to_opgraph(gm, pnames, bnames, slots, len(fx_in), train, optimizer,
                                                 name or type(module).__name__)
    capture_s = time.perf_counter() - t0
    from placer.cost.roofline import DEFAULT_COST_KEYS, roofline_costs

    costs = {k.lower(): roofline_costs(graph, k) for k in (DEFAULT_COST_KEYS if cost_keys is None else cost_keys)}
    graph = graph.replace(compute_us=costs, meta={**graph.meta, "capture_s": round(capture_s, 3)})
    info.update(params=pnames, buffers=bnames, slots=slots, inputs=len(fx_in), train=train)
    return Capture(graph, gm, op_nodes, capture_s, info, node_op)


# aten ops whose tensor operands must share one dtype when run for real; fake and meta tensors do not check it
_SAME_DTYPE = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "matmul", "convolution",
               "_convolution", "linear"}


def _check_dtypes(gm, model: str) -> None:
    """Refuse a trace that real tensors could not run: a matrix product or convolution mixing dtypes
    (an int64 input fed to ``nn.Linear``). Tracing runs on fake tensors, which accept it; the
    first real step (``placer run``) would fail."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        packet = getattr(node.target, "overloadpacket", None)
        if getattr(packet, "__name__", None) not in _SAME_DTYPE:
            continue
        dtypes = []
        for a in node.args:
            v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if isinstance(v, torch.Tensor) and v.dtype not in dtypes:
                dtypes.append(v.dtype)
        if len(dtypes) > 1:
            names = " and ".join(str(d).replace("torch.", "") for d in dtypes)
            raise InputError("capture", model, f"op {node.name} ({packet.__name__}) mixes {names} tensors, which a real "
                             "step cannot run", "give each input the dtype the model expects (e.g. 3x32x32 for "
                             "float32, SHAPE:int64:HIGH only for token ids)", kind="input-dtype")


# ---------------------------------------------------------------------- fx graph -> OpGraph
_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}  # touch no bytes


def _owner(param_name: str) -> str:
    return param_name.rsplit(".", 1)[0] if "." in param_name else ""


def _to_opgraph(gm, pnames, bnames, slots, n_inputs, train, optimizer, name):
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    n_p, n_b = len(pnames), len(bnames)
    if len(placeholders) != n_p + n_b + n_p * slots + n_inputs:
        raise AssertionError("unexpected placeholder count")  # pragma: no cover - make_fx flattening changed
    root: dict[fx.Node, int] = {}  # fx node -> op index producing (or aliased by) its value
    names, types, modules, roles, params, outb, flops, accessed, dtypes, shapes = ([] for _ in range(10))
    coloc, mirror_seq, op_nodes, extra_bytes = [], [], [], []
    grad_of: list[int] = []
    phase_mod: list[str] = []

    def new_op(nm, typ, mod, role, node, val, pbytes=0.0, fl=0.0, acc=0.0, group=-1, gseq=-1):
        root[node] = len(names)
        names.append(nm); types.append(typ); modules.append(mod); roles.append(role)
        params.append(float(pbytes)); outb.append(float(value_bytes(val))); flops.append(float(fl))
        accessed.append(float(acc)); dtypes.append(value_dtype(val))
        ins = ";".join(describe(x.meta.get("val")) for x in node.all_input_nodes) if node.op == "call_function" else ""
        shapes.append(f"{ins} -> {describe(val)}" if ins else describe(val))
        coloc.append(group); grad_of.append(gseq); op_nodes.append(node if node.op == "call_function" else None)
        return root[node]

    # sources: parameters (+ their optimizer state), buffers, inputs
    for k, ph in enumerate(placeholders[:n_p]):
        state = placeholders[n_p + n_b + k * slots: n_p + n_b + (k + 1) * slots]
        pb = value_bytes(ph.meta["val"]) * (1 + len(state))
        i = new_op(pnames[k], "parameter", _owner(pnames[k]), FORWARD, ph, ph.meta["val"], pbytes=pb, group=k)
        for s in state:
            root[s] = i
    for k, ph in enumerate(placeholders[n_p:n_p + n_b]):
        new_op(bnames[k], "buffer", _owner(bnames[k]), FORWARD, ph, ph.meta["val"],
               pbytes=value_bytes(ph.meta["val"]), group=n_p + k)
    for k, ph in enumerate(placeholders[n_p + n_b + n_p * slots:]):
        new_op(f"input:{k}", "input", "", FORWARD, ph, ph.meta["val"])
    param_group = {nm: k for k, nm in enumerate(pnames)}
    buffer_ph = {ph: n_p + k for k, ph in enumerate(placeholders[n_p:n_p + n_b])}

    edges: dict[tuple[int, int], dict] = {}
    for node in nodes:
        if node.op in ("placeholder", "output"):
            continue
        val = node.meta.get("val")
        custom = node.meta.get("custom", {}) or {}
        if node.op == "get_attr":
            new_op(f"const/{node.name}", "constant", custom.get("module", ""), FORWARD, node, val)
            continue
        if node.op != "call_function":  # pragma: no cover - make_fx emits no call_module / call_method
            continue
        ins = node.all_input_nodes
        if is_view(node.target) and ins:
            root[node] = root[ins[0]]
            continue
        phase = custom.get("phase", "")
        seq = custom.get("grad_of", -1)
        group = -1
        if phase == "update" and train:
            role, mod = UPDATE, _owner(custom["param"])
            group = param_group[custom["param"]]
            label = f"{custom['param']}/update/{node.name}"
        elif phase == "backward":
            role, mod, label = BACKWARD, "", f"bwd/{node.name}"
        elif node.target is torch.ops.aten.copy_.default and ins and ins[0] in buffer_ph:
            role, mod, group = UPDATE, _owner(ins[0].name), buffer_ph[ins[0]]
            label = f"{bnames[group - n_p]}/writeback/{node.name}"
            mod = _owner(bnames[group - n_p])
        else:
            role, mod = FORWARD, custom.get("module", "")
            label = f"{mod}/{node.name}" if mod else node.name
        args, kwargs = materialize(node.args), materialize(node.kwargs)
        fl = node_flops(node.target, args, kwargs, val)
        in_bytes = sum(value_bytes(x.meta.get("val")) for x in ins)
        acc = 0.0 if aten_name(node.target) in _ALLOCATIONS else in_bytes + value_bytes(val)
        i = new_op(label, str(node.target), mod, role, node, val, fl=fl, acc=acc,
                   group=group, gseq=seq if role == BACKWARD else -1)
        mirror_seq.append((i, node.meta.get("seq_nr", -1)))
        for x in ins:
            s = root[x]
            if s == i:
                continue
            e = edges.setdefault((s, i), {})
            e[x] = value_bytes(x.meta.get("val"))

    # mirrors: a backward op -> the first forward op recorded with the autograd node's seq_nr
    fwd_of_seq: dict[int, int] = {}
    for i, seq in mirror_seq:
        if roles[i] == FORWARD and seq is not None and seq >= 0:
            fwd_of_seq.setdefault(int(seq), i)
    mirror = [-1] * len(names)
    for i, gseq in enumerate(grad_of):
        if roles[i] == BACKWARD and gseq >= 0 and gseq in fwd_of_seq:
            mirror[i] = fwd_of_seq[gseq]
            modules[i] = modules[mirror[i]]
    # backward ops outside any autograd node (gradient accumulation): the module of an input
    pred_of: dict[int, list[int]] = {}
    for (s, d) in edges:
        pred_of.setdefault(d, []).append(s)
    for i in range(len(names)):
        if roles[i] == BACKWARD and mirror[i] < 0 and not modules[i]:
            for s in sorted(pred_of.get(i, [])):
                if modules[s]:
                    modules[i] = modules[s]
                    break
    for i in range(len(names)):
        if roles[i] == BACKWARD:
            names[i] = f"{modules[i]}/{names[i]}" if modules[i] else names[i]
    edge_list = [(s, d, min(sum(b.values()), outb[s]) if outb[s] > 0 else sum(b.values()))
                 for (s, d), b in edges.items()]
    # colocation ids only for groups with two or more members
    cnt = np.bincount(np.asarray([c for c in coloc if c >= 0] or [0]), minlength=1)
    colocation = [c if c >= 0 and cnt[c] > 1 else -1 for c in coloc]
    meta = {"source": "torch", "capture": "training-step" if train else "forward",
            "optimizer": optimizer if train else None, "torch_version": torch.__version__,
            "capture_version": CAPTURE_VERSION, "views": "folded into producer",
            "op_dtype": dtypes, "op_shapes": shapes}
    g = OpGraph.build(names, edge_list, name=name, op_types=types, modules=modules, flops=flops,
                      bytes_accessed=accessed, output_bytes=outb, param_bytes=params, colocation=colocation,
                      role=roles, mirror=mirror, meta=meta, source=f"capture of {name}")
    if list(g.op_names) != names:  # pragma: no cover - fx order is topological, build keeps it
        order = {nm: k for k, nm in enumerate(names)}
        op_nodes = [op_nodes[order[nm]] for nm in g.op_names]
        new_index = {order[nm]: k for k, nm in enumerate(g.op_names)}
        root = {n: new_index[i] for n, i in root.items()}
    info = {"fx_nodes": len(nodes), "ops": g.n_ops}
    return g, op_nodes, info, root
