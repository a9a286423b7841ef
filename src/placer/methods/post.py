"""Post (Gao, Chen & Li, NeurIPS 2018): cross-entropy minimisation joined with proximal policy
optimisation over softmax placement distributions, and the paper's three ablations.

The policy is one softmax per placement unit (an op, a colocation group, or a group of a given
grouping) over the devices, ``f(d_m = j | u_m) = exp(u_mj) / sum_i exp(u_mi)`` (Eq. 2), the units
independent (Eq. 3), every ``u`` starting at zero. Devices a unit cannot run on have ``u = -inf``
(probability 0) throughout. Algorithm 1, with the defaults of section 4:

* each iteration samples K = 12 placements and evaluates them in one batch;
* every N = 5 K samples: the closed-form cross-entropy update of Theorem 1 (Eq. 10), each unit's
  distribution set to its device frequencies among the best rho N placements of those N samples,
  then mixed with the uniform distribution, ``(1 - eps) f + eps / D`` with eps decayed linearly from
  0.1 to 0 over the run;
* every other K samples: 10 steps of gradient ascent (learning rate 1) on the PPO surrogate of
  Eq. 11, ``(1/K) sum_n sum_m f_new(d_m^n) / f_old(d_m^n) (b - T(d^n)) - beta sum_m KL(f_old,m || f_new,m)``
  with beta = 1 and b a moving average of step times.

Ablations (section 4, Figure 2): ``ce`` (the cross-entropy update and mixing only), ``ppo`` (the
PPO steps only) and ``pg`` (REINFORCE over the same softmax distributions: one gradient step
``(1/K) sum_n (b - T(d^n)) grad log f(d^n | u)`` per K samples).

Where this differs from the paper, and why:

* Granularity: the units are METIS groups (``grouping="metis:64"``: a k-way METIS coarsening into 64
  groups, repaired to stay acyclic, then every colocation tie merged, which on a training graph leaves
  9-29 units, the forward and backward ops of a part together). Read literally (one softmax per op,
  ``grouping="ops"``), Post never improved on its first batch of uniformly random placements at the
  default budget: 1,000-20,000 independent softmaxes from 60 samples per cross-entropy update. The
  RNN-based method Post compares with also placed op groups (hundreds of them, Mirhoseini et al.
  2017). Measured (seed 0, 600 placements, the post-table1 rows, ms; single / expert / Post per op /
  Post metis:64 / PG metis:64): RNNLM k80x2 747 / 585 / 1,607 / 407 / 440; ResNet-50 k80x2 419 / 419 /
  1,104 / 422 / 426; ResNet-200 k80x2 4,004 / 4,004 / - / 1,476 / 1,476; ResNet-50 k80x4 419 / 419 /
  1,126 / 426 / 438; ResNet-101 k80x8 756 / 756 / - / 782 / 783; Inception-V3 (b32) k80x2 554 / 554 /
  993 / 494 / 539, k80x4 554 / 554 / - / 490 / 540, k80x8 554 / 554 / - / 499 / 536; NMT-2 k80x2
  2,155 / 1,714 / 3,496 / 1,118 / 1,238; NMT-4 k80x4 1,288 / 801 / - / 725 / 738; NMT-8 k80x8 1,920 /
  808 / - / 1,382 / 1,387. metis:16 leaves 1-6 units (NMT-2: 1,522), metis:32 4-12 and metis:128
  25-61 units (ResNet-50 k80x4: 557), merge:32 (Placeto A.6) 29-204 units (NMT-2: 2,097). Where a
  chain (ResNet) is best on one device, the factorised distributions settle on one cut between two
  devices (+0.7% to +3.4% over single GPU; at 2,400 placements +1.2% and +0.9%). Post converges
  early: on the 6 metis:16 units of Inception-V3 k80x2 (64 placements in all) it ends on the best of
  them for seeds 0 and 1 but 1.2-1.5% above it for seeds 2 and 3 (600 placements; the distribution
  is degenerate after a few cross-entropy updates, and smoothing the update, f <- a f* + (1 - a) f
  with a = 0.3-0.7, did not change that).

* Units also split by device-count parts (``parts_per_device = 2``): each metis:64 unit is cut along
  a plain k-way METIS partition of the colocation families into 2 D parts (D devices;
  :func:`placer.grouping.parts.metis_parts`, no acyclic repair, then
  :func:`placer.grouping.parts.common_refinement`), 21-53 units on the post-table1 rows. The repaired
  metis:64 units are too coarse where a graph is long and thin: NMT 8-layer on 8 GPUs keeps 12 units,
  and Post stayed at 0.72 of single GPU, behind the expert's layer-per-GPU split (0.42). Measured
  (seed 0 and 1, 600 placements, Post / single GPU, metis:64 -> metis:64 refined by 2 D parts):
  NMT-2 / 4 / 8 0.509 / 0.552 / 0.720 -> 0.508 / 0.357 / 0.238, Inception-V3 k80x2 / x4 / x8
  0.897 / 0.890 / 0.887 -> 0.889 / 0.874 / 0.886, RNNLM 0.505 -> 0.540, ResNet-50 k80x2 / x4
  0.998 / 0.998 -> 1.025 / 1.001, ResNet-101 k80x8 1.003 -> 1.005, ResNet-200 0.368 -> 0.368
  (geometric mean 0.898x). The 2 D parts alone (no metis:64) gave NMT-8 0.224 but Inception-V3
  0.92-0.98 and RNNLM 0.582. Finer parts do not pay: 3 D and 4 D parts against 2 D, 600
  placements, seeds 0-5 (seeds 2-5 run on a 16-CPU machine), geometric mean of the step-time
  ratios: the 11 post-table1 rows 0.9985x (3 D) and 0.9958x (4 D), the first 3 training graphs of
  cifar10, nmt and ptb on k80x2 and k80x4 1.0022x and 1.0193x (4 D: 41 better, 64 worse of 108).
  Seeds 0 and 1 alone had suggested 0.989x / 0.982x on the rows. Nor does refining the units
  during the run: splitting them along 2x finer METIS parts R times, at equal shares of the budget,
  each part restarting from ``start_mass`` around the best placement found with its own eps decay
  (seed 0, the 11 rows, NMT-8 at 600 only; step time against no refinement): R = 1 1.00-1.06x at 600 placements
  (RNNLM 1.060x, NMT-8 1.056x), 0.971-1.030x at 2,400 (Inception-V3 k80x2 0.971x, NMT-4 1.030x);
  R = 2 and 3 worse (NMT-4 1.20x at 600). Triggered instead when the elites agree on every unit,
  it fired late (seeds 0 and 1, the 10 rows but NMT-8: after 540-2,400 of 2,400 placements, at 600
  on 3 of 20 runs), and at 2,400 moved Inception-V3 k80x2 by 0.975x / 0.992x and the other 17
  runs by 1.000-1.008x. Measured again on the real graphs, where local search's lead on Post grows
  with the budget (at 20,000 placements: 1.055x, results/paper/real-graphs): the second half of
  2,000 placements on grouping metis:(64 R) cut along the best so far and the device parts, from
  ``start_mass`` around it (seeds 0 and 1, the 12 real-graphs rows on 4 GPUs and their own
  clusters; geometric mean of the step-time ratios): R = 2 1.006x (4 better, 6 worse of 24; dp
  Inception-V3 inference 2,927 / 2,829 -> 3,082 / 3,078 ms), R = 4 1.016x, R = 16 1.020x.
* The first sample of the first batch is the start distribution's mode (``start_mode``): every unit
  on the device the start favours, i.e. the whole graph on the fastest device. Where one device is
  best (ResNet), the factorised distribution over 20-50 units rarely draws that exact placement
  (probability 0.5^U), and with the finer units above Post ended 0.5-2.5% above single GPU.
* Initialisation: each unit starts with probability ``start_mass`` (0.5 when this was measured, 0.9
  with the seeded start below) on the device that runs the whole graph fastest (the rest spread
  evenly), not uniform. From the uniform start the factorised
  distributions settle on a placement with one cut between two devices where a chain (ResNet) is
  best kept on one device: the all-on-one placement has probability D (1/D)^U among the first
  samples, and CE's elites then cannot reach it one unit at a time. Measured (600 placements,
  Post / single GPU, mean of seeds 0 and 1, uniform -> start_mass 0.5): ResNet-50 k80x2 1.007 ->
  0.998, ResNet-50 k80x4 1.017 -> 0.998, ResNet-101 k80x8 1.026 -> 1.003, Inception-V3 k80x2 / x4 /
  x8 0.905 / 0.885 / 0.909 -> 0.898 / 0.890 / 0.888, RNNLM 0.535 -> 0.505, NMT-2 / 4 / 8 0.511 /
  0.555 / 0.720 -> 0.509 / 0.552 / 0.720 (geometric mean over the 11 post-table1 rows 0.987x);
  on 18 graphs of the generated families (the first 3 training graphs of cifar10, nmt and ptb on
  k80x2 and k80x4, not used for anything else) 0.991x, 7 better and 8 worse.
* A second start, the layer-wise split (``start="best"``): the forward layers cut into one piece
  per GPU, for every piece count from 2 to the number of GPUs, the cuts moved by a pattern search on
  simulated step time (:func:`placer.methods.layer_split.tune_split`; ``split_search`` simulations
  in all, 3% of the default budget, every one counted; splits, and the split against the single
  device, compare in :func:`placer.sim.memory_first` order: one that fits in memory first). When it
  beats the whole graph on the fastest device (simulated once), each unit starts with ``start_mass`` on the device of the split
  that runs most of its compute instead, and the first sample is that placement of the units.
  Where one device is best (ResNet) the chain is then cut where a cut costs least, which the
  factorised distributions did not find from the single-device start: Post stayed on single GPU
  (ResNet-50 k80x2 418.8 ms, k80x4 416.2, ResNet-101 k80x8 756.2) while the RNN-based placer found
  417.9, 411.0 and 753.1, and the searched split alone gives 414.6, 414.6 and 748.0.
  Measured (600 placements, seeds 0 / 1 / 2 and their mean, ms, ``start="fastest"`` -> ``"best"``):
  RNNLM k80x2 379 / 382 / 413 (392) -> 413 / 402 / 386 (400), NMT-4 k80x4 445 / 453 / 474 (458) ->
  449 / 441 / 440 (443), NMT-8 k80x8 446 / 455 / 444 (448) -> 440 / 455 / 423 (439), Inception-V3
  b32 k80x2 488 / 490 / 520 (500) -> 488 / 490 / 506 (495), ResNet-50 k80x4 416 / 419 / 419 (418) ->
  415 on all three: better on average on 4 of the 5 graphs, 2% worse on RNNLM. Cutting Post's units
  along the split as well (seed 0) gave Inception-V3 k80x4 470 but NMT-4 463 and NMT-8 480, so the
  units are left as they are.
* The default start (``start="seeds"``, ``start_mass = 0.9``) is the best of the classical
  heuristics that local search starts from (``seeds``: single GPU, the expert rule, m-TOPO, METIS,
  HEFT, HEFT and m-ETF with free communication; at most a quarter of the budget, each simulated once,
  in one batch) and of the searched layer split above, in :func:`placer.sim.memory_first` order
  (:func:`placer.methods.seeding.seeded_start`). The units are cut along that placement (as by the 2 D parts), each unit
  starts with 0.9 on its device there, and the first sample is that placement exactly, so Post
  begins where local search does and what it finds beyond is the learning's. With
  ``start="best"`` at 0.5 Post never reached list scheduling's op-level placements, which overlap
  independent branches (attention projections, the weight- and input-gradient matmuls) on
  different GPUs and which no METIS unit expresses: GPT-2 v100x8 at 600 placements, seed 0, single
  GPU 850 ms, Post 822, HEFT 719, local search 673. At 0.5 around the seeded start each sample
  moves half of the 100-600 units and Post stayed on the seed (GPT-2 718 ms, the m-SCT seed then in
  the set); 0.8, 0.9 and 0.95 all improved on it, 0.9 the most on average. Measured (600 placements,
  seeds 0 and 1, mean per graph, ``start="best"`` at 0.5 -> seeded at 0.9, geometric mean): the 11
  post-table1 rows 0.962x (9 better, 2 worse: NMT-2 1.032x, NMT-4 1.010x; RNNLM 0.913x,
  Inception-V3 k80x4 0.857x); the first 3 training graphs of the cifar10, nmt and ptb families on
  k80x2 and k80x4 0.975x (12 better, 5 worse, worst nmt #1 k80x2 1.054x); GPT-2 v100x8 / k80x2,
  BERT-base k80x4 and NASNet-A Mobile k80x2 0.910x (GPT-2 v100x8 670 ms, BERT-base 759 ms
  against 942, GPT-2 k80x2 1.056x). The seeding adds its heuristics' time: 1-2 s on the
  1,500-2,000-op graphs, 10-18 s on NMT-2 / NMT-4 (6,300-11,200 ops). When no seed fits in memory
  the start is only a direction and each unit starts with ``oom_start_mass = 0.5`` on it: at 0.9
  around an overflowing start, on the dnn-partitioning BERT-3 inference input (every seed over its
  0.59 GiB accelerators; 2,000 placements, seeds 0 / 1 / 2) Post found no placement that fits for
  seed 2 (611 / 631 / 263 ms out of memory); at 0.5 all three fit (671 / 634 / 653 ms; the earlier
  start at 0.5: 600 / 670 / 621).
  Starting instead from the whole graph on the host CPU when no seed fits (as Placeto does, which
  places on the GPUs only otherwise) was measured and not adopted: on the dnn-partitioning
  latency inputs (2,000 placements, seeds 0-2) Inception-V3 inference 2,826.1 / 2,593.1 / 2,964.2
  -> 2,222.1 / 2,254.9 / 2,305.4 ms and BERT-3 inference 670.9 / 633.5 / 652.6 -> 601.7 / 656.1 /
  609.4, but on a generated 120-op training graph with the GPUs of k80x2 cut to 200 MB (seed 0)
  413.4 against 135.6 ms at 12 placements and 373.4 against 114.8 at 60: around the overflowing
  seed at 0.5 Post reaches a placement that fits on the GPUs, around the host at 0.9 it stays on
  the slow CPU. A seed relieved by simulation instead (:func:`placer.methods.seeding.relieve`,
  within the seed share) fits and is a start like any other (``start_mass``): BERT-3 inference
  670.9 / 633.5 / 652.6 -> 495.7 ms on all three seeds (the relieved METIS seed; Post does not
  improve on it; local search 490.9 / 493.5 / 498.4). Where no relieved seed fits within the share
  (Inception-V3 inference), Post goes on around the seed overflowing least at ``oom_start_mass``:
  2,826.1 / 2,593.1 / 2,964.2 -> 2,746.3 / 2,884.6 / 2,852.3 (those placements fewer).
* ``split_search = 72`` (was 24): the layer split's cut search above shares its simulations among
  the piece counts 2..G, so at 24 a 4-GPU split had 7 per piece count and an 8-GPU one 2, too few to
  move the cuts off equal compute; the ``layer-split`` seed of local search spends 24 per piece
  count. The searched split alone, 24 -> 72 (-> 192), ms: RNNLM k80x4 325.7 -> 323.3 (322.9),
  NMT-4 702.3 -> 689.0, Inception-V3 k80x4 1,053.1 -> 1,021.8, GNMT k80x8 1,462.6 -> 1,448.9
  (1,419.1), the PipeDream ResNet-50 / NASNet-A mobile profiles on k80x4 541.2 / 583.8 -> 515.3 /
  561.4; the 2-GPU rows unchanged. Post, 24 -> 72 (seeds 0 and 1, step-time ratios): the 11
  post-table1 rows (600 placements) and 6 real-graphs rows (the PipeDream ResNet-50, Inception-V3
  and NASNet-A mobile profiles on k80x4, the dnn-partitioning BERT-3, ResNet-50 and Inception-V3
  training inputs; 2,000) 0.994x geometric mean over 34 runs, 10 better, 6 worse (PipeDream
  ResNet-50 k80x4 541.2 -> 515.3 on both seeds, NASNet-A mobile k80x4 0.942x on seed 0; worst NMT-4
  seed 0 460.9 -> 466.3, dnn-partitioning Inception-V3 training seed 0 1.013x, the other 4 under
  0.3%); the 8 zoo / cluster pairs of benchmarks/holdout.py (2,000) 0.981x over 16 runs, 7 better,
  1 worse (RNNLM k80x4 279.8 / 279.2 -> 243.5 / 256.8, below local search's 271.6; GNMT k80x8
  780.4 / 788.2 -> 746.9 / 768.9; worst BERT-large k80x8 seed 0 1.012x). At 600 placements the
  split is still tried (it needs 4x its simulations left, 288). The other methods that search this
  split: Placeto measured and moved to 72 as well; the Hierarchical Planner, Mars and GDP keep 24.
* The uniform-mixing weight decays linearly from the paper's 0.1 to 0 over the run; the paper keeps
  eps constant ("e.g., 0.1", section 3.3). Once the cross-entropy updates have made the distribution
  degenerate, a constant 0.1 keeps sampling about one unit in ten away from the mode, a local search
  around it. Measured (seeds 0 and 1, mean per graph, constant 0.1 / decayed, geometric mean): the
  11 post-table1 rows 1.011x at 600 placements (2 better, 5 worse) and 0.998x at 2,400 (3 better,
  3 worse; RNNLM 0.917x, NMT-4 1.058x); the first 3 training graphs of the cifar10, nmt and ptb
  families on k80x2 and k80x4 1.021x at 600 (4 better, 13 worse) and 1.006x at 2,400 (6 better,
  9 worse). So the decay stays. With the seeded start, a smaller start (600 placements, seeds 0 and
  1, against 0.1): eps_start 0.05 gave 1.001x on the rows, 1.013x on the 18 family graphs and 0.996x
  on GPT-2 / BERT-base / NASNet; 0.03 gave 1.004x, 1.003x and 1.006x. So 0.1 stays.
* The reward ``b - T`` is divided by ``b``, so that ``lr = 1`` means the same on a graph whose step
  takes 1 ms as on one that takes 1 s (the paper's times are seconds, with ``b`` around 1 s).
* ``T`` is the Evaluator's memory-penalised objective (so out-of-memory placements still rank among
  themselves by how far they overflow) plus ``oom_penalty_us`` (the paper's 100 s) when a device runs
  out of memory. The penalty shapes the learning signal only: the result and the Evaluator's
  best-so-far curve use the Evaluator's objective like every other method.

Finer units around the seeded start do not pay either (600 placements, seed 0, ms, default /
merge:256, the RNN-based method's groups, at start_mass 0.9 / 0.97 / metis:128 at 0.95): RNNLM 371.1
/ 459.0 / 444.3 / 424.9, Inception-V3 k80x4 415.8 / 427.7 / 426.5 / 419.0, NMT-4 460.9 / 528.8 /
524.5 / 454.9; ResNet-50 k80x4 stays at the searched split (414.6) with every one of them, where
the RNN-based policy gradient finds 411.0 on seeds 0, 1 and 2 alike.

What the updates buy over the seeded start: ``ppo`` with ``ppo_steps=0`` samples the start
distribution for the whole budget and never updates it (post-table1's "No updates" column).
Measured (600 placements, seed 0, ms, Post / no updates): RNNLM 371.1 / 447.9, NMT-2 / 4 / 8
1,143.4 / 1,287.4, 460.9 / 525.3, 430.1 / 484.8, Inception-V3 k80x2 / x4 / x8 447.8 / 477.3,
415.8 / 425.7, 435.2 / 448.4, the ResNet rows within 0.1%: 1.063x geometric mean over the 11 rows.

Handing the end of the budget to local search (``local-search`` from Post's best placement, its op-level
moves on the critical path, which no unit distribution expresses) was measured and not adopted. Post
with (1 - s) of the placements, then local search with s, the better of the two, against Post with
all of them (seed 0, step time ratio): on the generated cifar10 and nmt training graphs #1 and #2 on
k80x2 and k80x4 (600 placements) s = 0.25 gave 0.996x geometric mean (cifar10 0.956-0.980x, nmt
0.981-1.094x: Post still improves in its last quarter there, and local search from its best does not
make up for it) and s = 0.15 1.003x; on the PipeDream NASNet-A Mobile and Inception-V3 profiles
(2,000 placements), where local search alone is 5-18% ahead of Post, s = 0.25 gave 0.897-0.989x and
s = 0.5 0.864-0.989x, still behind local search alone (NASNet k80x4: Post 501.8 ms, s = 0.5 434.1,
local search 410.4): the gap there is the units' granularity, and half the budget spent from Post's
best does not close it.

Nor was memoising the samples: up to 46% of Post's placements repeat one it simulated before
(ResNet-50 k80x2 at 600 placements; Inception-V3 k80x2 20%, the generated ptb and cifar10 graphs on
k80x2 25-28%, NMT under 1%), nearly all after the distribution has converged. Simulating each
distinct placement once and reusing its time for a repeat (600 distinct placements, stopping after 50
iterations that drew nothing new) changed the step time on 14 graphs (the post-table1 rows ResNet-50,
Inception-V3 on k80x2 and k80x4, RNNLM; the cifar10, nmt #1-#2 and ptb #0 training graphs; seed 0)
by -2.9% to +0.8%, 7 of them not at all (geometric mean 0.997x), while drawing up to 8x as many
samples as the budget's placements, which no longer compares with the paper's sample counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.errors import InputError
from placer.grouping import Grouping, make_grouping
from placer.grouping.parts import common_refinement, metis_parts
from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.layer_split import fastest_device, split_start
from placer.methods.seeding import CHEAP_SEEDS, RELIEVED, SEEDS_HELP, seed_names_ok, seeded_start
from placer.sim import memory_first

PAPER = "Gao, Chen, Li. Post: Device Placement with Cross-Entropy Minimization and Proximal Policy Optimization. NeurIPS 2018"
VARIANTS = ("post", "ce", "ppo", "pg")


@dataclass(frozen=True)
class PostConfig(MethodConfig):
    """Hyperparameters of Algorithm 1 with the paper's defaults (section 4)."""

    placements: int = 2400  # L: placements sampled in all (Budget.placements overrides)
    placements_per_iter: int = 12  # K: placements per iteration (12 workers), one batch evaluation
    ce_every: int = 5  # N = ce_every * K: a cross-entropy update every 5 iterations (N = 60)
    rho: float = 0.1  # elite fraction: the best rho*N placements define Eq. 10's target (6 of 60)
    ppo_steps: int = 10  # stochastic gradient ascent steps on Eq. 11 per K samples
    lr: float = 1.0  # SGA learning rate (PPO steps and the PG step)
    kl_beta: float = 1.0  # beta: KL penalty coefficient of Eq. 11
    baseline_decay: float = 0.9  # b <- decay * b + (1 - decay) * mean T per iteration (rate unstated in the paper)
    eps_start: float = 0.1  # uniform-mixing weight after each CE update at the start of the run ...
    eps_end: float = 0.0  # ... decayed linearly to this at the end (of placements or seconds; paper: constant, see the module docstring)
    advantage: str = "relative"  # "relative": (b - T) / b; "seconds": b - T in seconds, the paper's units
    oom_penalty_us: float = 1e8  # step time added to an out-of-memory placement's T (paper: 100 s)
    start_mass: float = 0.9  # initial probability of each unit on the device its start favours (paper: uniform; see the module docstring)
    oom_start_mass: float = 0.5  # start_mass instead when the seeded start overflows a device's memory (ours)
    grouping: str = "metis:64"  # placement units, a placer.grouping spec (paper: one softmax per op; see the module docstring)
    parts_per_device: int = 2  # units also split along a METIS partition into this many parts per device (ours; 0 = off)
    start_mode: bool = True  # the first batch's first sample is the start distribution's most likely placement (ours)
    start: str = "seeds"  # the start each unit favours: "fastest" (one device), the "best" of it and the layer split, or "seeds" (ours)
    seeds: str = CHEAP_SEEDS  # the classical heuristics start="seeds" also tries, comma-separated (those of local-search)
    split_search: int = 72  # simulations searching the layer split's cuts over all piece counts (ours; see the module docstring)

    @classmethod
    def method_name(cls) -> str:
        return "post"

    def checks(self):
        from placer.grouping import GROUPING_HELP, parse_grouping

        try:
            parse_grouping(self.grouping)
            ok_grouping = True
        except InputError:
            ok_grouping = False
        return [(self.placements >= 1, "placements", ">= 1"),
                (self.placements_per_iter >= 1, "placements_per_iter", ">= 1"),
                (self.ce_every >= 1, "ce_every", ">= 1"), (0 < self.rho <= 1, "rho", "in (0, 1]"),
                (self.ppo_steps >= 0, "ppo_steps", ">= 0"), (self.lr >= 0, "lr", ">= 0"),
                (self.kl_beta >= 0, "kl_beta", ">= 0"),
                (0 <= self.baseline_decay < 1, "baseline_decay", "in [0, 1)"),
                (0 <= self.eps_start <= 1, "eps_start", "in [0, 1]"), (0 <= self.eps_end <= 1, "eps_end", "in [0, 1]"),
                (self.advantage in ("relative", "seconds"), "advantage", "'relative' or 'seconds'"),
                (self.oom_penalty_us >= 0, "oom_penalty_us", ">= 0"),
                (0 <= self.start_mass < 1, "start_mass", "in [0, 1)"),
                (0 <= self.oom_start_mass < 1, "oom_start_mass", "in [0, 1)"),
                (self.parts_per_device >= 0, "parts_per_device", ">= 0"),
                (self.start in ("fastest", "best", "seeds"), "start", "'fastest', 'best' or 'seeds'"),
                (seed_names_ok(self.seeds), "seeds", SEEDS_HELP),
                (self.split_search >= 1, "split_search", ">= 1"),
                (ok_grouping, "grouping", f"one of: {GROUPING_HELP}")]


