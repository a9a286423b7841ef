"""Placeto (Addanki et al., 2019): a graph-embedding policy that improves a placement group by
group, trained with REINFORCE (:mod:`placer.rl`, :mod:`placer.nn.placeto`).

As a method with the common contract it runs in *search mode*: it trains a policy on the one graph
it is given, within the budget (every simulated placement counts, never more than the budget: the
trainer caps its last round at ``ev.remaining()``), and returns the best placement it evaluated.
With ``policy=<checkpoint>`` it starts from a trained policy instead: ``finetune=N`` trains up to N
more episodes on this graph first, then ``place_episodes`` greedy (or sampled) episodes place it.

:class:`PlacetoConfig` is the one place where Placeto's hyperparameters are written (the method,
``placer train`` and the bench's policies all build their trainer from it). Its defaults are the
paper's (section 2, appendix A.6 and A.7) except where stated in the field's comment and here:

* ``lr_start``/``lr_end`` 1e-2 -> 1e-3 (A.7: initial rates between 1e-3 and 1e-4 work best) and
  ``gamma`` 0.9 (the paper's REINFORCE is undiscounted), ``entropy_start``/``entropy_end`` 0.01 ->
  2e-4: at this project's budgets (a few thousand placements, the paper's runs take 3.7-28.8 K) the
  paper's learning rate barely moves the policy within the budget;
* ``stop_window`` 0 (A.7 stops when the reward changes < 2% over 1000 episodes, more episodes than
  a default budget holds): the placement budget stops training;
* ``keep_bias`` 1.1: the policy network adds one learned scalar to the logit of the device a group
  is on now (:mod:`placer.nn.placeto`), initialised so that the untrained policy keeps a group where
  it is with probability 0.75 on two devices. With the paper's network (no such term) the untrained
  policy is near uniform (entropy 0.68 of ln 2 = 0.69 after 2,000 placements), every episode moves
  about half the groups away from the one-device start, each such placement is far worse than the
  start (1.3-1.75 s against 1.10 s on Inception-V3), and at 2,000 placements (about 8 updates of 8
  episodes, an episode simulating every step that moves a group) the policy never learned to do
  better than its start. Measured on the placeto-table1 rows (SimParams.placeto(), 2,000 placements,
  seeds 0 / 1, ms; expert = single GPU on Inception-V3): Inception-V3 k80x2 expert 1,097, keep_bias 0
  1,097 / 1,097, 1.1: 1,009 / 1,010, 1.6: 1,014, 2.2: 1,006, 3.5: 1,026; NMT-2 expert 1,736, keep_bias 0
  1,692 / 1,671, 1.1: 1,729 / 1,674, 1.6: 1,755, 2.2: 1,748; NASNet-large expert 110,877 (memory
  penalised: it does not fit one K80), keep_bias 0: 52,139, 1.1: 51,488, 2.2: 50,979. Starting episodes from
  random placements (``init=random``, the paper's "arbitrary" placement) gave 1,070 (keep_bias 0)
  and 1,012 (2.2) on Inception-V3; a terminal reward (one simulation per episode, 2,000 episodes)
  gave 1,101 after 276 s. Local search at the same 2,000 placements: 888 (Inception-V3).
* schedules (learning rate, entropy) follow the fraction of the placement budget used;
* ``grouping`` "metis:64" with ``mirrors`` (A.6 groups with Merge-and-Colocate): the units are a
  k-way METIS partition into 64 parts (:func:`placer.grouping.metis_groups`, repaired to stay
  acyclic, colocation ties merged) of the ops with every backward op joined to the forward op it
  mirrors, 4-28 units on the graphs below. Measured (seed 0, ms; A = contiguous:64, the earlier
  default: 64 chunks of equal work in the topological order, B = metis:64 without ``mirrors``, C =
  this default; A / B / C):

  - SimParams.placeto(), k80x2, 1,000 placements: cifar10 test #0-#3 288 / 232 / 261, 190 / 179 /
    182, 268 / 245 / 261, 217 / 209 / 191; nmt test #0-#3 824 / 546 / 764, 471 / 345 / 371, 661 /
    476 / 511, 548 / 384 / 395; ptb test #1, #2 1,514 / 1,365 / 1,365, 2,306 / 1,914 / 1,914;
    2,000 placements: Inception-V3 1,009 / 1,001 / 1,012, NMT-2 1,729 / 1,343 / 1,544, NASNet 374 /
    364 / 339;
  - PipeDream profiles, the default simulator, 2,000 placements: VGG-16 k80x2 799 / 1,865 / 799,
    k80x4 799 / 2,212 / 1,123; ResNet-50 k80x2 1,050 / 1,315 / 513, k80x4 1,546 / 1,986 / 555;
    Inception-V3 k80x2 1,059 / 1,203 / 715, k80x4 1,690 / 1,501 / 768; NASNet-A mobile k80x2 587 /
    706 / 534.

  A slice of the topological order cuts through parallel branches (encoder and decoder, a cell's
  branches), so a move of one chunk is rarely a whole branch or stage; METIS units are, and being
  fewer they make shorter episodes (more updates per placement). Without ``mirrors`` a PipeDream
  layer's forward and backward ops (no colocation ties there) fall into different units, and a
  policy that places them apart ships every stored activation across the link. The measurements
  of the other fields above were made with contiguous:64. Finer METIS units do not pay (seeds 0 and
  1, ms, metis:64 / metis:128 / metis:256): Inception-V3 1,012 / 998-1,005 / 1,096, NMT-2 1,544 /
  1,510 / 1,591, NASNet 339-340 / 352-356 / 355-356 (2,000 placements); cifar10 training graphs
  #0, #1 at 1,000: 195-205 / 210-214 / 224-226, 221-222 / 230-236 / 232-240.
* ``sweeps``, ``workers``, ``rounds``: against the defaults (placeto-table1 rows at 2,000
  placements, the first 3 training graphs of each family at 1,000, seeds 0 and 1; geometric mean of
  the step-time ratios) sweeps 2 0.9998x on the rows and 0.992x on the families, workers 4 1.0015x
  and 0.998x, rounds 4 exactly 1x (the group graphs are a few levels deep: more rounds change no
  embedding). Under every setting both seeds end on the same placement of Inception-V3 and NMT-2:
  the 4-28 units, not training, bound the result there.

* ``start="seeds"`` (search mode, ours): before training, the cheap classical heuristics that local
  search starts from and the searched layer split are simulated once each through the evaluator
  (:func:`placer.methods.seeding.seeded_start`, at most a quarter of the budget), the units are cut
  along the best of them (:func:`seeded_task`), and every episode starts from it (the environment's
  ``init="given"``) instead of from one GPU. The paper starts episodes from an arbitrary placement.
  Since the units bound the result (above), starting from the seed mapped onto the uncut units
  changed nothing: seeds 0 and 1, 2,000 placements, SimParams.placeto(), ms, Inception-V3 1,011.7 on
  both, NMT-2 1,543.8 on both, NASNet 341.6 / 336.1 against 339.0 / 340.4. With the units cut along
  it (9 -> 17, 14 -> 18 and 15 -> 27 units): Inception-V3 963.2 / 963.2, NMT-2 1,340.9 / 1,358.9
  (local search at the same budget: 1,385.5), NASNet 327.8 / 332.0; the seeding adds 3-5 s per run.
  Trained policies place from ``init`` as they were trained (``start`` applies to search from
  scratch only), and the generalization table's scratch column uses ``start="init"`` so that its
  three columns compare one MDP.
* ``split_search = 72`` (was 24, as Post's; the reason in :mod:`placer.methods.post`): the layer split
  among the seeds shares its cut search among the piece counts 2..G, so on 4 GPUs 24 simulations left 7
  per piece count and on 8 GPUs 2. Measured (2,000 placements, seeds 0 and 1, ms, 24 -> 72): the
  zoo RNNLM on k80x4 325.3 / 325.3 -> 309.3 / 312.2 (local search 271.6), NASNet-A mobile k80x4
  296.9 / 291.2 -> 289.4 / 288.9, GNMT k80x8 1,055.5 / 1,054.3 -> 1,046.7 / 1,069.0; the real-graphs
  rows with more than two GPUs (default simulator) equal on the PipeDream Inception-V3 k80x4, the
  dnn-partitioning Inception-V3 training and BERT-3 inference inputs, PipeDream ResNet-50 k80x4
  513.0 / 515.1 -> 515.3 / 515.3, NASNet-A mobile k80x4 453.4 / 446.4 -> 454.9 / 446.4,
  dnn-partitioning Inception-V3 inference 2,230.1 / 2,125.1 -> 2,181.8 / 2,305.0 (its seeds spread
  that much anyway: 2,225.2 ± 79.9 ms over seeds 0-2 in the real-graphs table before): 0.997x
  geometric mean over the 18 runs, 6 better, 5 worse.
  The placeto-table1 rows (two GPUs, one piece count with all 24 already) are unchanged.

* ``restart="best"`` (search mode and fine-tuning, ours): after an update that improved the best
  placement found so far, the next round's episodes start there instead of at the start (the paper
  starts every episode from an arbitrary placement); each episode simulates its start again, as it
  does the fixed one, so every episode still costs a placement. An episode then moves units of a
  placement already better than the start, so improvements compound, as in local search, while the
  policy still chooses the moves. Measured (2,000 placements on the placeto-table1 rows, 1,000 on
  the first 4 test graphs of cifar10 and nmt, k80x2, SimParams.placeto(), seeds 0 and 1, ms, start
  -> best): Inception-V3 963.2 / 963.2 -> 968.1 / 963.2, NASNet 327.8 / 332.0 -> 317.6 / 321.7,
  NMT-2 1,340.9 / 1,358.9 -> 1,328.5 / 1,328.5; over those 22 runs geometric mean 0.986x, 13
  better, 3 worse (worst nmt test #1 seed 0, 351.7 -> 365.2). On the real-graphs rows (PipeDream
  profiles and dnn-partitioning inputs, default simulator, 2,000 placements, seeds 0 and 1) 0.997x
  over the 24 PipeDream runs (6 better, 1 worse: Inception-V3 k80x2 seed 1, 704.2 -> 707.4) and
  better or equal on 11 of the 12 dnn-partitioning runs; on all 54 real-graphs runs (seeds 0-2)
  0.994x, 17 better, 1 worse. From the one-GPU start (``start="init"``, the generalization table's
  scratch column; the first 4 test graphs of cifar10 and nmt, 1,000 placements, seeds 0-2) 0.988x,
  6 better, 4 worse (worst cifar10 test #0 seed 0, 261.4 -> 264.9; best nmt test #0 seed 2, 804.6
  -> 695.3). ``placer train`` (a policy for other graphs) keeps the paper's starts.

* ``refine=2``, ``refine_at=0.5`` (search mode and fine-tuning, ours): the first half of the budget trains on the
  units above; the second half on twice as many (``metis:128`` with mirrors) cut along the best
  placement found so far, every episode starting there, the policy's weights carried over (a
  Placeto network reads any grouped graph; fresh optimizer and schedules, each phase a run of its
  own on its share). Finer units from the start converge too slowly (above: metis:128 from the start,
  with ``restart="best"``, on the 22 runs below 0.990x, 13 better, 9 worse: Inception-V3 921 / 921
  but NASNet 337 / 330 and cifar10 test #3 205 / 205 against 191); after the coarse half they refine
  a placement already found. Measured (2,000 placements on the placeto-table1 rows, 1,000 on the
  first 4 test graphs of cifar10 and nmt, k80x2, SimParams.placeto(), seeds 0 and 1, ms, against
  ``refine=1``): Inception-V3 968.1 / 963.2 -> 908.7 / 921.8, NASNet 317.6 / 321.7 -> 316.6 / 314.0,
  NMT-2 1,328.5 / 1,328.5 -> 1,311.1 / 1,302.4 (local search at 2,000: 888.2, 307.2, 1,385.5); over
  the 22 runs 0.976x, 17 better, 2 worse (worst nmt test #0 seed 0, 650.7 -> 675.5, and nmt test #3
  seed 1, 394.0 -> 407.3); ``refine_at=0.3`` 0.974x, 17 better, 4 worse. Four times as many units
  in the second half (``refine=4``, metis:256) against two, on Inception-V3, NASNet-A mobile and
  the first 4 test graphs of cifar10 and nmt (same settings, seeds 0 and 1): 1.018x, 4 better, 13
  worse (Inception-V3 908.7 / 921.8 -> 945.4 / 957.3). Nor a third phase (64 -> 128 -> 256 units,
  each refinement on half of the placements left): on the placeto-table1 rows (seeds 0 and 1) and
  the PipeDream ResNet-50 k80x4, Inception-V3 and NASNet-A mobile rows and the dnn-partitioning
  Inception-V3 training row (seeds 0 and 1, default simulator) 1.000x over 18 runs, 8 better, 5
  worse (NASNet-A mobile k80x4 seed 0 0.953x, k80x2 seed 1 1.033x). Fine-tuning a policy
  refines the same way, its second phase with this config's REINFORCE settings and within the
  ``finetune`` episodes left (a fine-tuning that ends within its first half places with the policy
  as before). Nor the second phase's units without ``mirrors`` (metis:128 over all ops, so a
  forward op and its backward op may part; the first phase as it is), measured on the RNNLM, where
  Placeto stays at its seed (the zoo RNNLM on k80x4: 325.3 ms over its last 1,700 placements, with
  ``keep_bias`` 0.5, ``sweeps`` 2 or ``restart="start"`` as well; 324.9 on metis:128 from the
  start; its seed 325.7; local search 271.6, Post
  279.8; with ``mirrors=False`` in both phases it reaches 290.9). Seed 0, 2,000 placements, against
  this default: the placeto-table1 rows (SimParams.placeto()) Inception-V3 908.7 -> 903.9, NMT-2
  1,311.1 -> 1,306.5, NASNet 316.6 -> 315.8; zoo RNNLM k80x2 / k80x4 539.4 -> 420.6 / 325.3 -> 314.6,
  GNMT k80x8 1,055.5 -> 948.4; but the PipeDream profiles ResNet-50 k80x4 513.0 -> 531.8,
  Inception-V3 k80x2 / k80x4 682.6 -> 691.4 / 670.3 -> 691.4, NASNet-A mobile k80x2 / k80x4 466.1 ->
  507.7 / 453.4 -> 484.4 (their other 6 rows and the 4 dnn-partitioning training inputs equal):
  0.992x over the 22 runs, 6 better and 5 worse, 0.935x on the zoo graphs and 1.023x on the
  PipeDream profiles, where a layer's forward and backward ops parted ship its activations. Nor
  Post's device-count parts (its ``parts_per_device = 2``: both phases' units also cut along a
  k-way METIS partition into 2 D parts): seeds 0 / 1, 2,000 placements, ms, against this default:
  placeto-table1 NMT-2 1,311.1 / 1,302.4 -> 1,467.5 / 1,413.3, Inception-V3 908.7 / 921.8 -> 926.6
  / 918.9, NASNet 316.6 / 314.0 -> 311.9 / 321.5; PipeDream Inception-V3 k80x4 670.3 / 682.3 ->
  720.8 / 720.8, NASNet-A mobile k80x4 454.9 / 446.4 -> 548.8 / 543.5 (ResNet-50 k80x4 515.3 ->
  512.8): more units, each episode visits them all, and the budget buys fewer episodes.

* ``devices="auto"`` (ours): the GPUs, as the paper, unless no classical seed fits in memory
  (``start="seeds"``), then every device: on the dnn-partitioning latency inputs (12 accelerators
  of 2 GiB and 8 CPUs; Inception-V3 inference holds 15.6 GiB of weights) every seed overflows, and
  restricted to the accelerators Placeto ended out of memory on all 6 real-graphs runs (seeds 0-2),
  where local search, Post and even the CPU alone fit. Over every device (with the keep bias
  below), from the seed, it fit on 4 of the 6: Inception-V3 inference 3,060.6 / 3,202.6 ms (seeds 0 / 1; before:
  3,851.0 / 3,909.4, out of memory), BERT-3 inference 838.8 / 714.9 (seeds 1 / 2; 536.8 / 557.4
  out of memory). Local search fits at 1,806-2,124 and 491-498: 2,000 placements are some 50
  episodes over 20 devices, too few for the policy to learn where memory runs out. So the search
  then starts from the whole graph on the host CPU (:func:`host_start`, one simulation) when that
  fits, and moves units onto the accelerators from there: all 6 runs fit, Inception-V3 inference
  2,173.9 / 2,236.4 / 2,299.9 ms (seeds 0-2; Post 2,826.1 / 2,593.1 / 2,964.2), BERT-3 inference
  849.5 / 885.9 / 1,006.4 (from the overflowing seed: out of memory / 838.8 / 714.9; Post 670.9 /
  633.5 / 652.6). The host is not always the better basin: on a generated 120-op training graph
  (graph seeds 5 and 7) with the GPUs of k80x2 cut to 200 MB, 300 placements, Placeto ended at
  115.3 / 96.8 ms from the host against 70.1 / 74.4 from the overflowing seed; with 150 MB GPUs at
  134.3 / 120.0 against 136.5 / 164.7 (all fit). It stays because it makes a placement that fits
  the first thing searched from, where 2 of the 6 real-graphs runs above found none. Trained
  policies keep the devices they were trained on. Since the seeded start relieves the seeds by
  simulation when none fits (:func:`placer.methods.seeding.relieve`, within the seed share), a start
  that was relieved (it may use the CPUs) also searches over every device: BERT-3 inference then
  starts from the relieved METIS seed (495.7 ms) and ends at 495.7 / 495.6 / 494.8 (seeds 0-2; from
  the host, above: 849.5 / 885.9 / 1,006.4; local search 490.9 / 493.5 / 498.4). On Inception-V3
  inference no relieved seed fits within the share and the search goes on from the host as above,
  those placements fewer: 2,230.1 / 2,125.1 / 2,320.5 (before 2,173.9 / 2,236.4 / 2,299.9).
* ``keep_bias`` grows with the candidates: the network's bonus is ``keep_bias + ln(A - 1)`` on A
  candidate devices (:meth:`PlacetoConfig.policy_config`), so that the untrained policy keeps a
  unit where it is with probability 0.75 on any A, as 1.1 does on the paper's two GPUs (a plain
  1.1 keeps it with 0.50 on 4 GPUs, 0.30 on 8 and 0.14 on 20 devices, and an episode then moves
  most units of the placement it starts from). Measured on the real-graphs rows with more than two
  candidates (default simulator, 2,000 placements, seeds 0 and 1, against the plain bonus): the
  12 PipeDream k80x4 runs 0.981x, 6 better, none worse (ResNet-50 541.2 -> 513.0 / 515.1,
  NASNet-A mobile 479.8 -> 453.4 on seed 0, Inception-V3 701.1 / 695.8 -> 670.3 / 682.3); the 8
  dnn-partitioning training runs 0.996x, 2 better (Inception-V3 training 317.2 / 323.8 -> 313.9 /
  315.0), none worse; zoo graphs (ResNet-50, Inception-V3 b32, RNNLM, NASNet-A mobile, BERT-base on
  k80x4, Inception-V3 b32 on k80x8) 0.996x over 12 runs, 8 better, none worse (Inception-V3 b32
  k80x4 414.1 / 412.9 -> 409.2 / 408.9, BERT-base 757.0 / 747.9 -> 750.9 / 744.3). Episodes move
  fewer units, so they simulate fewer placements each and the budget buys more of them: the zoo
  runs took 1.1-1.9x the seconds, the PipeDream k80x4 ones up to 10x (VGG-16: 4 -> 40-49 s). On two
  candidates nothing changes.

What the learning buys over that search: with ``lr_start = lr_end = 0`` the network is never
updated and the same episodes run from the untrained policy (the tables' "frozen policy"
ablation). Measured (2,000 placements, frozen / trained): placeto-table1 (seed 0) Inception-V3
959.9 / 908.7 ms, NMT-2 1,338.7 / 1,311.1, NASNet 321.9 / 316.6; the 54 real-graphs runs (seeds
0-2) 1.008x geometric mean, the frozen policy worse on 16 and better on 6 (the others equal: where
the seed or the units bound the result, as on VGG-16, GNMT, the dnn-partitioning ResNet-50 and,
from its relieved start, BERT-3 inference); most on Inception-V3 inference over 20 devices,
1.064x. So most of what the search reaches comes from its start, its restarts and its finer units;
the policy's learning adds 1.7-5.6% on the placeto-table1 rows, 0.8% on average over the
real-graphs runs and 6.4% on Inception-V3 inference (before the relieved start, 1.5% on average
and 14.6% on BERT-3 inference, where the search then started from the host CPU).
Before the relieved start, at ten times the budget the gap to local search on BERT-3 inference
closed: 20,000 placements, seeds 0 / 1, 496.5 / 490.7 ms (at 2,000: 849.5 / 885.9), local search
490.8 / 490.9, Post 519.0 / 514.1; Placeto took 771 / 1,481 s, local search and Post a few seconds.
The relieved start now gives Placeto 495.7 / 495.6 at 2,000.

Placing with a trained policy (``policy=...``, ``finetune=0``): the greedy episode (``greedy``, one
episode, the method's default) takes each group's most likely device, and for a policy trained on
a family that is the device the group is already on (the keep-bias term above), so the greedy
placement is the one-device start itself, one simulation. Measured on the nmt family (policy trained
on the 16 training graphs, 5,000 / 20,000 placements; the first 4 test graphs, k80x2, placeto
simulator, ms): greedy 929 / 541 / 759 / 617 (= the start), against Placeto from scratch at 1,000
placements 824 / 471 / 661 / 548; the best of 8 sampled episodes of the 20,000-placement policy
834 / 464 / 671 / 541 (59-121 placements). ``placer place`` and the generalization table therefore
place with 8 sampled episodes (``greedy=False, place_episodes=8``); the method's defaults stay the
single greedy episode (the committed tables that use them were made with it).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from placer.methods.base import Evaluator, MethodConfig, register
from placer.methods.seeding import CHEAP_SEEDS, RELIEVED, SEEDS_HELP, Start, seed_names_ok, seeded_start

PAPER = "Addanki et al., Placeto: Learning Generalizable Device Placement Algorithms, NeurIPS 2019"


def _available() -> str | None:
    try:
        import gymnasium  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return f"needs the 'torch' extra ({e.name} is not installed): pip install 'placer[torch]'"
    return None


@dataclass(frozen=True)
class PlacetoConfig(MethodConfig):
    """Placeto's hyperparameters (paper section 2, appendix A.6 and A.7; departures in the module docstring)."""

    placements: int = 2000  # placements simulated in all (Budget.placements overrides; Table 1: 3.7-28.8 K)
    grouping: str = "metis:64"  # op groups (placer.grouping spec; A.6: Merge-and-Colocate; see the module docstring)
    mirrors: bool = True  # metis:K runs on forward ops joined with their backward ops (see the module docstring)
    devices: str = "auto"  # action space: gpus (the paper's), all, or auto: the gpus unless no seed fits in memory (ours)
    sweeps: int = 1  # n: visits of every group per episode (A.7: n = 1 or 2)
    order: str = "topological"  # visiting order: topological or random (a permutation per sweep)
    init: str = "single"  # episode start: single (all on the first candidate), random, given
    start: str = "seeds"  # search mode: episodes start at the best classical seed, units cut along it; "init": as init (ours)
    seeds: str = CHEAP_SEEDS  # the classical heuristics start="seeds" tries, comma-separated (those of local-search)
    split_search: int = 72  # simulations searching the layer split's cuts, one of start="seeds"'s candidates (ours; was 24)
    restart: str = "best"  # search and fine-tuning: episodes start at the best placement so far ("start": always at the start; ours)
    refine: int = 2  # search and fine-tuning: the rest of the budget on units of grouping N*refine cut along the best so far (1: off; ours)
    refine_at: float = 0.5  # ... after this fraction of the placement budget
    reward: str = "intermediate"  # intermediate (r_t = R(p_t) - R(p_t+1), A.4) or terminal (-R(p_T))
    workers: int = 8  # W: episodes per update, gradients summed (A.7: 8 workers)
    episodes: int | None = None  # training episodes at most (None: as many as the placement budget allows)
    rounds: int = 8  # k: message-passing rounds per direction (A.7: k = 4 or 8)
    keep_bias: float = 1.1  # initial logit bonus of a group's current device, learned (paper: none, 0; see the module docstring)
    lr_start: float = 1e-2  # Adam learning rate at the start (A.7: 1e-3 .. 1e-4; see the module docstring)
    lr_end: float = 1e-3  # ... decayed linearly to this (A.7: linear decay); 0 and 0: a frozen policy (ablation)
    gamma: float = 0.9  # discount of the return-to-go (paper: 1, undiscounted)
    entropy_start: float = 0.01  # entropy bonus at the start (A.7: high at first) ...
    entropy_end: float = 2e-4  # ... decayed linearly to this (A.7: low at the end)
    baseline_window: int = 10  # k: episodes in the per-step moving-average baseline (A.7: k = 10)
    stop_window: int = 0  # A.7 stopping rule window in episodes (paper: 1000); 0 = the budget stops training
    backend: str = "serial"  # rollout workers: serial, process or ray (results do not depend on it)
    processes: int | None = None  # worker processes for the process / ray backends
    policy: str | None = None  # checkpoint of a trained policy to start from (None: train from scratch)
    finetune: int = 0  # with a policy: episodes of fine-tuning on this graph before placing
    place_episodes: int = 1  # with a policy: episodes that place the graph, the best wins (`placer place`: 8)
    greedy: bool = True  # with a policy: the most likely device (False: sample, as `placer place`; see above)
    log: str | None = None  # JSON-lines training log, one line per episode

    def checks(self):
        from placer.grouping import GROUPING_HELP, parse_grouping
        from placer.errors import InputError

        try:
            parse_grouping(self.grouping)
            ok_grouping = True
        except InputError:
            ok_grouping = False
        return [(self.placements >= 1, "placements", ">= 1"),
                (ok_grouping, "grouping", f"one of: {GROUPING_HELP}"),
                (self.devices in ("auto", "gpus", "all"), "devices", "auto, gpus or all"),
                (self.sweeps >= 1, "sweeps", ">= 1"),
                (self.order in ("topological", "random"), "order", "topological or random"),
                (self.init in ("single", "random"), "init", "single or random"),
                (self.start in ("seeds", "init"), "start", "seeds or init"),
                (seed_names_ok(self.seeds), "seeds", SEEDS_HELP),
                (self.split_search >= 1, "split_search", ">= 1"),
                (self.restart in ("best", "start"), "restart", "best or start"),
                (self.refine >= 1, "refine", ">= 1"),
                (0 < self.refine_at <= 1, "refine_at", "in (0, 1]"),
                (self.reward in ("intermediate", "terminal"), "reward", "intermediate or terminal"),
                (self.workers >= 1, "workers", ">= 1"),
                (self.episodes is None or self.episodes >= 1, "episodes", ">= 1 or None"),
                (self.rounds >= 1, "rounds", ">= 1"),
                (self.lr_start >= 0 and self.lr_end >= 0, "lr_start", ">= 0 (and lr_end >= 0)"),
                (0 < self.gamma <= 1, "gamma", "in (0, 1]"),
                (self.entropy_start >= 0 and self.entropy_end >= 0, "entropy_start", ">= 0 (and entropy_end >= 0)"),
                (self.baseline_window >= 1, "baseline_window", ">= 1"),
                (self.stop_window >= 0, "stop_window", ">= 0"),
                (self.backend in ("serial", "process", "ray"), "backend", "serial, process or ray"),
                (self.processes is None or self.processes >= 1, "processes", ">= 1 or None"),
                (self.finetune >= 0, "finetune", ">= 0"),
                (self.place_episodes >= 1, "place_episodes", ">= 1")]

    # -- the trainer's pieces, built from this one config
    def env(self):
        from placer.rl.env import EnvConfig

        return EnvConfig(sweeps=self.sweeps, order=self.order, init=self.init, reward=self.reward)

    def policy_config(self, n_actions: int):
        """The network's settings for ``n_actions`` candidates; its keep bias is ``keep_bias`` plus
        ln(n_actions - 1), so that the untrained policy keeps a unit where it is as often on any
        number of candidates as ``keep_bias`` does on two (1.1: 0.75)."""
        from placer.nn.placeto import PolicyConfig

        return PolicyConfig(n_actions=n_actions, rounds=self.rounds,
                            keep_bias=self.keep_bias + math.log(max(n_actions - 1, 1)))

    def reinforce(self, seed: int, episodes: int | None = None):
        """The REINFORCE settings; ``episodes`` overrides the config's (None: effectively unbounded,
        the placement budget stops training)."""
        from placer.rl.reinforce import ReinforceConfig

        n = episodes if episodes is not None else (self.episodes if self.episodes is not None else 10**9)
        return ReinforceConfig(episodes=n, workers=self.workers, lr_start=self.lr_start, lr_end=self.lr_end,
                               entropy_start=self.entropy_start, entropy_end=self.entropy_end,
                               baseline_window=self.baseline_window, gamma=self.gamma,
                               stop_window=self.stop_window, seed=seed)

    def units(self, problem, seed: int = 0):
        """The grouping whose units the policy places: ``grouping``, except that with ``mirrors`` a
        METIS grouping partitions forward ops joined with their backward ops."""
        from placer.grouping import metis_groups, parse_grouping

        spec = parse_grouping(self.grouping)
        if self.mirrors and spec.kind == "metis":
            return metis_groups(problem, spec.n, seed=seed, mirrors=True)
        return self.grouping

    def task(self, problem, seed: int = 0, devices=None):
        """The placement task on this config's units; ``devices``: the candidates (a device
        selection or indices; None: :meth:`candidates` of a start that fits)."""
        from placer.rl.task import make_task

        return make_task(problem, self.units(problem, seed), self.candidates() if devices is None else devices, seed)

    def candidates(self, fits: bool = True) -> str:
        """The action space: ``devices``, with ``"auto"`` the GPUs, or every device when the start
        does not fit in memory (no classical seed did: the GPUs alone may not hold the model)."""
        return self.devices if self.devices != "auto" else ("gpus" if fits else "all")


