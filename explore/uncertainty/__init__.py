"""Uncertainty of the catalog and calibration, propagated by sampling (issue 14).

``evaluate_samples`` (also ``explore.evaluate(..., samples=N, seed=S)``) returns the
metrics with a ``sample`` dimension; ``bands`` gives per-design 5/50/95 % quantiles.
Distributions live in ``hwmodels/uncertainty.toml`` (kind defaults and cited
per-entry overrides); scenario and space files may add an ``[uncertainty]`` table.
"""
from explore.uncertainty.inputs import Input, UncertaintyError, UncertaintyModel
from explore.uncertainty.propagate import Problem, bands, error_bars, evaluate_samples, evaluate_values

__all__ = ["Input", "UncertaintyError", "UncertaintyModel", "Problem", "bands", "error_bars",
           "evaluate_samples", "evaluate_values"]
