"""DOPPLER's four benchmark workloads (Yao et al., ICLR 2026, arXiv:2505.23131, section 5 and its
Fig. 1) as block dataflow graphs: chain matrix multiplication, a feed-forward network, a transformer
block and a transformer layer, at the paper's node counts (112, 192, 215 and 261 nodes, 4 GPUs).

These are *dataflow graphs as the paper uses them*, not training steps: every operand is cut into
blocks, every node is one block operation (an input block, a block matmul, the sum of the partial
products of one output block, an element-wise op, a normalisation), every edge carries one block
and nothing is mirrored by a backward pass. A node carries FLOPs and bytes accessed (fp32), so its
cost on each GPU model comes from the roofline of :mod:`placer.cost.roofline`; edges carry the
bytes of the block they move.

How each graph is cut (our construction: the paper's text we could read gives the node counts and
Fig. 1's scheme, the 3D algorithm of Agarwal et al. 1995 over partitioned matrices, not the block
grids): a product ``A (p x q blocks) . B (q x r blocks)`` is p*q*r block products and, when q > 1,
p*r nodes that each sum the q partial products of one output block.

* ``doppler-chainmm``: X.Y.Z with X 4x2, Y 2x4, Z 4x2 blocks of 2048x2048: 24 inputs, 32 + 16
  for X.Y, 32 + 8 for (X.Y).Z: 112 nodes.
* ``doppler-ffnn``: three layers h <- relu(h . W) on X of 2x4 blocks (2048 rows x 2048 features a
  block) and 4x4-block weights, no relu after the last: 8 + 3 x 64 - 8 = 192 nodes.
* ``doppler-tblock``: the attention half of a Llama layer on 5 row blocks and 5 head groups: per
  row block an RMSNorm; per (row block, head group) Q, K, V projections, scores, softmax, scores.V
  and the head group's output projection; per row block the sum over head groups and the residual
  add; inputs X (5 row blocks) and Wq, Wk, Wv, Wo (5 blocks each): 215 nodes.
* ``doppler-tlayer``: a whole Llama layer (RMSNorm, attention as above, residual, RMSNorm, SwiGLU
  feed-forward with gate/up/down projections cut in 6 hidden blocks, residual) on 3 row blocks and
  6 head groups: 261 nodes.
* ``doppler-tlayer-8gpu``: the same layer cut for 8 GPUs (4 row blocks, 8 head groups, 7 hidden
  blocks): 417 nodes, the node count of the 8-GPU transformer-layer graph the paper's code ships
  (the 4-GPU graphs are run on 8 GPUs too).
"""

from __future__ import annotations

from placer.graph import OpGraph

F32 = 4  # bytes per element


class _Blocks:
    """A dataflow graph under construction: block operations and the blocks they read."""

    def __init__(self, name: str):
        self.name = name
        self.names: list[str] = []
        self.types: list[str] = []
        self.flops: list[float] = []
        self.bytes: list[float] = []
        self.out: list[float] = []
        self.edges: list[tuple[int, int, float]] = []

    def op(self, name: str, kind: str, inputs: list[int], out_elems: float, flops: float) -> int:
        out = F32 * out_elems
        i = len(self.names)
        self.names.append(name)
        self.types.append(kind)
        self.flops.append(float(flops))
        self.bytes.append(float(out + sum(self.out[j] for j in inputs)))
        self.out.append(float(out))
        self.edges += [(j, i, self.out[j]) for j in inputs]
        return i

    def input(self, name: str, rows: int, cols: int) -> int:
        return self.op(name, "input", [], rows * cols, 0.0)

    def matmul(self, name: str, a: int, b: int, m: int, k: int, n: int) -> int:
        return self.op(name, "matmul", [a, b], m * n, 2.0 * m * k * n)

    def reduce(self, name: str, parts: list[int], m: int, n: int) -> int:
        """The sum of partial products (or a residual add) of one m x n block."""
        if len(parts) == 1:
            return parts[0]
        return self.op(name, "add", parts, m * n, (len(parts) - 1) * m * n)

    def elementwise(self, name: str, kind: str, inputs: list[int], m: int, n: int, flops_per: float) -> int:
        return self.op(name, kind, inputs, m * n, flops_per * m * n)

    def product(self, name: str, A: list[list[int]], B: list[list[int]], m: int, k: int, n: int) -> list[list[int]]:
        """A (p x q blocks of m x k) . B (q x r blocks of k x n) by the 3D algorithm: every block
        product, then one sum per output block (p x r blocks of m x n)."""
        p, q, r = len(A), len(B), len(B[0])
        return [[self.reduce(f"{name}_sum{i}{j}",
                             [self.matmul(f"{name}_mm{i}{t}{j}", A[i][t], B[t][j], m, k, n) for t in range(q)], m, n)
                 for j in range(r)] for i in range(p)]

    def graph(self, description: str) -> OpGraph:
        return OpGraph.build(self.names, self.edges, name=self.name, op_types=self.types, flops=self.flops,
                             bytes_accessed=self.bytes, output_bytes=self.out,
                             meta={"source": "doppler", "description": description,
                                   "paper": "Yao et al., DOPPLER, ICLR 2026 (arXiv:2505.23131), section 5"})


