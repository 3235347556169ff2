"""The GPU table (sizer/gpu_table.py): the built-in one covers the catalogs' GPUs; a bad row is
refused with one line naming it; the matrix rate follows the GPU's tensor cores."""

from __future__ import annotations

import pytest

from sizer.catalog import builtin_rows
from sizer.errors import SizerError
from sizer.gpu_table import COLUMNS, load_gpu_table, parse_gpu_table

HEADER = ",".join(COLUMNS)
GOOD = "X1,16,300,,65,,8,40,1590,PCIe,https://example.com/x1.pdf,datasheet"


def _table(*rows: str) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


def test_the_builtin_table_has_a_row_for_every_gpu_the_catalogs_sell():
    table = load_gpu_table()
    assert table.missing(r.gpu for r in builtin_rows()) == []
    for row in table:
        assert row.source.startswith("https://")
        assert row.memory_bandwidth_gbps > 0 and row.sm_count > 0


def test_a_gpu_is_found_by_any_of_its_names():
    table = load_gpu_table()
    assert table.get("NVIDIA H100 80GB HBM3").gpu == "H100"
    assert "Tesla V100-SXM2-16GB" in table
    with pytest.raises(SizerError, match="not in the GPU table"):
        table.get("MI300X")


def test_matrix_work_runs_on_the_best_tensor_cores_the_gpu_has():
    table = parse_gpu_table(_table(
        "T4,16,320,,65,,8.1,40,1590,PCIe,https://e.com/t4,ds",
        "A100,40,1555,312,312,156,19.5,108,1410,SXM4,https://e.com/a100,ds",
        "P4,8,192,,,,5.5,20,1063,PCIe,https://e.com/p4,ds",
    ))
    assert table.get("T4").matrix_tflops("bf16") == (65.0, "fp16_tensor_tflops")  # no bf16: fp16
    assert table.get("A100").matrix_tflops("fp32") == (156.0, "tf32_tensor_tflops")
    assert table.get("P4").matrix_tflops("bf16") == (5.5, "fp32_tflops")  # no tensor cores
    assert table.get("T4").sm_clock == pytest.approx(40 * 1.590)
    with pytest.raises(ValueError):
        table.get("T4").matrix_tflops("int8")


@pytest.mark.parametrize("row, message", [
    ("X1,16,abc,,65,,8,40,1590,PCIe,https://e.com,ds", r"line 2 \(X1\): memory_bandwidth_gbps 'abc' is not a number"),
    ("X1,16,-3,,65,,8,40,1590,PCIe,https://e.com,ds", "memory_bandwidth_gbps must be > 0"),
    ("X1,16,300,,0,,8,40,1590,PCIe,https://e.com,ds", "fp16_tensor_tflops must be > 0"),
    ("X1,16,300,,65,,8,40.5,1590,PCIe,https://e.com,ds", "sm_count must be a whole number"),
    ("X1,16,300,,65,,8,40,1590,PCIe,datasheet.pdf,ds", "source must be the public datasheet's URL"),
    ("NVIDIA H100 80GB,80,3350,989,989,494,67,132,1980,SXM5,https://e.com,ds", "name the GPU as the catalogs do: 'H100'"),
    (",16,300,,65,,8,40,1590,PCIe,https://e.com,ds", "no gpu name"),
])
def test_a_bad_row_is_refused_with_one_line_naming_it(row, message):
    with pytest.raises(SizerError, match=message) as err:
        parse_gpu_table(_table(row), "gpus.csv")
    assert "\n" not in str(err.value)


def test_a_table_missing_a_column_or_rows_or_repeating_a_gpu_is_refused(tmp_path):
    with pytest.raises(SizerError, match="missing column"):
        parse_gpu_table("gpu,memory_gib\nX1,16\n")
    with pytest.raises(SizerError, match="no GPU rows"):
        parse_gpu_table(_table())
    with pytest.raises(SizerError, match="line 3: GPU X1 appears twice"):
        parse_gpu_table(_table(GOOD, GOOD))
    with pytest.raises(SizerError, match="cannot read GPU table"):
        load_gpu_table(tmp_path / "missing.csv")
    path = tmp_path / "gpus.csv"
    path.write_text(_table(GOOD))
    assert [r.gpu for r in load_gpu_table(path)] == ["X1"]
