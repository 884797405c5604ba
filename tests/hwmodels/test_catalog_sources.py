"""Every number in every catalog file has a source; a missing one fails loading."""
import shutil

import pytest

from hwmodels import parts


def test_all_catalog_files_validate_and_list_their_kinds():
    cat = parts.load_catalog()
    files = sorted(p.stem for p in parts.CATALOG_DIR.glob("*.toml"))
    assert sorted(cat) == files
    for kind in ("process_nodes", "hbm", "d2d", "packaging", "io_chiplets", "accelerator_designs"):
        assert cat[kind], kind
        for pid, e in cat[kind].items():
            assert e.get("name"), (kind, pid)


@pytest.mark.parametrize("name", sorted(p.name for p in parts.CATALOG_DIR.glob("*.toml")))
def test_missing_source_fails(tmp_path, monkeypatch, name):
    for p in parts.CATALOG_DIR.glob("*.toml"):
        shutil.copy(p, tmp_path / p.name)
    text = (tmp_path / name).read_text().splitlines()
    # drop the first per-field source line (or a part's single source string)
    in_src = False
    for i, line in enumerate(text):
        if line.startswith("[") and line.rstrip().endswith(".source]"):
            in_src = True
            continue
        if line.startswith("["):
            in_src = False
        if (in_src and "=" in line) or line.startswith("source ="):
            del text[i]
            break
    else:
        pytest.skip(f"{name}: no source lines")
    (tmp_path / name).write_text("\n".join(text) + "\n")
    monkeypatch.setattr(parts, "CATALOG_DIR", tmp_path)
    parts.load_catalog.cache_clear()
    try:
        with pytest.raises(parts.CatalogError, match="source"):
            parts.load_catalog()
    finally:
        monkeypatch.undo()
        parts.load_catalog.cache_clear()


def test_cli_lists_and_shows_hardware_kinds(capsys):
    from explore.cli.main import main
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    for kind in ("process_nodes:", "hbm:", "d2d:", "packaging:", "io_chiplets:", "accelerator_designs:"):
        assert kind in out
    assert main(["catalog", "show", "hbm4"]) == 0
    out = capsys.readouterr().out
    assert "bandwidth_bytes_per_s" in out and "JEDEC" in out
    assert main(["catalog", "show", "b200"]) == 0   # the datasheet part and its reconstruction
    out = capsys.readouterr().out
    assert "(accelerators)" in out and "(accelerator_designs)" in out
