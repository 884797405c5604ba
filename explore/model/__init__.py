"""The training model: what one optimizer step of a workload costs on a system.

``workload`` (parameters, FLOPs, activation memory of a transformer), ``plan`` (the
parallel plan and its rules), ``system`` (accelerator, scale-up and scale-out network
from the catalog), ``step`` (step time and memory per device), ``costs`` (energy,
capex, cost per token), ``reliability`` (goodput under failures and checkpoints) and
``calibration`` (the named constants fitted on published runs).
"""
