"""Tables at 80 columns: numbers stay whole, low-priority columns go first, nothing is cut."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from rich.table import Table

from sizer import console as console_module
from sizer.console import print_table


def _narrow(width: int = 80) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=width, color_system=None), buffer


def _wide_table() -> Table:
    table = Table(title="wide")
    for column in ("name", "price", "note", "region", "date"):
        table.add_column(column, no_wrap=column in ("name", "price"))
    for i in range(3):
        table.add_row(f"instance-with-a-long-name-{i}", f"{12345.678 + i:,.3f}",
                      "a note of several words that wraps", "somewhere-central-1", "2026-01-21")
    return table


def test_whole_columns_keep_their_numbers_and_low_priority_columns_go_first():
    out, buffer = _narrow(60)
    print_table(_wide_table(), drop=("date", "region"), out=out)
    text = buffer.getvalue()
    assert all(len(line) <= 60 for line in text.splitlines())
    for i in range(3):
        assert f"instance-with-a-long-name-{i}" in text and f"{12345.678 + i:,.3f}" in text
    assert "date" not in text and "2026-01-21" not in text  # dropped first
    assert "…" not in text


def test_a_table_that_fits_keeps_every_column():
    out, buffer = _narrow(200)
    print_table(_wide_table(), drop=("date", "region"), out=out)
    text = buffer.getvalue()
    assert "2026-01-21" in text and "somewhere-central-1" in text


def test_a_long_word_in_a_wrapping_column_folds_instead_of_being_cut():
    out, buffer = _narrow(40)
    table = Table(show_header=False)
    table.add_column("what", no_wrap=True)
    table.add_column("value")
    path = "/sys/fs/cgroup/memory/" + "a" * 60 + "/sizer"
    table.add_row("limit groups", path)
    print_table(table, out=out)
    lines = buffer.getvalue().splitlines()
    assert all(len(line) <= 40 for line in lines)
    assert "limit groups" in lines[1]
    value = "".join(line.split("│")[2].strip() for line in lines[1:-1])
    assert value == path


@pytest.fixture
def eighty_columns(monkeypatch):
    monkeypatch.setattr(console_module.console, "width", 80)


def test_catalog_list_at_80_columns_shows_every_price_whole(cli, eighty_columns):
    code, out, err = cli("catalog", "list", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    code, out, err = cli("catalog", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "…" not in out
    body = [line for line in lines if line.startswith("│")]
    assert len(body) == len(rows)  # one line per row: nothing wrapped
    for r, line in zip(rows, body):
        price = "none" if r["price_per_hour_usd"] is None else f"{r['price_per_hour_usd']:,.3f}"
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        assert r["instance_type"] in cells and price in cells and str(r["vcpus"]) in cells, line


@pytest.fixture
def points_csv(tmp_path):
    from simulate import simulate_points

    from sizer.points import write_points_csv

    truth = {"gpu_ceiling": 3800.0, "per_vcpu": 250.0, "usl_sigma": 0.0, "usl_kappa": 0.0,
             "bytes_per_sample": 0.05, "footprint_gib": 2.0, "dataset_gib": 6.0}
    points = simulate_points("resnet50-train[decode=cpu]", truth, (1, 2, 4, 8, 12, 16),
                             {"local-nvme": None, "ssd": 300.0, "standard": 140.0}, (16.0, 32.0), noise=0.02,
                             seed=7, gpu_model="NVIDIA A10G")
    path = tmp_path / "points.csv"
    write_points_csv(points, path)
    return path


def test_recommend_and_fit_at_80_columns_cut_nothing(cli, eighty_columns, points_csv):
    code, out, err = cli("recommend", "--input", str(points_csv), "--json", "--job-samples", "115.2e6")
    assert code == 0, err
    chosen = json.loads(out)["recommendations"][0]["chosen"]
    code, out, err = cli("recommend", "--input", str(points_csv), "--job-samples", "115.2e6")
    assert code == 0, err
    assert "…" not in out and all(len(line) <= 80 for line in out.splitlines())
    row = next(line for line in out.splitlines() if chosen["instance_type"] in line)
    assert f"${chosen['price_per_gpu_hour']:,.3f}" in row
    code, out, err = cli("fit", "--input", str(points_csv))
    assert code == 0, err
    assert "…" not in out and all(len(line) <= 80 for line in out.splitlines())
    assert "gpu_ceiling" in out and "per_vcpu" in out