@register("placeto", "Placeto: graph-embedding policy, progressive placement MDP, REINFORCE (search mode on this graph)",
          "learned", PlacetoConfig, paper=PAPER, available=_available, version=1)
def placeto(problem, seed: int, ev: Evaluator, cfg: PlacetoConfig):
    if cfg.policy is not None:
        return _with_policy(cfg.task(problem, seed), seed, ev, cfg)
    env, initial = cfg.env(), None
    got = seeded_start(problem, ev, cfg.seeds, cfg.split_search) if cfg.start == "seeds" else None
    devices = cfg.candidates(got is None or (got.fits and not got.relieved))  # relieved: it may use the host
    if got is not None and not got.fits and devices == "all":  # no seed fits the GPUs: try the host
        got = host_start(problem, ev) or got
    gp = cfg.task(problem, seed, devices)
    if got is not None:
        gp, initial = seeded_task(gp, got.placement, seed)
        env = replace(env, init="given")
    tr = _trainer(gp, env, initial, cfg, seed, ev, cfg.policy_config(gp.n_actions), cfg.episodes)
    more = _search(tr, env, cfg, seed, ev, cfg.episodes)
    notes = [RELIEVED] if got is not None and got.relieved else []
    return ev.result("placeto", notes=notes + [f"{tr.episode} episodes, {gp.n_groups} units of {cfg.grouping}"] + more)


