"""Fitted roofline factors (written by ``python -m placer.cost.calibrate --write``; do not edit by hand).

CALIBRATION maps a device spec model to the launch overhead and per-op-class efficiencies fitted
to measured per-op profiles on that device."""

CALIBRATION: dict = {}
