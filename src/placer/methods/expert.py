"""The human-expert placements the papers compare against.

* A graph carrying a published expert split in ``graph.meta['expert_split']`` (op indices per
  accelerator and per CPU; the dnn-partitioning importer attaches the ``human-experts`` split of
  Tarnawski et al. 2020, :func:`placer.frontends.dnn_partitioning.read_expert_split`): that split,
  the k-th accelerator on the cluster's k-th GPU. This module reads no file.
* Recurrent models (NMT, RNNLM, GNMT): each LSTM layer on its own GPU, the embedding with the first
  layer, the softmax and attention with the last (Post, Gao et al. 2018, section 4; the Hierarchical
  Planner, Mirhoseini et al. 2018, section 3, after Wu et al. 2016). Layers are found from module
  paths (``encoder.layers.0``, ``decoder.layers.1``, ``rnn.2``, ``lstm_1`` ...) or, for graphs
  without paths, from op types containing ``LSTM`` in topological order. Layers of equal depth in
  parallel stacks (encoder layer i, decoder layer i) share GPU i, as in GNMT; with more depths than
  GPUs, consecutive depths share a GPU.
* Convolutional models (Inception-V3, ResNet, NASNet, VGG): the whole model on a single GPU.

A graph with none of these structures raises :class:`NotApplicable`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from placer.graph import FORWARD
from placer.methods.base import Evaluator, MethodConfig, NotApplicable, register
from placer.methods.baselines import colocate
from placer.methods.start_cache import shared  # computed once per Problem, shared with the seeds
from placer.methods.devices import gpu_devices
from placer.methods.memory_repair import relieve_oom

_INDEXED = re.compile(r"^(layers?|lstms?|rnns?|grus?|cells?|h)$", re.I)
_SUFFIXED = re.compile(r"^(lstm|rnn|gru|layer|cell)_?(\d+)$", re.I)
_FIRST = re.compile(r"embed", re.I)
_LAST = re.compile(r"softmax|attention|attn|logits|classifier|generator|projection|loss", re.I)
_RECURRENT = re.compile(r"lstm|rnn|gru", re.I)
_CONV = re.compile(r"conv", re.I)


def published_split(problem) -> tuple[np.ndarray, str] | None:
    """The expert split attached to the graph (``meta['expert_split']``) as a placement on this
    cluster, or None when the graph has none; NotApplicable when the cluster is too small for it."""
    split = problem.graph.meta.get("expert_split")
    if not split:
        return None
    gpus, cpus = problem.cluster.gpus(), problem.cluster.cpus()
    acc, cp = split.get("accelerators", []), split.get("cpus", [])
    name = split.get("file", "published split")
    if len(acc) > len(gpus) or len(cp) > len(cpus):
        raise NotApplicable("expert", f"the published expert split {name} does not fit this cluster: it uses "
                            f"{len(acc)} accelerators and {len(cp)} CPUs, the cluster has {len(gpus)} GPUs and "
                            f"{len(cpus)} CPUs", "use the cluster of the matching graph (cluster auto)")
    p = np.full(problem.n_ops, -1, dtype=np.int64)
    for devs, groups in ((gpus, acc), (cpus, cp)):
        for k, ops in enumerate(groups):
            p[np.asarray(ops, dtype=np.int64)] = devs[k]
    if (p < 0).any():
        raise NotApplicable("expert", f"the published expert split {name} leaves op "
                            f"'{problem.graph.op_names[int(np.flatnonzero(p < 0)[0])]}' unplaced")
    return p, f"dnn-partitioning expert split {name}"


# ---------------------------------------------------------------------- layers
def layer_of_ops(graph) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """(n,) layer id per op (-1: none) and per layer (stack, depth), from module paths; falls back
    to forward ops whose type names an LSTM/GRU/RNN (one stack, in topological order)."""
    keys: dict[str, tuple[str, int]] = {}
    lid = np.full(graph.n_ops, -1, dtype=np.int64)
    ids: dict[str, int] = {}
    for i, path in enumerate(graph.modules):
        parts = [p for p in re.split(r"[./]", path) if p]
        for k, part in enumerate(parts):
            key = None
            if part.isdigit() and k > 0 and _INDEXED.match(parts[k - 1]):
                key, stack, depth = ".".join(parts[:k + 1]), ".".join(parts[:k]), int(part)
            elif _SUFFIXED.match(part):
                m = _SUFFIXED.match(part)
                key, stack, depth = ".".join(parts[:k + 1]), ".".join(parts[:k] + [m.group(1).lower()]), int(m.group(2))
            if key is not None:
                if key not in ids:
                    ids[key] = len(ids)
                    keys[key] = (stack, depth)
                lid[i] = ids[key]
                break
    if len(ids) >= 1 and _is_recurrent(graph, lid >= 0):
        return lid, [keys[k] for k in ids]
    # no module structure: LSTM-typed forward ops in topological order, one layer each
    lid[:] = -1
    layers = []
    for i in range(graph.n_ops):
        if graph.role[i] == FORWARD and _RECURRENT.search(graph.op_types[i]):
            lid[i] = len(layers)
            layers.append(("", len(layers)))
    for i in range(graph.n_ops):  # a backward op belongs to the layer of the forward op it mirrors
        m = graph.mirror[i]
        if lid[i] < 0 and m >= 0 and lid[m] >= 0:
            lid[i] = lid[m]
    return lid, layers


def _is_recurrent(graph, mask: np.ndarray) -> bool:
    """The layers are recurrent: their ops, the graph's name or its zoo model name an LSTM / GRU /
    RNN / NMT, or the layers compute both sigmoid and tanh (an LSTM cell traced op by op)."""
    idx = np.flatnonzero(mask)
    texts = [graph.op_types[i] + " " + graph.modules[i] + " " + graph.op_names[i] for i in idx]
    if any(_RECURRENT.search(t) for t in texts):
        return True
    zoo = graph.meta.get("zoo") if isinstance(graph.meta.get("zoo"), dict) else {}
    if re.search(r"lstm|rnn|gru|nmt|seq2seq", f"{graph.name} {zoo.get('model', '')}", re.I):
        return True
    types = " ".join(graph.op_types[i].lower() for i in idx)
    return "sigmoid" in types and "tanh" in types


def _has_conv(graph) -> bool:
    return any(_CONV.search(t) for t in graph.op_types) or any(_CONV.search(m) for m in graph.modules)


def recurrent_expert(problem) -> np.ndarray:
    """Each LSTM layer on its own GPU (depth i of every stack on GPU i), embedding with the first
    layer, softmax / attention with the last, every other op with the layer it hangs off."""
    g = problem.graph
    lid, layers = layer_of_ops(g)
    if not layers:
        raise NotApplicable("expert", "no LSTM layers found (module paths like encoder.layers.0, or LSTM op types)")
    gpus = gpu_devices(problem)
    # depth -> GPU
    first_op = {}
    for i in np.flatnonzero(lid >= 0):
        first_op.setdefault(int(lid[i]), int(i))
    stacks: dict[str, list[int]] = {}
    for layer in sorted(first_op, key=first_op.get):
        stacks.setdefault(layers[layer][0], []).append(layer)
    depth_of = {}
    for members in stacks.values():
        for rank, layer in enumerate(members):
            depth_of[layer] = rank
    n_depth = max(depth_of.values()) + 1
    G = len(gpus)
    gpu_of_depth = [gpus[d] if n_depth <= G else gpus[d * G // n_depth] for d in range(n_depth)]
    p = np.full(g.n_ops, -1, dtype=np.int64)
    has = lid >= 0
    p[has] = [gpu_of_depth[depth_of[int(x)]] for x in lid[has]]
    ordered = sorted(first_op, key=first_op.get)
    first_dev = gpu_of_depth[depth_of[ordered[0]]]
    last_dev = gpu_of_depth[max(depth_of.values())]
    for i in range(g.n_ops):
        if p[i] >= 0:
            continue
        text = f"{g.modules[i]} {g.op_names[i]} {g.op_types[i]}"
        m = g.mirror[i]
        if m >= 0 and p[m] >= 0:
            p[i] = p[m]
        elif _FIRST.search(text):
            p[i] = first_dev
        elif _LAST.search(text):
            p[i] = last_dev
    # the rest follow the latest placed parent, else (second pass, reversed) their first placed child
    for i in range(g.n_ops):
        if p[i] < 0:
            pr = g.predecessors(i)
            pr = pr[p[pr] >= 0]
            if len(pr):
                p[i] = p[pr.max()]
    for i in range(g.n_ops - 1, -1, -1):
        if p[i] < 0:
            sc = g.successors(i)
            sc = sc[p[sc] >= 0]
            p[i] = p[sc.min()] if len(sc) else first_dev
    return _runnable(problem, p)


def _runnable(problem, p: np.ndarray) -> np.ndarray:
    """An op that cannot run where the rule put it goes to the first device that can run it."""
    ok = np.isfinite(problem.compute_us)
    bad = ~ok[np.arange(problem.n_ops), p]
    p = p.copy()
    p[bad] = np.argmax(ok[bad], axis=1)
    return colocate(problem, p)


def single_gpu_expert(problem) -> np.ndarray:
    """The whole model on one GPU: the fastest one its parameters fit, else the fastest."""
    best = None
    for d in gpu_devices(problem):
        p = _runnable(problem, np.full(problem.n_ops, d, dtype=np.int64))
        key = (not problem.memory_feasible(p), float(problem.compute_us[np.arange(problem.n_ops), p].sum()))
        if best is None or key < best[0]:
            best = (key, p)
    return best[1]


def expert_placement(problem) -> tuple[np.ndarray, str]:
    """The expert placement of this problem and how it was found (NotApplicable when no rule applies)."""
    g = problem.graph
    pub = published_split(problem)
    if pub is not None:
        return pub
    lid, layers = layer_of_ops(g)
    if layers:
        return recurrent_expert(problem), f"recurrent rule: {len(layers)} LSTM layers, one GPU per depth"
    if _has_conv(g):
        return single_gpu_expert(problem), "convolutional model: single GPU"
    raise NotApplicable("expert", "no expert rule applies: no published expert split, no LSTM layers and no "
                        "convolutions found in op types or module paths")


@dataclass(frozen=True)
class ExpertConfig(MethodConfig):
    """The papers' human-expert placements."""

    fit_memory: bool | None = None  # move ops off overflowing devices (None: for the rule-based placements only)

    @classmethod
    def method_name(cls):
        return "expert"



def shared_expert(problem):
    """The expert placement and how it was made (:func:`placer.methods.expert.expert_placement`), once
    per Problem."""
    return shared(problem, ("expert",), lambda: expert_placement(problem))


@register("expert", "the papers' human-expert placement (CNN on one GPU; one LSTM layer per GPU; published splits)",
          "expert", ExpertConfig,
          paper="Post section 4; Hierarchical Planner section 3; Tarnawski et al. 2020 expert splits", version=1)
def expert(problem, seed: int, ev: Evaluator, cfg: ExpertConfig):
    """A published split is returned as published unless ``fit_memory`` is set."""
    p, how = shared_expert(problem)
    notes = [how]
    fit_memory = cfg.fit_memory if cfg.fit_memory is not None else not how.startswith("dnn-partitioning")
    if fit_memory:
        q, r = relieve_oom(problem, p, ev)
        if not np.array_equal(p, q):
            notes.append("moved ops off a device whose memory overflowed")
        p = q
    else:
        r = ev.simulate(p)
    if r.oom:
        notes.append("OOM: the expert placement does not fit memory")
    return ev.result("expert", p, notes=notes)
