"""The docs name only paths that exist, and no text names a machine by a nickname.

A repository path is a word of an inline code span or of a fenced code block that starts with a
top-level name of the repository (`sizer/...`, `docs/...`, `Makefile`, ...), resolved from the
repository root; and every relative Markdown link target, resolved from the file that holds it, as
a Markdown viewer does. Globs, placeholders (`<gpu>`, `...`, `{a,b}`, `$VAR`) and URLs are not
paths; a command's output folder such as `results/` starts with no top-level name and is not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_DIRS = ("sizer", "workloads", "reports", "tests", "lab", "examples", "docs", "scripts", ".ci")
TOP_FILES = ("Makefile", "Dockerfile", "pyproject.toml", "LICENSE", "README.md")

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
# An inline code span may wrap onto the next line, never across a blank line.
INLINE_CODE = re.compile(r"`((?:[^`\n]|\n(?!\n))+)`")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PLACEHOLDER = re.compile(r"[<>*?{}$]|\.\.\.|…")
# Characters a sentence or a shell line puts around a path.
EDGE = "\"'()[],;:.!|>"

# A machine named by a nickname: one capital and an optional digit, or two capitals starting with A.
# Two capitals stand out on their own, except AI and AS (SQL's AS), which count only in context:
# after "machine" or "on", in brackets, before "'s", or in a stored file's name. Examples are in the
# tests at the end of this file.
NICK = r"(?:[A-Z][0-9]?|A[A-Z])"
NICKNAME = re.compile(
    "|".join(
        (
            rf"\b[Mm]achines? {NICK}\b(?!-)",
            r"\b(?:[B-Z][0-9]?|A[A-Z])'s\b",
            r"\bA[A-HJ-RT-Z]\b",
            r"\b(?:on|On|of|from|than|and|with|before|after|against|beside|replaces|replaced) A[IS]\b(?!-)",
            r"\(A[IS](?:[,;)]| and )",
            rf"-{NICK}(?:-[a-z]+)?\.(?:sqlite|json|log)\b",
            rf"\b{NICK} \(`GPU-",
            r"\((?:[B-Z][0-9]?|A[IS]), (?:one|two|three|an? H[12]00|`GPU)",
            r"\b(?:on|On) [B-Z][0-9]?(?=[,;)]| \(| and |\.\s|\.$)",
        )
    )
)


def doc_files() -> list[Path]:
    """README.md and docs/*.md, without docs/history/."""
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md"))]


def code_files() -> list[Path]:
    """The Python sources the nickname rule covers; this file holds its examples, so it is left out."""
    return sorted(
        p
        for top in ("sizer", "workloads", "tests", "lab")
        for p in (ROOT / top).rglob("*.py")
        if p != Path(__file__).resolve()
    )


def is_repo_path(word: str) -> bool:
    """A word that names a repository path: a top-level file, or a top-level folder and more; no pattern."""
    if PLACEHOLDER.search(word) or "://" in word:
        return False
    return word in TOP_FILES or ("/" in word and word.split("/", 1)[0] in TOP_DIRS)


def strip_edges(word: str) -> str:
    """A path without the punctuation around it, a `path:line` suffix, a `::test` or a `#anchor`."""
    word = word.lstrip(EDGE.replace(".", "")).rstrip(EDGE)
    word = word.split("#", 1)[0].split("::", 1)[0]
    return re.sub(r"(?::\d+)+$", "", word).rstrip(EDGE)


def backticked_paths(text: str) -> list[str]:
    """Repository paths named in inline code spans and in fenced code blocks."""
    spans = [m.group(0) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    spans += INLINE_CODE.findall(rest)
    words = (strip_edges(w) for span in spans for w in re.split(r"[\s=]+", span))
    return [w for w in words if w and is_repo_path(w)]


def link_targets(text: str) -> list[str]:
    """Relative Markdown link targets outside code."""
    text = INLINE_CODE.sub("", FENCE.sub("", text))
    targets = (t.split("#", 1)[0] for t in LINK.findall(text))
    return [t for t in targets if t and "://" not in t and not t.startswith("mailto:") and not PLACEHOLDER.search(t)]


def missing_paths(doc: Path) -> list[str]:
    """Every path a doc names that does not exist."""
    text = doc.read_text()
    missing = [p for p in backticked_paths(text) if not (ROOT / p).exists()]
    missing += [t for t in link_targets(text) if not (doc.parent / t).exists()]
    return sorted(set(missing))


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_existing_paths(doc: Path) -> None:
    assert missing_paths(doc) == []


def nicknames(path: Path) -> list[str]:
    """`line: text` of every line that names a machine by a nickname."""
    lines = path.read_text().splitlines()
    return [f"{i}: {line.strip()}" for i, line in enumerate(lines, 1) if NICKNAME.search(line)]


@pytest.mark.parametrize("path", doc_files() + code_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_machine_nicknames(path: Path) -> None:
    assert nicknames(path) == []


@pytest.mark.parametrize(
    "text",
    [
        # Split literals, so that this file's own text names no machine.
        "measured on machine " "AB",
        "machines " "G and H",
        "Machine " "V, 12 vCPUs",
        "AS" "'s sweep replaces",
        "AB's 16-vCPU point",
        "C's grid, which",
        "the same on AE",
        "a plain loop (AN)",
        "`examples/h200-sweep/train-AB.sqlite`",
        "`infer-R.sqlite`",
        "fidelity-AM-oldread.json",
        "D (`GPU-f1478ce8…`) measured",
        "imagenet-preprocess (L, three passes)",
        "the same sweep on K (90 points)",
        "as on D, with the loader of then",
    ],
)
def test_nickname_rule_catches(text: str) -> None:
    assert NICKNAME.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT key AS name FROM points",
        "ON CONFLICT(key) DO NOTHING",
        "a machine of that kind",
        "one H100 and one H200",
        "8 GiB of RAM on a VM",
        "the cgroup's io.max",
        "struct.unpack('<II', head)",
        "YYYY-MM-DD",
        "the A100's memory",
        "point i of N, the current shape",
        "lab/replicates/h200/resnet50-train-1.sqlite",
        "the cat sat on N mats",
        "a tensor of shape (N, C, H, W)",
    ],
)
def test_nickname_rule_spares(text: str) -> None:
    assert not NICKNAME.search(text)


def test_path_rule() -> None:
    text = (
        "Run `python lab/benchmarks/model_accuracy.py --store examples/h200/sizer.sqlite`, see "
        "[the design](docs/design.md#layout), `sizer/store.py:12`, `examples/<gpu>/`, `results/report.html`, "
        "`lab/gpu/*.sh`, [site](https://example.org/sizer/x), `--catalog=sizer/catalogs/aws.csv`, "
        "`sizer.store`, `.ci/run`.\n"
        "```\nsizer report --out results\nMakefile\n```\n"
    )
    assert sorted(backticked_paths(text)) == [
        ".ci/run",
        "Makefile",
        "examples/h200/sizer.sqlite",
        "lab/benchmarks/model_accuracy.py",
        "sizer/catalogs/aws.csv",
        "sizer/store.py",
    ]
    assert link_targets(text) == ["docs/design.md"]
