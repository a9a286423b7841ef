"""The learned placers: each method in one module, on one protocol and one driver.

* :mod:`~placer.methods.learned.protocol`: what a learned method offers beyond search mode (train a
  policy, place with it, fine-tune it, its state in and out) and the registry of those that transfer.
* :mod:`~placer.methods.learned.driver`: the road they share: the config's object fields, run /
  place / fine-tune over each method's search, and the multi-problem training loop (``Training``).
* The methods: Post (``post``, also its ``ce``/``pg``/``ppo`` variants), Placeto, ColocRL (the
  RNN-based placer) and the Hierarchical Planner (both on ``seq2seq_reinforce``), GDP and Mars (both
  on ``graph_ppo``), DOPPLER (with ``doppler_rollout``'s compiled episodes), GiPH. Their networks live
  in :mod:`placer.nn`, their update steps in :mod:`placer.rl`.

Importing this package registers every learned method, in this order.
"""

from placer.methods.learned import post  # noqa: F401
from placer.methods.learned import placeto  # noqa: F401
from placer.methods.learned import colocrl  # noqa: F401
from placer.methods.learned import hierarchical  # noqa: F401
from placer.methods.learned import gdp  # noqa: F401
from placer.methods.learned import mars  # noqa: F401
from placer.methods.learned import doppler  # noqa: F401
from placer.methods.learned import giph  # noqa: F401
