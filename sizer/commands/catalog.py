"""`sizer catalog list` and `sizer catalog import-skypilot`: GPU instance catalogs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.catalog import import_skypilot as convert
from sizer.catalog import load_catalog, normalize_gpu, write_catalog
from sizer.commands.options import catalog_flag, cloud_flag, gpu_flag, json_flag, out_flag
from sizer.console import console, emit, err_console, print_table, styled
from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.textfiles import read_text


def _render_list(data: dict[str, Any]) -> None:
    table = Table(title=f"{len(data['rows'])} GPU instance types", title_justify="left")
    numbers = ("vCPU", "RAM GiB", "$/hour", "GPU GiB", "NVMe GiB")
    for column in ("cloud", "instance", "vCPU", "RAM GiB", "GPU", "$/hour", "GPU GiB", "NVMe GiB", "region",
                   "price date"):
        table.add_column(column, justify="right" if column in numbers else "left",
                         no_wrap=column in ("instance", "GPU", *numbers))
    for r in data["rows"]:
        price = r["price_per_hour_usd"]
        table.add_row(
            r["cloud"], r["instance_type"], str(r["vcpus"]), f"{r['memory_gib']:g}", f"{r['gpu_count']}x {r['gpu']}",
            styled(("none", "yellow")) if price is None else f"{price:,.3f}", f"{r['gpu_memory_gib']:g}",
            f"{r['local_nvme_gib']:g}", r["region"] or "–", r["price_date"] or "–",
        )
    # At 80 columns the prices stay whole: the least needed columns go first.
    print_table(table, drop=("price date", "region", "GPU GiB", "NVMe GiB", "cloud"))
    console.print(styled(("disks: every row can use ssd and standard cloud disks; local-nvme where NVMe GiB > 0", "dim")))
    unpriced = sum(1 for r in data["rows"] if r["price_per_hour_usd"] is None)
    if unpriced:
        console.print(styled((f"{unpriced} row(s) have no price: listed, but not recommended on price "
                              "(add prices with --catalog).", "yellow")))
    warned = [r["instance_type"] for r in data["rows"] if "WARNING" in r["price_source"]]
    if warned:
        console.print(styled((f"price looks like a discounted tier (see its price_source): {', '.join(warned)}", "yellow")))
    sources = sorted({(r["cloud"], r["price_source"].split(";")[0].split(":")[0]) for r in data["rows"] if r["price_source"]})
    for cloud, src in sources:
        console.print(styled((f"{cloud} prices: {src}", "dim")))


def list_rows(
    cloud: Annotated[Optional[list[str]], cloud_flag("Only this cloud (aws, gcp, azure, alibaba); repeatable.")] = None,
    gpu: Annotated[Optional[str], gpu_flag("Only this GPU model (H100, A100-80GB, T4, ...).")] = None,
    catalog: Annotated[
        Optional[list[Path]], catalog_flag("Your own catalog CSV, added to the built-in rows; repeatable.")
    ] = None,
    no_builtin: Annotated[bool, typer.Option("--no-builtin", help="Only the rows of --catalog files.")] = False,
    as_json: Annotated[bool, json_flag("Print JSON instead of a table.")] = False,
) -> None:
    """List GPU instance types: vCPUs, RAM, GPU, price (with its source and date), local NVMe, disks.

    Built-in rows cover AWS (us-east-1), GCP (us-central1), Azure (eastus) and Alibaba (no prices);
    a --catalog file adds rows or overrides built-in ones (your negotiated or spot prices).

    Example: sizer catalog list --gpu H100 --catalog my-prices.csv
    """
    if no_builtin and not catalog:
        raise SizerError("--no-builtin needs at least one --catalog file")
    rows = load_catalog(tuple(catalog or ()), builtin=not no_builtin, clouds=cloud, gpu=gpu,
                        known_disks=load_disk_classes().keys())
    if not rows and gpu:
        known = sorted({normalize_gpu(r.gpu) for r in load_catalog(tuple(catalog or ()), builtin=not no_builtin)})
        raise SizerError(f"no catalog row has GPU {gpu!r} (known: {', '.join(known)})")
    rows.sort(key=lambda r: (r.cloud, normalize_gpu(r.gpu), r.gpu_count, r.price_per_hour or 0, r.vcpus))
    emit({"rows": [r.to_json() for r in rows]}, as_json, _render_list)


def import_skypilot(
    vms_csv: Annotated[Path, typer.Argument(help="SkyPilot's catalog vms.csv (e.g. catalogs/v7/aws/vms.csv).")],
    out: Annotated[Optional[Path], out_flag("Write the sizer catalog here (default: stdout).")] = None,
    cloud: Annotated[Optional[str], cloud_flag("Cloud name (default: from the path, e.g. .../aws/vms.csv).")] = None,
    region: Annotated[Optional[list[str]], typer.Option("--region", help="Only this region; repeatable.")] = None,
    spot: Annotated[bool, typer.Option("--spot", help="Use the spot price instead of on-demand.")] = False,
    price_date: Annotated[
        Optional[str], typer.Option("--price-date", help="Date of the prices (YYYY-MM-DD; default: the file's date).")
    ] = None,
    as_json: Annotated[bool, json_flag("Print a JSON summary.")] = False,
) -> None:
    """Convert SkyPilot's catalog vms.csv into a sizer catalog CSV (use it with --catalog).

    GPU rows only; one row per instance type and region. GCP host and accelerator rows are combined
    for machine types with a fixed GPU (A2, A3, A4, G2).

    Example: sizer catalog import-skypilot catalogs/v7/aws/vms.csv --region us-east-1 --out aws-prices.csv
    """
    import datetime as dt
    import re


    text = read_text(vms_csv, "SkyPilot catalog")
    if price_date is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", price_date):
        raise SizerError(f"--price-date must be YYYY-MM-DD, got {price_date!r}")
    date = price_date or dt.date.fromtimestamp(vms_csv.stat().st_mtime).isoformat()
    result = convert(text, str(vms_csv), cloud=cloud, regions=region, spot=spot, price_date=date)
    if not result.rows:
        raise SizerError(f"{vms_csv}: no GPU instance rows" + (f" in region(s) {', '.join(region)}" if region else ""))
    # vms.csv has no local NVMe: left empty, so a built-in row's NVMe is kept when the file is used.
    csv_text = write_catalog(result.rows, out, blank_local_nvme=True)
    summary = {"rows": len(result.rows), "out": str(out) if out else None, "skipped": result.skipped,
               "price_date": date, "spot": spot}
    if as_json:
        emit(summary, True)
        return
    if out is None:
        typer.echo(csv_text, nl=False)
        stream = err_console
    else:
        stream = console
        stream.print(f"wrote {len(result.rows)} row(s) to {out}")
    for why, n in sorted(result.skipped.items()):
        stream.print(styled((f"skipped {n} row(s): {why}", "dim")))
