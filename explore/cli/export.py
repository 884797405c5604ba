"""``lightpath export``: a result (search NetCDF, sweep Zarr store, saved evaluate Dataset)
as a flat table, CSV for spreadsheets or Parquet (pyarrow) for dataframes.

One row per design (search results and evaluate outputs: the ``design`` dimension;
sweeps: every grid point, C order, written block by block so memory follows the
block, not the grid). Columns: every variable along those dimensions (metrics,
decision variables, inputs) plus fixed (scalar) inputs as constant columns. Parquet
columns carry ``units`` and ``long_name`` in their field metadata.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from explore.cli.main import UserError, register

BLOCK_ROWS = 200_000   # rows converted at a time


def open_result(path):
    """A search result, evaluate output (NetCDF) or sweep store (Zarr directory) as a Dataset."""
    import xarray as xr
    p = Path(path)
    if not p.exists():
        raise UserError(f"{path}: file not found")
    try:
        if p.is_dir():
            from explore.sweep import open_sweep
            return open_sweep(p)
        with xr.open_dataset(p) as ds:
            return ds.load()
    except UserError:
        raise
    except Exception as e:   # not NetCDF / not a store: one line, not a traceback
        raise UserError(f"{path}: not a lightpath result (search .nc, evaluate .nc or sweep .zarr): "
                        f"{type(e).__name__}") from None


def table_layout(ds) -> tuple[tuple, list[str], list[str]]:
    """(row dimensions, names of the columns along them, names of scalar columns)."""
    if "design" in ds.dims:
        dims = ("design",)
    elif "valid" in ds:
        dims = tuple(ds["valid"].dims)
    else:
        raise UserError("result has neither a 'design' dimension nor a 'valid' variable; "
                        "allowed: a search result, a sweep store or an evaluate output")
    cols = [k for k in ds.variables if ds[k].dims == dims and k not in dims]
    cols += [k for k in ds.variables if k not in cols and set(ds[k].dims) == set(dims) and k not in dims]
    scalars = [k for k in ds.variables if ds[k].ndim == 0]
    return dims, cols, scalars


def iter_frames(ds, block: int = BLOCK_ROWS):
    """pandas DataFrames of at most about ``block`` rows, in C order over the row dims."""
    dims, cols, scalars = table_layout(ds)
    lead = dims[0]
    inner = int(np.prod([ds.sizes[d] for d in dims[1:]], dtype=np.int64)) if len(dims) > 1 else 1
    step = max(1, block // max(inner, 1))
    for start in range(0, ds.sizes[lead], step):
        sub = ds[cols].isel({lead: slice(start, start + step)}).transpose(*dims)
        df = sub.reset_coords(drop=False).to_dataframe().reset_index()
        df = df[[d for d in dims if d in df.columns] + [c for c in cols if c in df.columns]]
        for k in scalars:
            v = ds[k].values.item() if hasattr(ds[k].values, "item") else ds[k].values
            df[k] = v.decode() if isinstance(v, bytes) else v
        for k in df.columns:
            if df[k].dtype == object:
                df[k] = df[k].astype(str)
        yield df


def _schema_metadata(ds, schema):
    import pyarrow as pa
    fields = []
    for f in schema:
        attrs = ds[f.name].attrs if f.name in ds.variables else {}
        meta = {k: str(attrs[k]) for k in ("units", "long_name", "field") if k in attrs}
        fields.append(f.with_metadata(meta) if meta else f)
    return pa.schema(fields)


def export(ds, csv=None, parquet=None) -> int:
    """Write ``ds`` as CSV and/or Parquet; returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows, writer, schema = 0, None, None
    csv_f = open(csv, "w", newline="") if csv else None
    try:
        for i, df in enumerate(iter_frames(ds)):
            if csv_f is not None:
                df.to_csv(csv_f, header=(i == 0), index=False)
            if parquet:
                t = pa.Table.from_pandas(df, preserve_index=False)
                if writer is None:
                    schema = _schema_metadata(ds, t.schema)
                    writer = pq.ParquetWriter(parquet, schema)
                writer.write_table(t.cast(schema))
            rows += len(df)
    finally:
        if csv_f is not None:
            csv_f.close()
        if writer is not None:
            writer.close()
    return rows


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="search result (.nc), sweep store (.zarr) or saved evaluate output (.nc)")
    p.add_argument("--csv", help="write a CSV file")
    p.add_argument("--parquet", help="write a Parquet file (pyarrow)")


def _run(a) -> int:
    if not a.csv and not a.parquet:
        raise UserError("export: give --csv FILE and/or --parquet FILE")
    src = Path(a.result).resolve()
    for flag, out in (("--csv", a.csv), ("--parquet", a.parquet)):
        if out is None:
            continue
        o = Path(out)
        if o.resolve() == src:
            raise UserError(f"{flag}: {out} is the input result; allowed: another file name")
        if o.is_dir():
            raise UserError(f"{flag}: {out} is a directory; allowed: a file name")
        if not o.parent.exists():
            raise UserError(f"{flag}: directory {o.parent} does not exist")
    ds = open_result(a.result)
    rows = export(ds, a.csv, a.parquet)
    for out in (a.csv, a.parquet):
        if out:
            print(f"wrote {out} ({rows} rows)")
    return 0


register("export", "write a result (search, sweep or evaluate) as CSV or Parquet", _args, _run)
