"""The base install (`pip install .`, no measuring extra) runs `sizer report`, and every package the
modules it loads import at their top is one the base install declares."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import tomllib
from test_report_fixtures import make_points

from sizer.points import write_points_csv

ROOT = Path(__file__).resolve().parent.parent
MEASURING_ONLY = ("torch", "torchvision", "lmdb", "pynvml", "ray", "mxnet")

_RUN = textwrap.dedent("""
    import json, sys

    class NotInstalled:  # what the measuring extra brings is absent from a base install
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
            return None

    sys.meta_path.insert(0, NotInstalled())
    from sizer.cli import main

    code = main(["report", "--input", {points!r}, "--out", {out!r}])
    print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
""")


def _declared() -> set[str]:
    """The distributions the base install declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_name(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in project["dependencies"]}


def _name(distribution: str) -> str:
    return distribution.lower().replace("_", "-")


def _top_level_imports(path: Path) -> set[str]:
    """The packages a module imports in its body (not inside a function or a guarded `try`)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_sizer_report_runs_without_the_measuring_extra_and_imports_only_declared_packages(tmp_path):
    points = tmp_path / "points.csv"
    write_points_csv(make_points(), points)
    code = _RUN.format(blocked=set(MEASURING_ONLY), points=str(points), out=str(tmp_path / "out"))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["code"] == 0 and (tmp_path / "out" / "report.html").exists()

    ours = ("sizer", "workloads", "reports")
    loaded = [m for m in outcome["modules"] if m.split(".")[0] in ours]
    imported = set()
    for module in loaded:
        spec = sys.modules.get(module) or __import__(module, fromlist=["_"])
        if getattr(spec, "__file__", None):
            imported |= _top_level_imports(Path(spec.__file__))
    third_party = sorted(m for m in imported if m not in sys.stdlib_module_names and m not in ours)
    by_module = metadata.packages_distributions()
    declared = _declared()
    undeclared = {m: by_module.get(m) for m in third_party if not any(_name(d) in declared for d in by_module.get(m, []))}
    assert not undeclared, f"imported by the modules `sizer report` loads, not declared by the base install: {undeclared}"
    assert "PIL" in third_party  # the synthetic-data module is loaded, and Pillow is declared for it
    assert not {m.split(".")[0] for m in outcome["modules"]} & set(MEASURING_ONLY)
