"""Regenerate the README gallery: ``python -m studies.gallery [--quick]``.

Runs every study (full mode unless ``--quick``) into ``studies/out/NAME/``, copies its PNG
figures to ``docs/gallery/`` (committed, shown in README.md) and collects every study's
summary into ``docs/gallery/summary.md`` (committed: the findings with their numbers).
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
    summaries = []
    for name in STUDIES:
        r = run_study(name, a.quick)
        for f in r["files"]:
            if f.suffix == ".png":
                shutil.copy(f, GALLERY / f.name)
        # one level down: the study's title becomes a section of the collected file
        summaries.append("\n".join("#" + ln if ln.startswith("#") else ln
                                   for ln in r["summary"].splitlines()) + "\n")
    (GALLERY / "summary.md").write_text(
        "# Study findings\n\nWritten by `python -m studies.gallery` from each study's stored dataset "
        "(each study also writes its own `summary.md` under `studies/out/`).\n\n" + "\n".join(summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