def host_start(problem, ev: Evaluator):
    """Every op on a CPU (the first that runs them all), simulated once through ``ev``: that
    :class:`placer.methods.seeding.Start` when it fits in memory, else None."""
    from placer.methods.baselines import single_device_placement

    for d in problem.cluster.cpus():
        p = single_device_placement(problem, d)
        if p is not None and (ev.remaining() is None or ev.remaining() > 1):
            got = ev.evaluate_batch(p[None])
            return Start(p, True) if not got.oom[0] else None
    return None


def refined(cfg: PlacetoConfig) -> str | None:
    """The grouping of the second phase (``refine`` times as many parts), or None when there is none."""
    from placer.grouping import parse_grouping

    spec = parse_grouping(cfg.grouping)
    return None if cfg.refine <= 1 or cfg.refine_at >= 1 or spec.n is None else f"{spec.kind}:{spec.n * cfg.refine}"


def _trainer(gp, env, initial, cfg: PlacetoConfig, seed: int, ev: Evaluator, policy, episodes):
    """A search-mode trainer on ``gp`` (network ``policy``, at most ``episodes``, None: no limit)."""
    from placer.rl.reinforce import Trainer

    return Trainer([gp], policy, env, cfg.reinforce(seed, episodes), sim_params=ev.sim_params, backend=cfg.backend,
                   processes=cfg.processes, log_path=cfg.log, initial=initial)


