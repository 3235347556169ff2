"""Instance catalogs: built-in data, GPU names, user catalogs, SkyPilot import, `sizer catalog`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from sizer.catalog import (
    BUILTIN_CLOUDS,
    COLUMNS,
    builtin_rows,
    disk_types_for,
    import_skypilot,
    load_catalog,
    normalize_gpu,
    parse_catalog,
    write_catalog,
)
from sizer.errors import SizerError

DATA = Path(__file__).parent / "data" / "catalog"
PACKAGE_CATALOGS = Path(__file__).resolve().parent.parent / "sizer" / "catalogs"


# ---------------------------------------------------------------------------- built-in catalogs
def test_builtin_catalogs_cover_four_clouds_with_provenance():
    rows = builtin_rows()
    by_cloud = {c: [r for r in rows if r.cloud == c] for c in BUILTIN_CLOUDS}
    assert {c: len(v) for c, v in by_cloud.items()} == {"aws": 40, "gcp": 32, "azure": 17, "alibaba": 23}
    for r in rows:
        assert r.vcpus >= 1 and r.memory_gib > 0 and r.gpu_count >= 1 and r.gpu_memory_gib > 0
        assert set(r.disk_classes) >= {"ssd", "standard"}
        assert ("local-nvme" in r.disk_classes) == (r.local_nvme_gib > 0)
        assert r.price_source, r.instance_type
        if r.cloud == "alibaba":
            assert r.price_per_hour is None and "cannot be recommended on price" in r.price_source
        else:
            assert r.price_per_hour and r.price_per_hour > 0 and r.region
    for r in by_cloud["aws"]:
        assert r.price_date == "2026-01-21" and r.region == "us-east-1"


def test_builtin_csv_files_have_the_documented_columns():
    for cloud in BUILTIN_CLOUDS:
        with open(PACKAGE_CATALOGS / f"{cloud}.csv", newline="") as fh:
            assert tuple(csv.DictReader(fh).fieldnames) == COLUMNS


def test_reference_data_corrections_are_applied_and_noted():
    rows = {(r.cloud, r.instance_type, normalize_gpu(r.gpu)): r for r in builtin_rows()}
    g5 = rows[("aws", "g5.48xlarge", "A10G")]
    assert g5.local_nvme_gib == pytest.approx(7600e9 / 2**30, abs=0.1)  # 2 x 3800 GB, not one disk
    assert "corrected" in g5.price_source
    assert rows[("aws", "g4dn.xlarge", "T4")].local_nvme_gib == pytest.approx(125e9 / 2**30, abs=0.1)
    assert rows[("azure", "Standard_ND96isr_H100_v5", "H100")].gpu_count == 8  # the source said 12
    a3 = rows[("gcp", "a3-highgpu-1g", "H100")]
    assert "discounted" in a3.price_source and "WARNING" in a3.price_source
    assert rows[("gcp", "a3-megagpu-8g", "H100")].gpu_count == 8
    # GCP's N1 types exist once per attached GPU model.
    assert {g for (c, t, g) in rows if t == "n1-standard-8"} == {"T4", "V100", "P100"}


def test_cloud_disk_types_map_to_canonical_classes():
    assert "gp3" in disk_types_for("aws", "standard")
    assert set(disk_types_for("gcp", "ssd")) == {"pd-balanced", "pd-ssd"}
    assert disk_types_for("nowhere", "ssd") == []


# ---------------------------------------------------------------------------- GPU names
@pytest.mark.parametrize(
    "name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("H100-MEGA", "H100"),
        ("NVIDIA H100 PCIe", "H100-PCIE"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("H100-NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("A100-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("Tesla V100-SXM2-32GB", "V100-32GB"),
        ("Tesla T4", "T4"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla P100-PCIE-16GB", "P100"),
        ("t4", "T4"),
        ("", ""),
    ],
)
def test_normalize_gpu(name, expected):
    assert normalize_gpu(name) == expected


# ---------------------------------------------------------------------------- user catalogs
def test_user_catalog_overrides_a_price_and_adds_a_row():
    rows = load_catalog([DATA / "my_prices.csv"], gpu="H100")
    p5 = [r for r in rows if r.instance_type == "p5.4xlarge"]
    assert len(p5) == 1
    assert p5[0].price_per_hour == 4.10 and p5[0].price_source == "negotiated rate (example)"
    # Empty cells keep the built-in row's shape.
    assert (p5[0].vcpus, p5[0].memory_gib, p5[0].gpu_memory_gib) == (16, 256.0, 80.0)
    assert p5[0].local_nvme_gib > 3000 and "local-nvme" in p5[0].disk_classes
    acme = [r for r in rows if r.cloud == "acme"]
    assert len(acme) == 1 and acme[0].disk_classes == ("local-nvme", "ssd")
    assert len(rows) == len(load_catalog(gpu="H100")) + 1
    # Without the built-in rows, the override row has no base to fill its empty cells from.
    with pytest.raises(SizerError, match="row 2, column 'vcpus': empty"):
        load_catalog([DATA / "my_prices.csv"], builtin=False)


def test_filters_by_cloud_and_gpu():
    assert {r.cloud for r in load_catalog(clouds=["gcp"])} == {"gcp"}
    assert {normalize_gpu(r.gpu) for r in load_catalog(gpu="a100-sxm4-80gb")} == {"A100-80GB"}
    with pytest.raises(SizerError, match="unknown cloud"):
        load_catalog(clouds="nimbus")


@pytest.mark.parametrize(
    "body, message",
    [
        ("aws,x1,four,16,T4,1,16,0.5,us-east-1,0,,s,2026-01-01", "row 2, column 'vcpus': not a number"),
        ("aws,x1,4,16,T4,1,16,-1,us-east-1,0,,s,2026-01-01", "row 2, column 'price_per_hour_usd'"),
        ("aws,x1,4,16,T4,0,16,0.5,us-east-1,0,,s,2026-01-01", "row 2, column 'gpu_count'"),
        ("aws,,4,16,T4,1,16,0.5,us-east-1,0,,s,2026-01-01", "row 2, column 'instance_type': empty"),
        ("aws,x1,4,16,T4,1,16,0.5,us-east-1,0,floppy,s,2026-01-01", "row 2, column 'disk_classes': unknown disk class"),
        ("aws,x1,4,16,T4,1,16,0.5,us-east-1,0,local-nvme;ssd,s,2026-01-01", "local_nvme_gib is 0"),
        ("aws,x1,4,16,Foo9000,1,,0.5,us-east-1,0,,s,2026-01-01", "row 2, column 'gpu_memory_gib'"),
        ("aws,x1,4,16,T4,1.5,16,0.5,us-east-1,0,,s,2026-01-01", "whole number"),
    ],
)
def test_malformed_catalog_is_refused_naming_row_and_column(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text(",".join(COLUMNS) + "\n" + body + "\n")
    with pytest.raises(SizerError) as err:
        load_catalog([path], known_disks=("local-nvme", "ssd", "standard"))
    assert message in str(err.value)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_catalog_missing_columns_and_unreadable_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("cloud,instance_type\naws,x1\n")
    with pytest.raises(SizerError, match="missing column"):
        load_catalog([path])
    with pytest.raises(SizerError, match="cannot read catalog"):
        load_catalog([tmp_path / "absent.csv"])


def test_write_and_parse_round_trip(tmp_path):
    rows = load_catalog(clouds="aws", gpu="L4")
    text = write_catalog(rows, tmp_path / "l4.csv")
    again = parse_catalog(text, "l4.csv")
    assert again == rows
    assert (tmp_path / "l4.csv").read_text() == text


# ---------------------------------------------------------------------------- SkyPilot import
def test_import_skypilot_aws_sample():
    result = import_skypilot((DATA / "aws_vms_sample.csv").read_text(), str(DATA / "aws" / "vms.csv"),
                             price_date="2026-02-01")
    rows = {(r.instance_type, r.region): r for r in result.rows}
    assert set(rows) == {("g4dn.xlarge", "ap-northeast-1"), ("g4dn.xlarge", "us-east-1"),
                         ("g5.12xlarge", "us-east-1"), ("g5.12xlarge", "eu-west-1")}
    g5 = rows[("g5.12xlarge", "us-east-1")]
    assert (g5.cloud, g5.vcpus, g5.memory_gib, g5.gpu, g5.gpu_count, g5.price_per_hour) == \
        ("aws", 48, 192.0, "A10G", 4, 5.672)
    assert g5.gpu_memory_gib == pytest.approx(22888 / 1024, abs=0.1)
    assert g5.price_date == "2026-02-01" and "on-demand" in g5.price_source
    assert g5.local_nvme_gib == 0 and g5.disk_classes == ("ssd", "standard")
    spot = import_skypilot((DATA / "aws_vms_sample.csv").read_text(), "vms.csv", cloud="aws",
                           regions=["us-east-1"], spot=True)
    t4 = [r for r in spot.rows if r.instance_type == "g4dn.xlarge"]
    assert len(t4) == 1 and t4[0].price_per_hour == 0.1845  # the cheapest zone's spot price
    assert "spot" in t4[0].price_source


def test_import_skypilot_gcp_combines_host_and_accelerator_rows():
    result = import_skypilot((DATA / "gcp_vms_sample.csv").read_text(), "catalogs/v7/gcp/vms.csv")
    rows = {r.instance_type: r for r in result.rows}
    assert set(rows) == {"a2-highgpu-1g", "a2-highgpu-2g", "a3-highgpu-1g"}
    assert rows["a2-highgpu-1g"].price_per_hour == pytest.approx(3.67339)  # matches the built-in row
    assert rows["a2-highgpu-2g"].price_per_hour == pytest.approx(1.47895 + 2 * 2.93391)
    assert rows["a3-highgpu-1g"].price_per_hour == pytest.approx(5.38327)
    assert rows["a3-highgpu-1g"].gpu_memory_gib == 80 and rows["a2-highgpu-1g"].gpu_memory_gib == 40
    assert result.skipped == {"not a GPU (TPU, Inferentia, ...)": 1, "N1 host (GPUs are attachable, not fixed)": 1}


def test_import_skypilot_refuses_other_files(tmp_path):
    with pytest.raises(SizerError, match="not a SkyPilot vms.csv"):
        import_skypilot("a,b\n1,2\n", "x.csv", cloud="aws")
    with pytest.raises(SizerError, match="give --cloud"):
        import_skypilot((DATA / "aws_vms_sample.csv").read_text(), str(tmp_path / "vms.csv"))


def test_imported_catalog_is_a_valid_user_catalog(tmp_path):
    result = import_skypilot((DATA / "aws_vms_sample.csv").read_text(), "aws/vms.csv", regions=["us-east-1"])
    path = tmp_path / "aws-prices.csv"
    write_catalog(result.rows, path, blank_local_nvme=True)
    rows = load_catalog([path], gpu="T4", clouds="aws")
    g4 = [r for r in rows if r.instance_type == "g4dn.xlarge"]
    assert len(g4) == 1
    # The import leaves local NVMe out (vms.csv has none); as a user catalog it keeps the built-in value.
    assert g4[0].local_nvme_gib > 100 and "local-nvme" in g4[0].disk_classes
    assert "SkyPilot" in g4[0].price_source


# ---------------------------------------------------------------------------- CLI
def test_cli_catalog_list_json(cli):
    code, out, err = cli("catalog", "list", "--gpu", "H100", "--cloud", "aws", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["instance_type"] for r in rows] == ["p5.4xlarge", "p5.48xlarge"]
    assert rows[0]["price_per_hour_usd"] == 6.88 and rows[0]["disk_classes"][0] == "local-nvme"


def test_cli_catalog_list_table_and_errors(cli, tmp_path):
    code, out, _ = cli("catalog", "list", "--cloud", "alibaba")
    assert code == 0 and "ecs.gn5-c4g1.xlarge" in out and "no price" in out
    code, _, err = cli("catalog", "list", "--gpu", "Z9000")
    assert code == 2 and "no catalog row has GPU 'Z9000'" in err and "H100" in err
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(COLUMNS) + "\naws,x1,4,16,T4,1,16,abc,us-east-1,0,,s,\n")
    code, _, err = cli("catalog", "list", "--catalog", str(bad))
    assert code == 2 and err.count("\n") == 1 and "row 2, column 'price_per_hour_usd'" in err


def test_cli_import_skypilot(cli, tmp_path):
    out_file = tmp_path / "aws.csv"
    code, out, err = cli("catalog", "import-skypilot", str(DATA / "aws_vms_sample.csv"), "--cloud", "aws",
                         "--region", "us-east-1", "--out", str(out_file), "--price-date", "2026-02-01")
    assert code == 0, err
    rows = list(csv.DictReader(out_file.open()))
    assert [r["instance_type"] for r in rows] == ["g5.12xlarge", "g4dn.xlarge"] or \
        sorted(r["instance_type"] for r in rows) == ["g4dn.xlarge", "g5.12xlarge"]
    assert all(r["price_date"] == "2026-02-01" for r in rows)
    code, out, _ = cli("catalog", "import-skypilot", str(DATA / "aws_vms_sample.csv"), "--cloud", "aws", "--json")
    assert code == 0 and json.loads(out)["rows"] == 4
    code, _, err = cli("catalog", "import-skypilot", str(DATA / "aws_vms_sample.csv"), "--cloud", "aws",
                       "--price-date", "March")
    assert code == 2 and "YYYY-MM-DD" in err