# ---------------------------------------------------------------------- placement units (Eq. 3)
def placement_units(problem, grouping: Grouping | str = "ops", seed: int = 0) -> Grouping:
    """The units Post keeps one softmax for: the units (:meth:`placer.grouping.Grouping.units`:
    groups tied by colocation merged, the graph's colocation groups merged) of ``grouping``, a
    :class:`placer.grouping.Grouping` or a spec of :func:`placer.grouping.parse_grouping`."""
    return make_grouping(problem, grouping, seed).units(problem.graph)


def unit_feasible(problem, units: Grouping) -> np.ndarray:
    """(G, D) bool: devices every op of a unit can run on (finite cost)."""
    ok = np.isfinite(units.compute_us(problem))
    if not ok.any(axis=1).all():
        g = int(np.flatnonzero(~ok.any(axis=1))[0])
        op = problem.graph.op_names[int(units.first[g])]
        raise InputError("grouping", f"group of '{op}'", "its ops share no device they can all run on",
                         "use a grouping that keeps ops with disjoint devices apart")
    return ok


# ---------------------------------------------------------------------- softmax distributions (Eq. 2)
def initial_logits(feasible: np.ndarray, favour=None, mass: float = 0.0) -> np.ndarray:
    """u = 0 on feasible devices (the uniform distribution), -inf elsewhere (Algorithm 1, line 1);
    with ``favour`` = d (one device, or one per unit) and ``mass`` = a > 0, every unit that can run
    on its d starts with probability a on d and the rest spread evenly over its other feasible
    devices (see the module docstring)."""
    u = np.where(feasible, 0.0, -np.inf)
    if favour is None or mass <= 0:
        return u
    fav = np.broadcast_to(np.asarray(favour, dtype=np.int64), (len(feasible),))
    others = feasible.sum(axis=1) - 1
    rows = feasible[np.arange(len(feasible)), fav] & (others > 0)
    p = np.where(feasible[rows], (1.0 - mass) / others[rows, None], 0.0)
    p[np.arange(int(rows.sum())), fav[rows]] = mass
    u[rows] = logits_of(p)
    return u