def _train(tr, cfg: PlacetoConfig, ev: Evaluator, placements, seconds) -> None:
    """Train ``tr`` for ``placements`` (episodes restarting as ``cfg.restart`` says), then charge its
    simulations and best placement to ``ev``."""
    try:
        tr.train(max_placements=placements, max_seconds=seconds, on_update=restarts(cfg))
    finally:
        tr.close()
    ev.charge(tr.sim_calls, tr.curve[0], tr.best_op_placement(0), tr.best[0]["objective_us"])


def _search(tr, env, cfg: PlacetoConfig, seed: int, ev: Evaluator, episodes) -> list[str]:
    """Search on the trainer ``tr`` (from scratch, or a fine-tuning one) within the budget and at
    most ``episodes`` in all: with ``refine``, the first ``refine_at`` of the placements on its units,
    then the rest on the units of :func:`refined` cut along the best placement so far, every episode
    starting there, the weights carried over, this config's REINFORCE settings. Returns the notes of
    the second phase (none when there is no budget, time, episode or best placement left for it)."""
    fine, room = refined(cfg), ev.remaining()
    if fine is None or room is None or room < 2:
        _train(tr, cfg, ev, room, ev.seconds)
        return []
    t0 = time.perf_counter()
    _train(tr, cfg, ev, max(1, int(room * cfg.refine_at)), ev.seconds)
    left = None if ev.seconds is None else ev.seconds - (time.perf_counter() - t0)
    more = None if episodes is None else episodes - tr.episode
    if not ev.remaining() or tr.best[0]["placement"] is None or (left is not None and left <= 0) or (
            more is not None and more < 1):
        return []
    task = replace(cfg, grouping=fine).task(tr.graphs[0].problem, seed, tr.graphs[0].devices)  # the same candidates
    gp, initial = seeded_task(task, tr.best_op_placement(0), seed)
    tr2 = _trainer(gp, replace(env, init="given"), initial, cfg, seed, ev, tr.net.cfg, more)
    tr2.net.load_state_dict(tr.net.state_dict())
    _train(tr2, cfg, ev, ev.remaining(), left)
    return [f"then {tr2.episode} episodes, {gp.n_groups} units of {fine}"]


