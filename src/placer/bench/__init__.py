"""Named experiments and reports built on the methods and the simulator.

* :mod:`placer.bench.experiments`: the specs (``EXPERIMENTS``), each paper's table as rows x methods;
* :func:`placer.bench.results.run_experiment`: run one, cached and resumable, writing ``results/<name>/``;
* :func:`placer.bench.report.write_report`: ``REPRODUCTION.md`` from the committed results;
"""
