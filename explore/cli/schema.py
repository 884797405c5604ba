"""``lightpath schema``: the scenario schema as JSON Schema, or (``--markdown``) the reference."""
from __future__ import annotations

import argparse
import json

from explore.cli.main import register


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--markdown", action="store_true",
                   help="print the Markdown reference (docs/scenario-reference.md) instead")


def _run(a) -> int:
    from explore.schema import json_schema, markdown
    print(markdown() if a.markdown else json.dumps(json_schema(), indent=2), end="\n")
    return 0


register("schema", "print the scenario JSON Schema (or --markdown: the scenario reference)",
         _args, _run)