def _grid(b: _Blocks, name: str, rows: int, cols: int, m: int, n: int) -> list[list[int]]:
    return [[b.input(f"{name}{i}{j}", m, n) for j in range(cols)] for i in range(rows)]


def chain_mm(block: int = 2048) -> OpGraph:
    """X (4x2 blocks) . Y (2x4) . Z (4x2), blocks of ``block`` x ``block``: 112 nodes."""
    b = _Blocks("doppler-chainmm")
    X, Y, Z = _grid(b, "X", 4, 2, block, block), _grid(b, "Y", 2, 4, block, block), _grid(b, "Z", 4, 2, block, block)
    XY = b.product("XY", X, Y, block, block, block)
    b.product("XYZ", XY, Z, block, block, block)
    return b.graph("DOPPLER's chain matrix multiplication X.Y.Z by the 3D algorithm over 2048x2048 blocks "
                   "(a dataflow graph, not a training step)")


def ffnn(rows: int = 2048, width: int = 2048, layers: int = 3) -> OpGraph:
    """Three layers h <- relu(h . W_l) on X of 2x4 blocks, 4x4-block weights: 192 nodes."""
    b = _Blocks("doppler-ffnn")
    H = _grid(b, "X", 2, 4, rows, width)
    for layer in range(layers):
        W = _grid(b, f"W{layer}_", 4, 4, width, width)
        H = b.product(f"L{layer}", H, W, rows, width, width)
        if layer < layers - 1:
            H = [[b.elementwise(f"relu{layer}_{i}{j}", "relu", [h], rows, width, 1.0) for j, h in enumerate(row)]
                 for i, row in enumerate(H)]
    return b.graph("DOPPLER's three-layer feed-forward network relu(relu(X.W0).W1).W2 over 2048x2048 blocks "
                   "(a dataflow graph, not a training step)")


def _attention(b: _Blocks, X: list[int], heads: int, rows: int, d: int, head_d: int, tag: str) -> list[int]:
    """Pre-norm multi-head attention on row blocks X (rows x d each) with ``heads`` head groups of
    width ``head_d``; returns the row blocks after the residual add."""
    Wq, Wk, Wv = ([b.input(f"{tag}W{w}{h}", d, head_d) for h in range(heads)] for w in "qkv")
    Wo = [b.input(f"{tag}Wo{h}", head_d, d) for h in range(heads)]
    out = []
    for i, x in enumerate(X):
        n = b.elementwise(f"{tag}norm{i}", "rmsnorm", [x], rows, d, 4.0)
        parts = []
        for h in range(heads):
            q, k, v = (b.matmul(f"{tag}{w}{i}_{h}", n, W[h], rows, d, head_d) for w, W in (("q", Wq), ("k", Wk), ("v", Wv)))
            s = b.op(f"{tag}scores{i}_{h}", "matmul", [q, k], rows * rows, 2.0 * rows * head_d * rows)
            p = b.elementwise(f"{tag}softmax{i}_{h}", "softmax", [s], rows, rows, 5.0)
            o = b.op(f"{tag}pv{i}_{h}", "matmul", [p, v], rows * head_d, 2.0 * rows * rows * head_d)
            parts.append(b.matmul(f"{tag}proj{i}_{h}", o, Wo[h], rows, head_d, d))
        a = b.reduce(f"{tag}heads{i}", parts, rows, d)
        out.append(b.reduce(f"{tag}residual{i}", [x, a], rows, d))
    return out


