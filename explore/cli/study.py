"""``lightpath study NAME [--quick]``: run one of the shipped studies (``studies/``).

Writes ``studies/out/NAME/`` (or ``--out``): the dataset, PNG, SVG, PDF, HTML and
``summary.md``; prints the summary. ``lightpath study --list`` names the studies.
"""
from __future__ import annotations

import argparse

from explore.cli.main import UserError, register


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="study name (see --list)")
    p.add_argument("--list", action="store_true", help="list the studies")
    p.add_argument("--quick", action="store_true", help="small grid (about a minute or less)")
    p.add_argument("--out", help="output directory (default: studies/out/NAME)")
    p.add_argument("--formats", default="png,svg,pdf,html",
                   help="figure formats, comma-separated (png, svg, pdf, html)")


def _run(a) -> int:
    try:
        from studies import STUDIES
        from studies.common import run_from_args
    except ModuleNotFoundError:
        raise UserError("study: the studies package is not importable; run from the lightpath "
                        "source tree (studies/ next to explore/)") from None
    if a.list or not a.name:
        print("\n".join(STUDIES))
        return 0 if a.list else 2
    if a.name not in STUDIES:
        raise UserError(f"study: value {a.name!r} is not allowed; allowed: {', '.join(STUDIES)}")
    try:
        return run_from_args(a.name, a)
    except SystemExit as e:       # bad --formats
        raise UserError(f"study {e}") from None


register("study", "run a shipped study (figures, dataset and summary in studies/out/NAME)",
         _args, _run)