def softmax(u: np.ndarray) -> np.ndarray:
    """Row-wise Eq. 2; entries at -inf get probability exactly 0."""
    z = np.exp(u - u.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def logits_of(probs: np.ndarray) -> np.ndarray:
    """Softmax parameters whose Eq. 2 probabilities are ``probs`` (log p, -inf where p = 0)."""
    with np.errstate(divide="ignore"):
        return np.log(probs)


def sample_units(probs: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(k, G) devices, each unit drawn independently from its row of ``probs`` (Eq. 3)."""
    cdf = np.cumsum(probs, axis=1)
    r = rng.random((k, probs.shape[0])) * cdf[:, -1]
    return (r[:, :, None] >= cdf[None, :, :]).sum(axis=2).astype(np.int64)


# ---------------------------------------------------------------------- cross-entropy (Eq. 9-10)
def ce_update(elite: np.ndarray, n_devices: int) -> np.ndarray:
    """Theorem 1: the minimiser of Eq. 9 over softmax distributions sets f(d_m = j) to the
    frequency of device j for unit m among the P elite placements ``elite`` (P, G)."""
    P, G = elite.shape
    counts = np.zeros((G, n_devices))
    np.add.at(counts, (np.broadcast_to(np.arange(G), (P, G)), elite), 1.0)
    return counts / P


def mix_uniform(probs: np.ndarray, feasible: np.ndarray, eps: float) -> np.ndarray:
    """Algorithm 1, line 11: (1 - eps) f + eps * uniform over the unit's feasible devices (so every
    feasible probability is at least eps / D)."""
    uni = feasible / feasible.sum(axis=1, keepdims=True)
    return (1.0 - eps) * probs + eps * uni


def elite_indices(times: np.ndarray, rho: float) -> np.ndarray:
    """The best ceil(rho N) samples (ties by sampling order): gamma_t is the rho-quantile (Eq. 9)."""
    P = max(1, int(np.ceil(rho * len(times) - 1e-9)))
    return np.argsort(times, kind="stable")[:P]


# ---------------------------------------------------------------------- PPO (Eq. 11) and PG
def advantage_table(samples: np.ndarray, adv: np.ndarray, n_devices: int) -> np.ndarray:
    """S (G, D): S_mj = (1/K) sum over samples n with d_m^n = j of adv_n. Eq. 11 separates over units:
    its first term is sum_mj f_new(j) / f_old(j) S_mj."""
    K, G = samples.shape
    S = np.zeros((G, n_devices))
    np.add.at(S, (np.broadcast_to(np.arange(G), (K, G)), samples), np.broadcast_to(adv[:, None], (K, G)))
    return S / K


def ppo_surrogate(u: np.ndarray, q: np.ndarray, S: np.ndarray, beta: float) -> float:
    """Eq. 11 at parameters u, old probabilities q: sum_mj f/q S - beta sum_m KL(q_m || f_m)."""
    f = softmax(u)
    alive = q > 0
    ratio = np.divide(f, q, out=np.zeros_like(f), where=alive)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(alive, q * (np.log(np.where(alive, q, 1.0)) - np.log(np.where(alive, f, 1.0))), 0.0)
    return float((ratio * S).sum() - beta * kl.sum())


def ppo_gradient(u: np.ndarray, q: np.ndarray, S: np.ndarray, beta: float) -> np.ndarray:
    """d Eq. 11 / du in closed form: with c = (f/q) S, d/du_mj = c_mj - f_mj sum_i c_mi + beta (q_mj - f_mj)
    (d f_k / d u_j = f_k (1[j = k] - f_j); d KL(q || f) / d u_j = f_j - q_j)."""
    f = softmax(u)
    c = np.divide(f, q, out=np.zeros_like(f), where=q > 0) * S
    return c - f * c.sum(axis=1, keepdims=True) + beta * (q - f)


def ppo_update(u: np.ndarray, S: np.ndarray, steps: int, lr: float, beta: float) -> np.ndarray:
    """``steps`` steps of gradient ascent on Eq. 11 from u (the old parameters)."""
    q = softmax(u)
    new = u.copy()
    for _ in range(steps):
        new = new + lr * ppo_gradient(new, q, S, beta)
    return new


def pg_update(u: np.ndarray, S: np.ndarray, lr: float) -> np.ndarray:
    """REINFORCE: u + lr (1/K) sum_n adv_n grad log f(d^n | u); per unit grad log f(j) = onehot(j) - f."""
    f = softmax(u)
    return u + lr * (S - f * S.sum(axis=1, keepdims=True))


# ---------------------------------------------------------------------- Algorithm 1
def run_post(problem, seed: int, ev: Evaluator, cfg: PostConfig, variant: str = "post",
             grouping: Grouping | None = None):
    """Algorithm 1 (``variant="post"``) or one of its ablations ``ce``, ``ppo``, ``pg``. The units
    are those of ``cfg.grouping``, or of ``grouping`` when given (a Grouping built by the caller)."""
    if variant not in VARIANTS:
        raise InputError("--method", f"variant '{variant}'", "is not a Post variant", f"use one of {VARIANTS}")
    rng = np.random.default_rng(seed)
    units = placement_units(problem, grouping if grouping is not None else cfg.grouping, seed)
    if cfg.parts_per_device:
        units = common_refinement(units, metis_parts(problem, cfg.parts_per_device * problem.n_devices, seed),
                                  problem.graph)
    favour = fastest_device(problem)
    room = ev.remaining()
    mass, relieved = cfg.start_mass, False
    if cfg.start == "seeds" and cfg.start_mass > 0:
        got = seeded_start(problem, ev, cfg.seeds, cfg.split_search)
        if got is not None:  # units cut along the start, so that its exact placement is one of the units'
            best, fits, relieved = got
            units = common_refinement(units, Grouping.partition(best, "start").units(problem.graph), problem.graph)
            favour = np.zeros(units.n_groups, dtype=np.int64)
            favour[units.op_group] = best
            mass = mass if fits else cfg.oom_start_mass
    elif cfg.start == "best" and cfg.start_mass > 0 and not ev.custom and (room is None or room >= 4 * cfg.split_search):
        split = split_start(problem, ev, cfg.split_search)
        if split is not None:
            single = memory_first(np.inf, False)
            if favour is not None:
                r = ev.simulate(np.full(problem.n_ops, favour, dtype=np.int64))
                single = memory_first(r.objective_us, not r.oom)
            if memory_first(split[1], split[2]) < single:  # each unit favours the device of the split that runs most of its compute
                work = np.zeros((units.n_groups, problem.n_devices))
                np.add.at(work, (units.op_group, split[0]), problem.fastest_us + 1e-9)
                favour = np.argmax(work, axis=1)
    feasible = unit_feasible(problem, units)
    D = problem.n_devices
    u = initial_logits(feasible, favour, mass)
    K = cfg.placements_per_iter
    b = None
    window_units, window_t = [], []  # the samples since the last CE update
    it = 0
    curves = {"placements": [], "mean_us": [], "median_us": [], "best_us": [], "best_so_far_us": [], "oom": [],
              "update": [], "eps": []}
    while not ev.out_of_budget():
        room = ev.remaining()
        k = K if room is None else min(K, room)
        samples = sample_units(softmax(u), k, rng)
        if it == 0 and cfg.start_mode and mass > 0:
            samples[0] = np.argmax(u, axis=1)  # the start's mode: every unit on its favoured device
        batch = ev.evaluate_batch(samples[:, units.op_group])
        times = batch.objective_us + cfg.oom_penalty_us * batch.oom
        it += 1
        if b is None:
            b = float(times.mean())
        adv = (b - times) / (max(b, 1e-9) if cfg.advantage == "relative" else 1e6)  # b - T in units of b or s
        eps = cfg.eps_start + (cfg.eps_end - cfg.eps_start) * ev.fraction_used()
        window_units.append(samples)
        window_t.append(times)
        if variant in ("post", "ce") and it % cfg.ce_every == 0:
            pool, pool_t = np.concatenate(window_units), np.concatenate(window_t)
            elite = pool[elite_indices(pool_t, cfg.rho)]
            u = logits_of(mix_uniform(ce_update(elite, D), feasible, eps))
            window_units, window_t = [], []
            update = "ce"
        elif variant in ("post", "ppo"):
            u = ppo_update(u, advantage_table(samples, adv, D), cfg.ppo_steps, cfg.lr, cfg.kl_beta)
            update = "ppo"
        elif variant == "pg":
            u = pg_update(u, advantage_table(samples, adv, D), cfg.lr)
            update = "pg"
        else:
            update = "none"
        if variant in ("ppo", "pg"):
            window_units, window_t = [], []
        b = cfg.baseline_decay * b + (1.0 - cfg.baseline_decay) * float(times.mean())
        curves["placements"].append(ev.placements)
        curves["mean_us"].append(float(times.mean()))
        curves["median_us"].append(float(np.median(times)))
        curves["best_us"].append(float(times.min()))
        curves["best_so_far_us"].append(float(ev.best_objective_us))
        curves["oom"].append(int(batch.oom.sum()))
        curves["update"].append(update)
        curves["eps"].append(float(eps))
    how = cfg.grouping if grouping is None else grouping.method
    res = ev.result(variant, params={"variant": variant, "grouping": how, "units": int(units.n_groups)}, seed=seed,
                    notes=[RELIEVED] if relieved else [])
    res.cost.extra["iterations"] = curves
    res.cost.extra["final_probs_max_mean"] = float(softmax(u).max(axis=1).mean())
    return res


def _method(variant: str):
    def run(problem, seed: int, ev: Evaluator, cfg: PostConfig):
        return run_post(problem, seed, ev, cfg, variant=variant)

    run.__name__ = f"run_{variant}"
    run.__doc__ = f"Post's Algorithm 1 as variant '{variant}' (see :func:`run_post`)."
    return run


register("post", "Post: cross-entropy updates (Eq. 10) joined with PPO (Eq. 11) over softmax placement "
         "distributions", "learned", PostConfig, PAPER, version=1)(_method("post"))
register("ce", "Post's ablation: cross-entropy minimisation (Eq. 10) + uniform mixing only", "learned", PostConfig, PAPER, version=1)(_method("ce"))
register("ppo", "Post's ablation: PPO (Eq. 11) over softmax placement distributions only", "learned", PostConfig,
         PAPER, version=1)(_method("ppo"))
register("pg", "Post's ablation: REINFORCE policy gradient over softmax placement distributions", "learned",
         PostConfig, PAPER, version=1)(_method("pg"))
