"""Runnable studies: ``python -m studies.NAME [--quick]`` or ``lightpath study NAME``.

Each study module defines ``TITLE``, ``run(quick) -> xarray.Dataset`` (one vectorised
``explore.evaluate`` or ``explore.search`` per job), ``findings(ds) -> dict`` (the numbers
and relations its summary states, computed from the dataset), ``summary(ds, f) -> str``
and ``figures(ds) -> {stem: explore.figures.Figure}``; ``studies.common.main`` writes
``studies/out/NAME/`` (dataset, PNG, SVG, PDF, HTML and summary.md).
"""
STUDIES = ("optical-scale-out", "chiplet-granularity", "reconfigurable-topology",
           "energy-breakdown", "scale-and-reliability", "codesign-frontier")


def module_name(study: str) -> str:
    return "studies." + study.replace("-", "_")