def restarts(cfg: PlacetoConfig):
    """The ``on_update`` hook of :meth:`placer.rl.reinforce.Trainer.train` that makes episodes start
    at the best placement found so far (``restart="best"``; None for ``"start"``): after an update
    that improved it, the environment's start becomes that placement (``init="given"``) and the
    workers are rebuilt with it, so that every episode of the next round starts there."""
    if cfg.restart != "best":
        return None
    seen = [0]  # improvements of the best (entries of the trainer's curve) already restarted from

    def on_update(tr, results):
        if len(tr.curve[0]) == seen[0]:
            return
        seen[0] = len(tr.curve[0])
        tr.initial = [np.asarray(tr.best[0]["placement"], dtype=np.int64)]
        tr.env_cfg = replace(tr.env_cfg, init="given")
        tr.close()  # the next round builds its workers with the new start

    return on_update


def seeded_task(gp, start: np.ndarray, seed: int):
    """``gp`` with its units cut along the op placement ``start``, and the units' start: each unit on
    the candidate device that runs most of its compute in ``start`` (its own device there whenever
    that is a candidate; a unit whose ops all sit on a non-candidate device, e.g. the CPU under
    ``devices="gpus"``, on its first feasible candidate). Returns (task, [initial group placement])."""
    from placer.grouping import Grouping
    from placer.grouping.parts import common_refinement
    from placer.rl.task import make_task

    P = gp.problem
    units = common_refinement(gp.units, Grouping.partition(start, "start").units(P.graph), P.graph)
    task = make_task(P, units, gp.devices, seed)
    work = np.zeros((task.n_groups, task.n_actions))
    for a, d in enumerate(task.devices):
        on = start == d
        np.add.at(work[:, a], task.units.op_group[on], P.fastest_us[on] + 1e-9)
    work[~task.feasible] = -1.0
    return task, [work.argmax(axis=1).astype(np.int64)]


