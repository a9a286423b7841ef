"""Policy networks (torch, the optional ``torch`` extra), one module per method family, none
importing :mod:`placer.methods`: ``placeto`` (with ``features``, ``fast``), ``seq2seq`` (ColocRL,
the Hierarchical Planner, Mars's placer), ``encoder`` (the PyG graph encoder of GDP and Mars, with
``pretrain``), ``gdp``, ``mars``, ``giph`` and ``doppler``."""
