"""Fitted roofline factors (written by ``python -m placer.cost.calibrate --write``; do not edit by hand).

CALIBRATION maps a device spec model to the launch overhead and per-op-class efficiencies fitted
to measured per-op profiles on that device."""

CALIBRATION: dict = {'host': {'check_sum_predicted_over_measured': {'bert_base': 0.979,
                                                'inception_v3': 1.136,
                                                'nasnet_mobile': 0.443,
                                                'nmt2': 1.138,
                                                'resnet50': 0.85},
          'efficiency': {'conv': 0.3449,
                         'conv/compute': 0.5315,
                         'conv/memory': 0.0854,
                         'elementwise': 1.7654,
                         'elementwise/memory': 1.7654,
                         'matmul': 0.7828,
                         'matmul/compute': 0.7842,
                         'matmul/memory': 0.5065,
                         'movement': 2.9786,
                         'movement/memory': 2.9786,
                         'reduction': 0.3642,
                         'reduction/memory': 0.3642},
          'launch_us': 3.786,
          'ops': 4959,
          'source': "fitted 2026-11-22 on this machine's CPU (1 torch thread, thread clock) from per-op "
                    'profiles of reduced zoo models: resnet50(361 ops), inception_v3(2042 ops), '
                    'nasnet_mobile(2302 ops), nmt2(1291 ops), bert_base(302 ops)'}}
