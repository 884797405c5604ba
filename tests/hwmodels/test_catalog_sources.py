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


@pytest.mark.parametrize("value", [None, 0.0, 1.2])
def test_scale_up_link_without_a_valid_bus_efficiency_fails(tmp_path, monkeypatch, value):
    """Every scale-up link carries its measured bus efficiency, a number in (0, 1]."""
    for p in parts.CATALOG_DIR.glob("*.toml"):
        shutil.copy(p, tmp_path / p.name)
    f = tmp_path / "links.toml"
    text = f.read_text()
    assert "bus_efficiency = 0.8195\n" in text                      # nvlink4
    f.write_text(text.replace("bus_efficiency = 0.8195\n", "" if value is None else f"bus_efficiency = {value}\n"))
    monkeypatch.setattr(parts, "CATALOG_DIR", tmp_path)
    parts.load_catalog.cache_clear()
    try:
        with pytest.raises(parts.CatalogError, match=r"'nvlink4' field 'bus_efficiency' is .*allowed"):
            parts.load_catalog()
    finally:
        monkeypatch.undo()
        parts.load_catalog.cache_clear()


def test_scale_out_link_as_scale_up_link_is_a_clear_error():
    from explore.model.system import build_system
    from explore.scenario import resolve
    sc = {"name": "x", "model": {"preset": "gpt3-175b"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training": {"global_batch": 16},
          "system": {"accelerator": "h100-sxm-80gb", "devices": 16,
                     "scale_up": {"size": 8, "link": "ib-ndr-400"},
                     "scale_out": {"link": "ib-ndr-400", "nics_per_device": 1.0}}}
    with pytest.raises(ValueError, match=r"system.scale_up.link: 'ib-ndr-400' has no measured bus_efficiency.*allowed: .*nvlink3"):
        build_system(resolve(sc))
