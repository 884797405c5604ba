"""Wall time of a Sobol sensitivity run on the shipped co-design space (issue 14).

Target: < 2 minutes on a 2-core machine. Also times ``explore.evaluate(samples=N)`` on one
design (samples are more array elements).
Run: python benchmarks/bench_sensitivity.py [--n 256] [--samples 1000]
"""
import argparse
import time

import explore
from explore.uncertainty.sobol import ranking, sobol_indices, study


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--samples", type=int, default=1000)
    a = ap.parse_args()
    t0 = time.perf_counter()
    st = study("studies/spaces/codesign-gpt3-175b.toml")
    ds = sobol_indices(st, a.n)
    dt = time.perf_counter() - t0
    print(f"sensitivity codesign-gpt3-175b: {len(st.names)} inputs, {ds.attrs['evaluations']:,} evaluations, "
          f"{dt:.1f} s ({ds.attrs['evaluations'] / dt:,.0f} evaluations/s incl. tracing and analysis)")
    for m, rows in ranking(ds, 3).items():
        print(f"  {m}: " + ", ".join(f"{n} (ST {s:.2f})" for n, _, s in rows))
    sc = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")
    explore.evaluate(sc, samples=8)
    t0 = time.perf_counter()
    explore.evaluate(sc, samples=a.samples, seed=0)
    dt = time.perf_counter() - t0
    print(f"evaluate(samples={a.samples}) on one design: {dt:.3f} s ({a.samples / dt:,.0f} samples/s)")


if __name__ == "__main__":
    main()
