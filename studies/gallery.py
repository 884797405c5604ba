"""Regenerate the README gallery: ``python -m studies.gallery [--quick]``.

Runs every study (full mode unless ``--quick``) into ``studies/out/NAME/`` and copies
its PNG figures to ``docs/gallery/`` (committed, shown in README.md).
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from studies import STUDIES
from studies.common import run_study

GALLERY = Path(__file__).resolve().parent.parent / "docs" / "gallery"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m studies.gallery")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    GALLERY.mkdir(parents=True, exist_ok=True)
    for name in STUDIES:
        r = run_study(name, a.quick)
        for f in r["files"]:
            if f.suffix == ".png":
                shutil.copy(f, GALLERY / f.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
