"""The scenario schema (``explore.scenario.SCHEMA``) as JSON Schema and as a Markdown reference.

``json_schema()`` is a JSON Schema (draft 2020-12) of a scenario file: one object
per table, every field with its type, range, default and description, catalog
ids as enums. ``markdown()`` renders the same fields as the reference shipped in
``docs/scenario-reference.md`` (``lightpath schema --markdown``; a test keeps the
file in sync). Both are generated from the schema, never written by hand.
"""
from __future__ import annotations

import json

from explore.scenario import (ACCEL_EXTRA_FIELDS, ACCEL_FIELDS, REQUIRED, SCHEMA, TOP_KEYS, Field)
from hwmodels.parts import part_ids

INLINE_ACCEL_FIELD = Field("float", None, lo=0.0, doc="overrides the base part's value")


def _scalar(f: Field) -> dict:
    if f.kind == "int":
        s: dict = {"type": "integer"}
    elif f.kind == "float":
        s = {"type": "number"}
    elif f.kind == "bool":
        s = {"type": "boolean"}
    elif f.kind == "choice":
        s = {"type": "string", "enum": list(f.choices)}
    else:
        s = {"type": "string", "enum": list(part_ids(f.catalog))}
    if f.lo is not None:
        s["exclusiveMinimum" if f.lo_open else "minimum"] = f.lo
    if f.hi is not None:
        s["exclusiveMaximum" if f.hi_open else "maximum"] = f.hi
    return s


def _field(f: Field) -> dict:
    """A field: a scalar, or a list of them (one value per design)."""
    one = _scalar(f)
    out: dict = {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}
    if f.default is not REQUIRED and f.default is not None:
        out["default"] = f.default
    desc = f.doc or ""
    if f.kind == "id":
        desc = (desc + "; " if desc else "") + f"a {f.catalog} catalog id"
    if f.default is None:
        desc = (desc + "; " if desc else "") + "optional"
    if desc:
        out["description"] = desc
    return out


def _table(fields: dict[str, Field], preset: bool = False) -> dict:
    """One table; with ``preset``, required fields may come from the preset instead."""
    required = [] if preset else [k for k, f in fields.items() if f.default is REQUIRED]
    t = {"type": "object", "additionalProperties": False,
         "properties": {k: _field(f) for k, f in fields.items()}}
    if required:
        t["required"] = required
    return t


def _inline_accelerator() -> dict:
    fields = {"base": Field("id", None, catalog="accelerators", doc="the part to start from")}
    fields.update({k: INLINE_ACCEL_FIELD for k in ACCEL_FIELDS})
    fields.update(ACCEL_EXTRA_FIELDS)
    return _table(fields)


def json_schema() -> dict:
    """JSON Schema of a scenario file (TOML parsed to JSON-like data)."""
    system = _table(SCHEMA["system"])
    system["properties"]["accelerator"] = {
        "description": "a catalog id, or an inline table: `base` plus field overrides "
                       "(any of the parametric-hardware fields makes it parametric)",
        "anyOf": [_field(SCHEMA["system"]["accelerator"]), _inline_accelerator()]}
    system["properties"]["scale_up"] = _table(SCHEMA["system.scale_up"])
    system["properties"]["scale_out"] = _table(SCHEMA["system.scale_out"])
    props = {"name": {"type": "string"}, "description": {"type": "string"}}
    for t in ("model", "training", "parallelism", "datacenter"):
        props[t] = _table(SCHEMA[t], preset=t == "model")
    props["model"]["description"] = "a preset and/or explicit fields (explicit fields win)"
    props["system"] = system
    props["uncertainty"] = {
        "type": "object",
        "description": "distributions of catalog figures, calibration constants or scenario fields "
                       "(keys as in hwmodels/uncertainty.toml, e.g. 'switches.ndr-64.cost_usd' or "
                       "'datacenter.pue'); each value a table: dist (normal, lognormal, uniform, "
                       "triangular, exact), its parameters (rel, abs, low, high, min, max, additive) "
                       "and a source",
        "additionalProperties": {"type": "object"}}
    assert set(props) == set(TOP_KEYS)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "lightpath scenario",
            "description": "Every numeric or choice field may be a list (one value per design; "
                           "lists share one length, scalars broadcast). Units are SI and in the "
                           "field name.",
            "type": "object", "additionalProperties": False, "required": ["system"],
            "properties": props}


def _allowed(f: Field) -> str:
    if f.kind == "id":
        return f"a `{f.catalog}` id (`lightpath catalog`)"
    return f.allowed()


def _default(f: Field, table: str = "") -> str:
    if f.default is REQUIRED:
        return "**required** (or from `preset`)" if table == "model" else "**required**"
    if f.default is None:
        return "derived"
    return f"`{json.dumps(f.default)}`"


def _rows(prefix: str, fields: dict[str, Field]) -> list[str]:
    rows = ["| field | allowed | default | meaning |", "| --- | --- | --- | --- |"]
    for k, f in fields.items():
        doc = f.doc.replace("|", "\\|")
        rows.append(f"| `{prefix}.{k}` | {_allowed(f)} | {_default(f, prefix)} | {doc} |")
    return rows


def markdown() -> str:
    """The scenario reference (docs/scenario-reference.md)."""
    out = ["# Scenario reference", "",
           "Generated from `explore.scenario.SCHEMA` by `lightpath schema --markdown`; do not "
           "edit by hand (`tests/test_docs.py` keeps this file in sync). `lightpath schema` "
           "prints the same schema as JSON Schema.", "",
           "A scenario is a TOML file with the tables below (see `studies/scenarios/`). Every "
           "numeric or choice field may be a list (one value per design; lists share one "
           "length and scalars broadcast). Units are SI and in the field name. "
           "\"derived\" means the default is computed from other fields (the meaning column "
           "says how). Unknown keys are errors that suggest the nearest valid key.", "",
           "Top-level keys: " + ", ".join(f"`{k}`" for k in TOP_KEYS) + ".", ""]
    for t in ("model", "training", "parallelism", "system", "system.scale_up", "system.scale_out",
              "datacenter"):
        out += [f"## [{t}]", ""] + _rows(t, SCHEMA[t]) + [""]
    out += ["## Inline accelerator ([system.accelerator] as a table)", "",
            "`base` (an `accelerators` id) plus any of these fields; without `base`, all of "
            + ", ".join(f"`{k}`" for k in ACCEL_FIELDS)
            + " are required unless a parametric-hardware field is given.", ""]
    out += _rows("system.accelerator", {k: INLINE_ACCEL_FIELD for k in ACCEL_FIELDS})
    out += ["", "Parametric hardware (`hwmodels.package`): any of these makes the accelerator "
            "parametric; fields left out take the value of the reconstruction of `base`.", ""]
    out += _rows("system.accelerator", ACCEL_EXTRA_FIELDS) + [""]
    return "\n".join(out)
