"""Interruption rates against published failure data (``tests/validation/reliability_runs.csv``).

The component rates of ``explore/data/failures.toml`` are all derived from one run: the
Llama 3 405B snapshot (arXiv:2407.21783 Table 5; the network class through the BOM of
that run's modelled network). Reproducing its 419 interruptions is therefore in-sample.
Every other row of the CSV is out-of-sample: a different operator, GPU generation, network
and period, and nothing here is tuned to it.

Compared quantity: events per device-hour. Published: ``published_events / (exposure_hours
x exposure_devices)``. Model: the sum of ``interruptions_per_hour_<class>`` over the row's
``classes`` for a system of ``model_devices`` accelerators, divided by ``model_devices``:
- ``gpu`` = accelerator + HBM (a report of GPUs dying),
- ``hardware`` = every class but software (machines going down, node failure rates),
- ``all`` = every class (job interruptions of any cause).
``kind`` is ``rate`` (compared), ``upper_bound`` (the published count includes restarts
that are not failures: the model must stay below it) or ``in_sample`` (the anchor).

Assumptions (once for the group, never per row): the model's per-device rates do not
depend on the GPU type (the catalog has no per-part failure rate), so A100 systems get the
H100-derived rates; A100 networks are modelled as a non-blocking fat-tree of HDR-200
InfiniBand (``ib-hdr-200``, Quantum QM8700 switches, pluggable optics on every link) with
one NIC port per GPU (BLOOM's Jean Zay nodes: 4 Omni-Path links per 8 GPUs, 0.5 per GPU;
Omni-Path is not catalogued). The training plan does not enter the rate; a Llama 3 8B data-
parallel plan is used only to make the scenario complete.

Run: ``python -m explore.validation_reliability``.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from explore.model.reliability import CLASSES

REPO = Path(__file__).resolve().parent.parent
CSV_PATH = REPO / "tests" / "validation" / "reliability_runs.csv"
CLASS_SETS = {"all": CLASSES, "hardware": tuple(c for c in CLASSES if c != "software"),
              "gpu": ("accelerator", "hbm")}


def load_rows(path=CSV_PATH) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def scenario(row: dict) -> dict:
    n = int(row["model_devices"])
    return {"name": row["run_id"], "model": {"preset": "llama3-8b"}, "training": {"global_batch": n},
            "parallelism": {"tp": 1, "pp": 1, "dp": n},
            "system": {"accelerator": row["accelerator"], "devices": n, "scale_up": {"size": 8},
                       "scale_out": {"topology": "fat-tree", "link": row["link"], "switch": row["switch"],
                                     "optics": "pluggable", "nics_per_device": float(row["nics_per_device"])}}}


def compare(rows=None) -> list[dict]:
    """Per row: published and predicted events per device-hour, and their ratio."""
    from explore.evaluate import evaluate
    out = []
    for row in rows or load_rows():
        ds = evaluate(scenario(row), keep_invalid=True)
        n = int(row["model_devices"])
        classes = CLASS_SETS[row["classes"]]
        pred = sum(float(ds[f"interruptions_per_hour_{c}"][0]) for c in classes) / n
        pub = float(row["published_events"]) / (float(row["exposure_hours"]) * float(row["exposure_devices"]))
        out.append({"run_id": row["run_id"], "kind": row["kind"], "classes": row["classes"],
                    "published_per_device_hour": pub, "predicted_per_device_hour": pred,
                    "ratio": pred / pub, "published_figure": row["published_figure"]})
    return out


def out_of_sample_stats(results) -> dict:
    """Over the compared out-of-sample rows: geometric-mean ratio (bias), geometric-mean factor
    |log ratio| (typical error), worst factor, and the leave-one-out factors of a single
    all-class multiplier fitted (geometric mean of published/predicted) on the other rows.
    The multiplier is reported, never applied to the model."""
    lr = np.log([r["ratio"] for r in results if r["kind"] == "rate"])
    loo = np.array([lr[i] - lr[np.arange(len(lr)) != i].mean() for i in range(len(lr))])
    return {"n": len(lr), "gm_ratio": float(np.exp(lr.mean())), "gm_factor": float(np.exp(np.abs(lr).mean())),
            "worst_factor": float(np.exp(np.abs(lr).max())), "multiplier": float(np.exp(-lr.mean())),
            "loo_gm_factor": float(np.exp(np.abs(loo).mean())), "loo_worst_factor": float(np.exp(np.abs(loo).max()))}


def report(results=None) -> str:
    res = results or compare()
    lines = [f"{'run':<18} {'kind':<11} {'classes':<8} {'published /GPU-h':>16} {'model /GPU-h':>13} {'model/pub':>9}"]
    for r in res:
        lines.append(f"{r['run_id']:<18} {r['kind']:<11} {r['classes']:<8} {r['published_per_device_hour']:>16.3e} "
                     f"{r['predicted_per_device_hour']:>13.3e} {r['ratio']:>9.2f}")
    s = out_of_sample_stats(res)
    lines.append(f"out-of-sample ({s['n']} rows): model/published geometric mean {s['gm_ratio']:.2f}, typical "
                 f"error x{s['gm_factor']:.2f}, worst x{s['worst_factor']:.2f}")
    lines.append(f"a single multiplier on all classes (not applied): x{s['multiplier']:.2f}; leave-one-out "
                 f"typical error x{s['loo_gm_factor']:.2f}, worst x{s['loo_worst_factor']:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
