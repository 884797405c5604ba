"""Docs that ship: every document and source key cited anywhere is in the repository, the
scenario reference matches the schema, and the JSON Schema accepts every shipped scenario."""
import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# files that describe *external* sources (their ".md" names are other people's files)
EXTERNAL = {"docs/bibliography.md", "docs/reference/hardware.md",
            "tests/test_docs.py"}         # (this file names missing documents on purpose)
DOC_REF = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[\w-]+\.md)\b")
KEY = re.compile(r"\[([A-Z]\d{1,2})\]")
SECTION = re.compile(r"hardware\.md,? sec\. ?(\d)")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout
    files = [ROOT / f for f in out.split()]
    # plus new files not yet committed (the test must hold in a working tree too)
    files += [p for p in DOCS.rglob("*.md")]
    return sorted({p for p in files if p.suffix in (".py", ".toml", ".md", ".ipynb", ".txt", ".csv")
                   and p.exists()})


GENERATED = {"summary.md"}   # files lightpath writes (a study's summary), not cited documents


def missing_documents(text: str, where: Path) -> list[str]:
    """Cited ``*.md`` names that resolve neither from the repository root, docs/, nor the
    citing file's folder. Files of other public repositories are cited as ``owner/repo:path``
    (the colon keeps them out of this check)."""
    bad = []
    for ref in DOC_REF.findall(text):
        if ref in GENERATED:
            continue
        if not any((base / ref).is_file() for base in (ROOT, DOCS, where.parent)):
            bad.append(ref)
    return bad


def bibliography() -> dict[str, list[str]]:
    rows = {}
    for line in (DOCS / "bibliography.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"[A-Z]\d{1,2}", cells[0]):
            rows[cells[0]] = cells[1:]
    return rows


def test_the_checker_itself_catches_a_missing_document():
    assert missing_documents("see DESIGN.md and docs/nope.md", ROOT / "README.md") == \
        ["DESIGN.md", "docs/nope.md"]
    assert missing_documents("see docs/architecture.md", ROOT / "README.md") == []


def test_every_cited_document_is_in_the_repository():
    bad = {}
    for p in _tracked():
        rel = p.relative_to(ROOT).as_posix()
        if rel in EXTERNAL:
            continue
        miss = missing_documents(p.read_text(errors="replace"), p)
        if miss:
            bad[rel] = sorted(set(miss))
    assert not bad, bad
    for p in DOCS.rglob("*.md"):                                # relative links inside docs/
        for link in re.findall(r"\]\(([^)#:]+)\)", p.read_text()):
            assert (p.parent / link).exists(), (p, link)


def test_every_cited_hardware_section_exists():
    sections = set(re.findall(r"^## (\d)\.", (DOCS / "reference" / "hardware.md").read_text(), re.M))
    cited = set()
    for p in _tracked():
        if p.relative_to(ROOT).as_posix() not in EXTERNAL:
            cited |= set(SECTION.findall(p.read_text(errors="replace")))
    assert cited and cited <= sections, cited - sections


def test_every_source_key_resolves_to_a_full_bibliography_entry():
    bib = bibliography()
    cited = {}
    for p in sorted((ROOT / "hwmodels" / "catalog").glob("*.toml")) + _tracked():
        for k in KEY.findall(p.read_text(errors="replace")):
            cited.setdefault(k, p.name)
    assert len(cited) >= 50                                    # the catalog really cites keys
    assert not {k: f for k, f in cited.items() if k not in bib}
    for k, cells in bib.items():                               # title, authors, year, URL, where
        assert all(cells), (k, cells)
        assert re.fullmatch(r"(19|20)\d\d|n\.d\.", cells[2]), (k, cells[2])
        assert "http" in cells[3] or "not recorded" in cells[3], (k, cells[3])


def test_catalog_sources_cite_the_shipped_documents():
    text = "".join(p.read_text() for p in (ROOT / "hwmodels" / "catalog").glob("*.toml"))
    assert text.count("docs/reference/hardware.md") >= 250      # 285 at the time of writing
    assert "DESIGN.md" not in text and "shared/" not in text


# ----------------------------------------------------------------------------- schema

def test_scenario_reference_is_generated_from_the_schema():
    from explore.schema import markdown
    shipped = (DOCS / "scenario-reference.md").read_text()
    assert shipped == markdown() + "\n", \
        "docs/scenario-reference.md is stale: run lightpath schema --markdown > docs/scenario-reference.md"
    from explore.scenario import SCHEMA
    for table, fields in SCHEMA.items():                       # every field is documented
        for k in fields:
            assert f"`{table}.{k}`" in shipped


def test_json_schema_accepts_every_shipped_scenario_and_rejects_bad_ones(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    from explore.cli.main import main
    from explore.schema import json_schema
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == json.loads(json.dumps(json_schema()))
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    files = sorted((ROOT / "studies" / "scenarios").glob("*.toml")) + \
        sorted((ROOT / "tests" / "validation" / "scenarios").glob("*.toml"))
    assert len(files) >= 20
    for f in files:
        errors = [e.message for e in v.iter_errors(tomllib.loads(f.read_text()))]
        assert not errors, (f.name, errors[:2])
    good = tomllib.loads(files[0].read_text())
    for path, value in ((("parallelism", "tpp"), 8), (("parallelism", "zero"), 4),
                        (("system", "accelerator"), "a100-typo"),
                        (("training", "precision"), "fp2")):
        bad = json.loads(json.dumps(good))
        bad.setdefault(path[0], {})[path[1]] = value
        assert list(v.iter_errors(bad)), path
