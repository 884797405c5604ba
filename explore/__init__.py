"""lightpath explore: workload + plan + system -> time, energy and cost per token."""
from explore.scenario import ScenarioError, load_scenario, resolve, set_field, get_field
from explore.evaluate import evaluate, to_json_dict
from explore import accessor  # noqa: F401  registers the ``ds.lightpath`` accessor
from explore.sweep import open_sweep, sweep

__all__ = ["ScenarioError", "load_scenario", "resolve", "evaluate", "to_json_dict",
           "set_field", "get_field", "sweep", "open_sweep"]