def _swiglu(b: _Blocks, X: list[int], hidden: int, rows: int, d: int, ff_d: int, tag: str) -> list[int]:
    """Pre-norm SwiGLU feed-forward (gate, up, silu(gate)*up, down) cut in ``hidden`` blocks of the
    hidden width ``ff_d``; returns the row blocks after the residual add."""
    Wg, Wu = ([b.input(f"{tag}W{w}{j}", d, ff_d) for j in range(hidden)] for w in "gu")
    Wd = [b.input(f"{tag}Wd{j}", ff_d, d) for j in range(hidden)]
    out = []
    for i, x in enumerate(X):
        n = b.elementwise(f"{tag}norm{i}", "rmsnorm", [x], rows, d, 4.0)
        parts = []
        for j in range(hidden):
            g = b.matmul(f"{tag}gate{i}_{j}", n, Wg[j], rows, d, ff_d)
            u = b.matmul(f"{tag}up{i}_{j}", n, Wu[j], rows, d, ff_d)
            s = b.elementwise(f"{tag}silu{i}_{j}", "silu_mul", [g, u], rows, ff_d, 5.0)
            parts.append(b.matmul(f"{tag}down{i}_{j}", s, Wd[j], rows, ff_d, d))
        out.append(b.reduce(f"{tag}residual{i}", [x, b.reduce(f"{tag}sum{i}", parts, rows, d)], rows, d))
    return out


def transformer_block(row_blocks: int = 5, heads: int = 5, rows: int = 2048, d: int = 4096) -> OpGraph:
    """The attention half of a Llama layer: 215 nodes with the defaults."""
    b = _Blocks("doppler-tblock")
    X = [b.input(f"X{i}", rows, d) for i in range(row_blocks)]
    _attention(b, X, heads, rows, d, d // heads, "")
    return b.graph(f"DOPPLER's transformer block: Llama attention on {row_blocks} row blocks x {heads} head groups "
                   "(a dataflow graph, not a training step)")


def transformer_layer(row_blocks: int = 3, heads: int = 6, hidden: int = 6, rows: int = 2048, d: int = 4096,
                      ff: int = 11008, name: str = "doppler-tlayer") -> OpGraph:
    """A whole Llama layer (attention and SwiGLU feed-forward): 261 nodes with the defaults."""
    b = _Blocks(name)
    X = [b.input(f"X{i}", rows, d) for i in range(row_blocks)]
    H = _attention(b, X, heads, rows, d, d // heads, "attn_")
    _swiglu(b, H, hidden, rows, d, ff // hidden, "ffn_")
    return b.graph(f"DOPPLER's transformer layer: Llama attention + SwiGLU on {row_blocks} row blocks, {heads} head "
                   f"groups, {hidden} hidden blocks (a dataflow graph, not a training step)")


DOPPLER_GRAPHS = {
    "doppler-chainmm": chain_mm,
    "doppler-ffnn": ffnn,
    "doppler-tblock": transformer_block,
    "doppler-tlayer": transformer_layer,
    "doppler-tlayer-8gpu": lambda: transformer_layer(4, 8, 7, name="doppler-tlayer-8gpu"),
}
PAPER_NODES = {"doppler-chainmm": 112, "doppler-ffnn": 192, "doppler-tblock": 215, "doppler-tlayer": 261,
               "doppler-tlayer-8gpu": 417}  # the node counts the paper (and its code's 8-GPU graph) state
