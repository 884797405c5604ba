"""Standard errors of the fitted calibration constants (the "fitted" spreads of hwmodels/uncertainty.toml).

Gauss-Newton covariance at the fitted constants: with residuals
``r_i = log(predicted_i / published_i)`` over the published runs and
``J_ij = d r_i / d log c_j`` (central differences), ``cov(log c) = s^2 (J^T J)^-1``
with ``s^2 = sum r_i^2 / (m - p)`` (e.g. Seber & Wild, Nonlinear Regression, sec. 5.1).
The square roots of the diagonal are relative 1-sigma errors. A constant at a bound of
its fit (``scale_out_link_efficiency`` at 1.0) is left out of the covariance.

Run: ``python -m explore.uncertainty.fit_errors``.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from explore.model import calibration as cal


def relative_standard_errors(calibration: cal.Calibration = cal.DEFAULT, step: float = 0.01) -> dict:
    from explore import validation as v
    cases = v.load_cases()
    targets = np.array([c[3] for c in cases])
    r0 = np.log(v.predict(cases, calibration) / targets)
    names = [f for f in v.FIT_FIELDS if getattr(calibration, f) < 1.0]   # at the bound 1.0: not free
    J = np.empty((len(cases), len(names)))
    for j, f in enumerate(names):
        x = getattr(calibration, f)
        up = np.log(v.predict(cases, replace(calibration, **{f: x * np.exp(step)})) / targets)
        dn = np.log(v.predict(cases, replace(calibration, **{f: x * np.exp(-step)})) / targets)
        J[:, j] = (up - dn) / (2 * step)
    m, p = J.shape
    s2 = float(r0 @ r0) / (m - p)
    cov = s2 * np.linalg.inv(J.T @ J)
    return {f: float(np.sqrt(cov[j, j])) for j, f in enumerate(names)} | {"_s": float(np.sqrt(s2)), "_runs": m}


if __name__ == "__main__":
    for k, val in relative_standard_errors().items():
        print(f"{k:<30} {val:.4f}")
