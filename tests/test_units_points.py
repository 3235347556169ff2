import re

import pytest

from sizer.errors import SizerError
from sizer.points import Point, parse_points_csv, read_points_csv, write_points_csv
from sizer.units import parse_int_list, parse_size

HEADER = "workload,vcpus,ram_gib,disk_class,throughput,unit,status\n"


def test_parse_size():
    assert parse_size("4G") == 4 * 2**30
    assert parse_size("512M") == 512 * 2**20
    assert parse_size("1.5GiB") == int(1.5 * 2**30)
    assert parse_size("8") == 8 * 2**30
    for bad in ("", "four", "-1G", "0"):
        with pytest.raises(SizerError):
            parse_size(bad)


def test_parse_int_list():
    assert parse_int_list("1, 2,4", "--vcpus") == [1, 2, 4]
    with pytest.raises(SizerError, match="--vcpus"):
        parse_int_list("1,x", "--vcpus")


def test_points_csv_round_trip(tmp_path):
    pts = [
        Point("resnet50-train", 4, 16.0, "ssd", 950.5, "images/s", spread=0.02, input="files"),
        Point("resnet50-train", 16, 64.0, "local-nvme", 4600.0, "images/s", input="synthetic"),
    ]
    path = tmp_path / "points.csv"
    write_points_csv(pts, path)
    back = read_points_csv(path)
    assert [(p.workload, p.vcpus, p.ram_gib, p.disk_class, p.throughput, p.input) for p in back] == [
        (p.workload, p.vcpus, p.ram_gib, p.disk_class, p.throughput, p.input) for p in pts
    ]
    assert back[0].spread == pytest.approx(0.02)


@pytest.mark.parametrize(
    "text, message",
    [
        ("workload,vcpus\nx,1\n", "missing column"),
        (HEADER + "x,two,4,ssd,1,images/s,ok\n", "row 2, column 'vcpus'"),
        (HEADER + "x,1,4,ssd,1,images/s,ok\nx,1,4,ssd,nan,images/s,ok\n", "row 3, column 'throughput'"),
        (HEADER, "no points"),
    ],
)
def test_malformed_points_name_row_and_column(text, message):
    with pytest.raises(SizerError, match=message):
        parse_points_csv(text)


@pytest.mark.parametrize("row, column, allowed", [
    ("x,1,4,floppy,10,images/s,ok", "disk_class", "local-nvme, ssd, standard"),
    ("x,1,4,ssd,10,images/s,banana", "status", "ok, noisy, oom, timeout, error"),
    ("x,1,4,ssd,10,parsecs,ok", "unit", "images/s, tokens/s, samples/s"),
])
def test_points_file_with_an_unknown_disk_class_status_or_unit_is_refused_naming_file_row_and_column(
        tmp_path, row, column, allowed):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "x,1,4,ssd,10,images/s,ok\n" + row + "\n")
    with pytest.raises(SizerError) as refused:
        read_points_csv(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: row 3, column '{column}': ") and allowed in message, message


def test_points_file_disk_class_may_come_from_the_disk_class_table_in_force(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "x,1,4,floppy,10,samples/s,ok\n")
    assert read_points_csv(path, disk_classes=["local-nvme", "floppy"])[0].disk_class == "floppy"
    with pytest.raises(SizerError, match="'ssd' is not a known disk class"):
        parse_points_csv(HEADER + "x,1,4,ssd,10,samples/s,ok\n", disk_classes=["local-nvme", "floppy"])


def test_every_unit_a_workload_reports_reads_back():
    from sizer.points import THROUGHPUT_UNITS
    from workloads import load_all

    assert {cls.unit for cls in load_all().values()} <= set(THROUGHPUT_UNITS)


def test_values_of_a_points_file_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "x,1,4,ssd,10,images/s,ok\nx,1,4,ssd,-3,images/s,ok\n")
    with pytest.raises(SizerError, match=f"^{re.escape(str(path))}: row 3, column 'throughput'"):
        read_points_csv(path)
