"""Fitted roofline factors (written by ``python -m placer.cost.calibrate --write``; do not edit by hand).

CALIBRATION maps a device spec model to the launch overhead and per-op-class efficiencies fitted
to measured per-op profiles on that device."""

CALIBRATION: dict = {'host': {'check_sum_predicted_over_measured': {'bert_base': 0.875,
                                                'inception_v3': 1.114,
                                                'nasnet_mobile': 0.554,
                                                'nmt2': 2.725,
                                                'resnet50': 0.795},
          'efficiency': {'conv': 0.1845,
                         'conv/compute': 0.336,
                         'conv/memory': 0.0377,
                         'elementwise': 1.2186,
                         'elementwise/memory': 1.2186,
                         'matmul': 0.3028,
                         'matmul/compute': 0.3024,
                         'matmul/memory': 0.5078,
                         'movement': 3.773,
                         'movement/memory': 3.773,
                         'reduction': 0.3064,
                         'reduction/memory': 0.3064},
          'launch_us': 3.014,
          'ops': 4959,
          'source': "fitted 2026-11-22 on this machine's CPU (1 torch thread) from per-op profiles of "
                    'reduced zoo models: resnet50(361 ops), inception_v3(2042 ops), nasnet_mobile(2302 ops), '
                    'nmt2(1291 ops), bert_base(302 ops)'}}
