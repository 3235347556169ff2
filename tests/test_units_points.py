import pytest

from sizer.errors import SizerError
from sizer.points import Point, parse_points_csv, read_points_csv, write_points_csv
from sizer.units import parse_int_list, parse_size


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
        ("workload,vcpus,ram_gib,disk_class,throughput,unit,status\nx,two,4,ssd,1,u,ok\n", "row 2, column 'vcpus'"),
        ("workload,vcpus,ram_gib,disk_class,throughput,unit,status\nx,1,4,ssd,1,u,ok\nx,1,4,ssd,nan,u,ok\n",
         "row 3, column 'throughput'"),
        ("workload,vcpus,ram_gib,disk_class,throughput,unit,status\n", "no points"),
    ],
)
def test_malformed_points_name_row_and_column(text, message):
    with pytest.raises(SizerError, match=message):
        parse_points_csv(text)