def _with_policy(gp, seed: int, ev: Evaluator, cfg: PlacetoConfig):
    from placer.rl.checkpoint import load_checkpoint
    from placer.rl.policy import env_config, finetune, place
    from placer.rl.reinforce import ReinforceConfig, config_from_dict

    state = load_checkpoint(cfg.policy)
    env = env_config(state)  # place the way the policy was trained
    notes = []
    if cfg.finetune > 0:
        base = config_from_dict(ReinforceConfig, state["rl_config"])
        rl = ReinforceConfig(**{**base.to_dict(), "episodes": cfg.finetune, "workers": cfg.workers, "seed": seed,
                                "stop_window": 0})
        tr = finetune(state, [gp], rl, env=env, sim_params=ev.sim_params, backend=cfg.backend,
                      processes=cfg.processes, log_path=cfg.log)
        more = _search(tr, env, cfg, seed, ev, cfg.finetune)
        state = {**state, "model": tr.net.state_dict()}
        notes += [f"fine-tuned {tr.episode} episodes"] + more
    out = place(state, gp, env=env, greedy=cfg.greedy, episodes=cfg.place_episodes, seed=seed,
                sim_params=ev.sim_params, max_placements=ev.remaining())
    if out is not None:
        ev.charge(out.sim_calls, [(out.sim_calls, out.objective_us)], out.placement, out.objective_us)
        notes.append(f"placed with {'greedy' if cfg.greedy else 'sampled'} policy, {out.episodes} episode(s)")
    return ev.result("placeto", notes=notes)
