"""The Ray backends on a local Ray runtime (2 CPUs): rollout workers and `placer bench --backend
ray` give the same results as the serial backend. Skipped where ray is not installed (the
``ray`` extra is part of ``all``, so CI runs it)."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

from placer.bench.results import run_experiment  # noqa: E402
from placer.bench.spec import Experiment, Level, Method, Row  # noqa: E402
from placer.cluster import preset  # noqa: E402
from placer.frontends.native import save_graph
from placer.problem import Problem  # noqa: E402
from placer.zoo.synthetic import layered_training_graph  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_rollouts_equal_serial(local_ray):
    import placer.rl  # noqa: F401  (the package first: its modules import each other)
    from placer.nn.placeto import PolicyConfig
    from placer.rl.env import EnvConfig
    from placer.rl.task import make_task
    from placer.rl.workers import RolloutTask, make_backend

    gp = make_task(Problem(layered_training_graph(40, seed=2), preset("k80x2")), "contiguous:6")
    policy, env = PolicyConfig(n_actions=gp.n_actions), EnvConfig(init="random", order="random")
    serial = make_backend("serial", [gp], policy, env)
    from placer.nn.placeto import PlacetoNet

    torch.manual_seed(0)
    weights = {k: v.detach().numpy() for k, v in PlacetoNet(policy).state_dict().items()}
    tasks = [RolloutTask(graph=0, seed=s, entropy_coef=0.01) for s in range(4)]
    a = serial.run(weights, tasks)
    rb = make_backend("ray", [gp], policy, env, processes=2)
    try:
        b = rb.run(weights, tasks)
    finally:
        rb.close()
    assert [r.seed for r in b] == [0, 1, 2, 3]
    for x, y in zip(a, b):
        assert np.array_equal(x.actions, y.actions) and x.final_objective_us == y.final_objective_us
        for gx, gy in zip(x.grads, y.grads):
            assert np.array_equal(gx, gy)


def test_ray_bench_equals_serial(local_ray, tmp_path):
    gpath = tmp_path / "tiny.json"
    save_graph(layered_training_graph(50, seed=3, name="tiny"), gpath)
    exp = Experiment(name="tiny-ray", title="Ray backend test", paper="none", rows=(Row("tiny", str(gpath), "k80x2"),),
                     methods=(Method("single", "single-gpu", seeded=False), Method("random", "random")),
                     budgets={"quick": Level(15, seeds=(0, 1)), "default": Level(15), "paper": Level(15)})
    a = run_experiment(exp, "quick", tmp_path / "serial", jobs=1, plots=False)
    b = run_experiment(exp, "quick", tmp_path / "ray", jobs=2, plots=False, backend="ray")
    assert b.stats["ran"] == a.stats["ran"] == 3 and b.stats["errors"] == 0
    key = lambda o: sorted((c.method.label, c.seed, c.doc["result"]["step_time_us"], str(c.doc["placement"]["devices"]))
                           for c in o.plan.cells if c.doc)
    assert key(a) == key(b)
    # the driver wrote every run file where it asked for them
    assert len(list((tmp_path / "ray" / "tiny-ray" / "runs").glob("*.json"))) == 3
