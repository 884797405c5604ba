"""``lightpath catalog``: list parts, or show one with the source of every number."""
from __future__ import annotations

import argparse

from explore.cli.main import UserError, register


def _catalog_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", default="list", choices=("list", "show"))
    p.add_argument("id", nargs="?", help="part id (for show)")


def _catalog_run(a) -> int:
    from hwmodels.parts import load_catalog
    cat = load_catalog()
    if a.action == "list":
        for kind, parts in cat.items():
            print(f"{kind}:")
            for pid, e in sorted(parts.items()):
                print(f"  {pid:<32} {e.get('name', '')}")
        return 0
    if not a.id:
        raise UserError("catalog show: give a part id (see 'lightpath catalog list')")
    hits = [(k, p[a.id]) for k, p in cat.items() if a.id in p]
    if not hits:
        import difflib
        ids = [pid for p in cat.values() for pid in p]
        near = difflib.get_close_matches(a.id, ids, n=1)
        raise UserError(f"catalog: unknown part id {a.id!r}"
                        + (f" (did you mean {near[0]!r}?)" if near else ""))
    for kind, e in hits:
        print(f"{a.id} ({kind}): {e.get('name', '')}")
        src = e.get("source", {})
        for k, v in e.items():
            if k in ("source", "name"):
                continue
            s = src if isinstance(src, str) else src.get(k, "")
            print(f"  {k:<28} {v!s:<14} {s}")
    return 0


register("catalog", "list catalog parts, or show one with its sources", _catalog_args, _catalog_run)
