"""lightpath explore: workload + plan + system -> time, energy and cost per token.

Public API: ``load_scenario``, ``evaluate``, ``search``, ``sweep``, ``open_sweep`` and
``ScenarioError`` (plus the scenario helpers ``resolve``, ``set_field``, ``get_field``
and ``to_json_dict``). The package is laid out as

* ``scenario`` (the contract) and ``evaluate`` (scenario -> ``xarray.Dataset``);
* ``model/``: the training model (workload, plan, system, step, costs, carbon,
  reliability, calibration);
* ``uncertainty/``: distributions of catalog figures and constants, sampled evaluation,
  bands, robust comparison and Sobol sensitivity;
* ``search/``: design spaces and multi-objective search; ``sweep/``: full grids;
* ``cli/``: the ``lightpath`` command; ``validation``: published runs (step time);
  ``validation_energy``: published training energies.
"""
from explore.scenario import ScenarioError, load_scenario, resolve, set_field, get_field
from explore.dataset import to_json_dict
from explore.evaluate import evaluate
from explore.sweep import open_sweep, sweep  # also registers the ``ds.lightpath`` accessor
from explore.search import search

__all__ = ["ScenarioError", "load_scenario", "resolve", "evaluate", "to_json_dict",
           "set_field", "get_field", "search", "sweep", "open_sweep"]
