"""The graph encoder Mars and GDP read a graph with (needs the ``torch`` extra and torch_geometric).

What a node is (:class:`PlacementNodes`). Both papers place every op of a TensorFlow graph. Ours
are PyTorch training steps whose backward ops mirror forward ops; as TensorFlow's
``colocate_gradients_with_ops`` does, a backward op goes where its forward op goes, and colocation
groups stay together. The units placed are therefore the components of colocation groups and
forward/backward mirror pairs and, only where a graph has more components than ``max_nodes``
(GNMT: ~12 k), contiguous chunks of equal work of them (our choice, for a CPU budget; Inception-V3
and BERT-base keep every component: 1,046 and 692 nodes). Nodes are numbered by their first op, a
topological order of the forward graph: the order the placers read them in.

Node features (Mars section 3.1 and GDP section 3.1 list the op type, the output shape and the
adjacency; Mars adds the op's compute cost). We have no tensor shapes, only bytes, so the output
shape becomes the output size; per node:

* op type: the fraction of the node's ops in each of ``TYPE_BUCKETS`` (64) buckets, an op's bucket
  being a CRC-32 hash of its canonical type (``aten.convolution_backward.default`` ->
  ``convolution_backward``). A fixed-size histogram instead of a learned vocabulary, so that the same
  weights read graphs with op types never seen in training (collisions are the price; our choice);
* output size: log1p(output bytes / graph mean) and log10(1 + output bytes) / 10;
* compute cost: log1p(time on the fastest candidate device / graph mean) and log10(1 + us) / 6;
* parameter bytes: log1p(bytes / graph mean) and the fraction of the smallest candidate device's
  memory the node holds (parameters + outputs);
* adjacency: the edges themselves (the GNN's message passing), plus log1p of the in- and out-degree;
* roles: fractions of forward / backward / update ops, and the position i / N in the order.

Dividing by the graph mean keeps graphs of any batch size or unit alike; the absolute log terms keep
scale information. :class:`GraphEncoder` is a stack of PyTorch Geometric ``GCNConv`` (Mars) or
``SAGEConv`` with max-pooling aggregation (GDP, "GraphSAGE-pool") layers over the undirected node
graph; nothing in it depends on the number of nodes, so one set of weights serves graphs of any size.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch
from torch import nn

from placer.errors import InputError
from placer.graph import BACKWARD, FORWARD, UPDATE
from placer.grouping.mirrors import mirror_chunks

TYPE_BUCKETS = 64
N_NUMERIC = 13
N_FEATURES = TYPE_BUCKETS + N_NUMERIC


def canonical_type(op_type: str) -> str:
    """``aten.convolution_backward.default`` -> ``convolution_backward``; other names as given."""
    t = op_type.strip().lower()
    if t.startswith("aten."):
        t = t[5:]
        t = t.rsplit(".", 1)[0] if "." in t else t
    return t.lstrip("_")


def type_bucket(op_type: str) -> int:
    return zlib.crc32(canonical_type(op_type).encode()) % TYPE_BUCKETS


def node_of_ops(problem, max_nodes: int) -> np.ndarray:
    """op -> node: colocation groups and backward ops with the forward op they mirror merged; when
    more than ``max_nodes`` components remain, consecutive components (ordered by first op) are cut
    into ``max_nodes`` chunks of about equal work. Nodes are numbered by their first op."""
    return mirror_chunks(problem, problem.fastest_us, max_nodes)


@dataclass(eq=False)
class PlacementNodes:
    """An op-level Problem seen as nodes (op groups placed together) with candidate devices."""

    problem: object  # placer.problem.Problem
    group_of: np.ndarray  # (n_ops,) node of each op, numbered by first op
    devices: np.ndarray  # (A,) device index of each action
    name: str = ""

    def __post_init__(self):
        P, g = self.problem, self.problem.graph
        gid = np.asarray(self.group_of, dtype=np.int64)
        self.group_of = gid
        self.devices = np.asarray(self.devices, dtype=np.int64)
        self.name = self.name or g.name
        N, A = int(gid.max()) + 1, len(self.devices)
        self.n_groups = N
        cost = P.compute_us[:, self.devices]
        self.compute_us = np.stack([np.bincount(gid, weights=cost[:, a], minlength=N) for a in range(A)], axis=1)
        self.feasible = np.isfinite(self.compute_us)
        if not self.feasible.any(axis=1).all():
            v = int(np.flatnonzero(~self.feasible.any(axis=1))[0])
            op = g.op_names[int(np.flatnonzero(gid == v)[0])]
            raise InputError(g.name, f"node of op '{op}'", "no candidate device can run all its ops",
                             "allow every device (devices=all)")
        self.output_bytes = np.bincount(gid, weights=g.output_bytes, minlength=N)
        s, d = gid[g.edge_src], gid[g.edge_dst]
        keep = s != d
        key = np.unique(s[keep] * N + d[keep])
        self.edge_src, self.edge_dst = key // N, key % N

    @property
    def n_actions(self) -> int:
        return len(self.devices)

    def expand(self, actions: np.ndarray) -> np.ndarray:
        """Node placement(s) (action index per node, shape (..., N)) -> op placement(s) (..., n_ops)."""
        return self.devices[np.asarray(actions, dtype=np.int64)[..., self.group_of]]


def candidate_devices(problem, devices: str = "auto", group_of: np.ndarray | None = None) -> np.ndarray:
    """'gpus', 'all', or 'auto': the GPUs when the cluster has some and every op (every node of the
    op -> node map ``group_of``, all its ops, when given) can run on one, else every device."""
    gpus = list(problem.cluster.gpus())
    if devices == "all" or not gpus:
        return np.arange(problem.n_devices, dtype=np.int64)
    ok = problem.allowed[:, gpus]
    if group_of is not None:
        node_ok = np.ones((int(np.max(group_of)) + 1, len(gpus)), dtype=bool)
        np.logical_and.at(node_ok, np.asarray(group_of), ok)
        ok = node_ok
    if devices == "gpus" or ok.any(axis=1).all():
        return np.asarray(gpus, dtype=np.int64)
    return np.arange(problem.n_devices, dtype=np.int64)


def placement_nodes(problem, max_nodes: int = 1024, devices: str = "auto") -> PlacementNodes:
    group_of = node_of_ops(problem, max_nodes)
    return PlacementNodes(problem, group_of, candidate_devices(problem, devices, group_of))


def segments(n: int, size: int) -> list[tuple[int, int]]:
    """[start, end) of consecutive segments of at most ``size`` nodes covering 0..n-1 in order: the
    pieces GDP's and Mars's placers read one after the other."""
    if size < 1:
        raise ValueError("segment size must be >= 1")
    return [(s, min(n, s + size)) for s in range(0, n, size)]


@dataclass(eq=False)
class GraphData:
    """One graph as the encoder reads it: node features and undirected edges (PyG layout)."""

    x: torch.Tensor  # (N, N_FEATURES) float32
    edge_index: torch.Tensor  # (2, 2E) int64, both directions, no self loops
    name: str = ""

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def node_features(gp) -> np.ndarray:
    """(N, N_FEATURES) float32 features of :class:`PlacementNodes` (see the module docstring)."""
    P, g = gp.problem, gp.problem.graph
    N, gid = gp.n_groups, gp.group_of
    buckets = np.array([type_bucket(t) for t in g.op_types], dtype=np.int64)
    hist = np.zeros((N, TYPE_BUCKETS))
    np.add.at(hist, (gid, buckets), 1.0)
    count = hist.sum(axis=1, keepdims=True)
    hist /= np.maximum(count, 1.0)
    comp = np.where(gp.feasible, gp.compute_us, np.inf).min(axis=1)
    comp = np.where(np.isfinite(comp), comp, 0.0)
    out = np.asarray(gp.output_bytes, dtype=np.float64)
    par = np.bincount(gid, weights=g.param_bytes, minlength=N)
    cap = float(P.memory_bytes[gp.devices].min())
    indeg = np.bincount(gp.edge_dst, minlength=N).astype(np.float64)
    outdeg = np.bincount(gp.edge_src, minlength=N).astype(np.float64)
    role = np.zeros((N, 3))
    for r in (FORWARD, BACKWARD, UPDATE):
        role[:, r] = np.bincount(gid, weights=(g.role == r).astype(np.float64), minlength=N)
    role /= np.maximum(count, 1.0)

    def rel(a):
        return np.log1p(a / max(float(a.mean()), 1e-12))

    num = np.stack([
        rel(comp), np.log10(1.0 + comp) / 6.0,
        rel(out), np.log10(1.0 + out) / 10.0,
        rel(par), np.minimum((par + out) / cap, 4.0),
        np.log1p(indeg), np.log1p(outdeg),
        role[:, 0], role[:, 1], role[:, 2],
        np.arange(N) / max(N - 1, 1), np.log1p(count[:, 0]) / 5.0,
    ], axis=1)
    assert num.shape[1] == N_NUMERIC
    return np.concatenate([hist, num], axis=1).astype(np.float32)


def graph_data(gp) -> GraphData:
    """The encoder's view of a grouped problem: features and the undirected node graph."""
    x = torch.as_tensor(node_features(gp))
    s, d = np.asarray(gp.edge_src, dtype=np.int64), np.asarray(gp.edge_dst, dtype=np.int64)
    ei = np.stack([np.concatenate([s, d]), np.concatenate([d, s])])
    if ei.shape[1]:
        key = np.unique(ei[0] * gp.n_groups + ei[1])  # sorted, de-duplicated: a fixed order for the sums
        ei = np.stack([key // gp.n_groups, key % gp.n_groups])
    return GraphData(x, torch.as_tensor(ei, dtype=torch.int64), gp.name)


@dataclass(frozen=True)
class EncoderConfig:
    kind: str = "gcn"  # "gcn" (Mars: GCN layers) or "sage" (GDP: GraphSAGE with max-pooling aggregation)
    hidden: int = 128  # node embedding size (our choice: neither paper's text we could read gives it)
    layers: int = 3  # message-passing layers (hops of neighbourhood each embedding sees)
    in_features: int = N_FEATURES  # input feature size (fixed by node_features)

    def __post_init__(self):
        if self.kind not in ("gcn", "sage"):
            raise ValueError(f"encoder kind must be 'gcn' or 'sage', not {self.kind!r}")
        from placer.bounds import bound

        bound("encoder.hidden").check(self.hidden, "graph encoder")  # the table's rows (placer.bounds)
        bound("encoder.layers").check(self.layers, "graph encoder")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EncoderConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class GraphEncoder(nn.Module):
    """Linear input projection, then ``layers`` GCNConv / SAGEConv(max) layers with PReLU (as DGI's
    encoder) and a residual connection from the second layer on. Input (x, edge_index), output
    (N, hidden) node embeddings; the weights do not depend on N."""

    def __init__(self, cfg: EncoderConfig | None = None):
        super().__init__()
        from torch_geometric.nn import GCNConv, SAGEConv

        self.cfg = cfg = cfg or EncoderConfig()
        self.inp = nn.Linear(cfg.in_features, cfg.hidden)
        if cfg.kind == "gcn":
            self.convs = nn.ModuleList([GCNConv(cfg.hidden, cfg.hidden, cached=False) for _ in range(cfg.layers)])
        else:  # GraphSAGE-pool: a per-neighbour dense layer + ReLU, then max over neighbours (project=True)
            self.convs = nn.ModuleList([SAGEConv(cfg.hidden, cfg.hidden, aggr="max", project=True)
                                        for _ in range(cfg.layers)])
        self.acts = nn.ModuleList([nn.PReLU(cfg.hidden) for _ in range(cfg.layers)])

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for i, (conv, act) in enumerate(zip(self.convs, self.acts)):
            z = act(conv(h, edge_index))
            h = z if i == 0 else h + z
        return h

    def encode(self, data: GraphData) -> torch.Tensor:
        return self(data.x, data.edge_index)
