"""The ``lightpath`` command line.

Every user error (bad file, bad field, unknown id) exits with status 2 and one
readable line naming the file, the field, the value and what is allowed; never
a traceback. Subcommands live in their own modules (``evaluate``, ``catalog``, ``search``,
``sweep``, ``sensitivity``) and register in ``COMMANDS`` on import.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

import numpy as np



class UserError(Exception):
    """An error to report as one line and exit status 2."""


# ----------------------------------------------------------------------------- formatting

def _si(x: float, unit: str) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if unit == "s":
        if x >= 86400 * 2:
            return f"{x / 86400:.1f} days"
        if x >= 3600:
            return f"{x / 3600:.2f} h"
        if x >= 1:
            return f"{x:.3f} s"
        return f"{x * 1e3:.3f} ms"
    if unit == "B":
        return f"{x / 1e9:.2f} GB"
    if unit in ("1",) and 0 <= x <= 1.5:
        return f"{x * 100:.1f} %"
    for p, pre in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= p:
            return f"{x / p:.3f} {pre}{unit}"
    if abs(x) < 1e-3 and x != 0:
        return f"{x:.4g} {unit}"
    return f"{x:.4g} {unit}".strip()


COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}   # name -> (help, add_arguments, run)


def register(name: str, help_: str, add_args: Callable, run: Callable) -> None:
    COMMANDS[name] = (help_, add_args, run)


def _load_plugins() -> None:
    """Subcommands defined in other modules (search, sweep, ...) register on import."""
    import importlib
    for mod in ("explore.cli.evaluate", "explore.cli.catalog", "explore.cli.search",
                "explore.cli.sweep", "explore.cli.sensitivity", "explore.cli.study",
                "explore.cli.schema"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2
        raise UserError(f"{self.prog}: {message}")


def main(argv=None) -> int:
    _load_plugins()
    parser = _Parser(prog="lightpath", description="co-design LLM training clusters")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, (help_, add_args, _) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_))
    try:
        a = parser.parse_args(argv)
        if not a.command:
            parser.print_help()
            return 2
        return COMMANDS[a.command][2](a) or 0
    except UserError as e:
        print(f"lightpath: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lightpath: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # plugins register on the importable module `explore.cli.main`, not on `__main__`: run that one
    from explore.cli.main import main as _main
    sys.exit(_main())
