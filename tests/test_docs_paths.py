"""The docs name only paths that exist, and every section a text cites exists.

A repository path is a word of an inline code span or of a fenced code block that starts with a
top-level name of the repository (`sizer/...`, `docs/...`, `Makefile`, ...), resolved from the
repository root; and every relative Markdown link target, resolved from the file that holds it, as
a Markdown viewer does. Globs, placeholders (`<gpu>`, `...`, `{a,b}`, `$VAR`) and URLs are not
paths; a command's output folder such as `results/` starts with no top-level name and is not checked.

A section citation is a Markdown file's name, a comma and the section's title in double quotes,
in code, comments, docstrings and docs alike; the title may wrap onto the next line (of a comment,
too) and a Python string may be continued between the comma and the title. The file is resolved
from the citing file's folder, then from the repository root, and must have a heading (outside
code blocks) whose text is the title, backticks and spacing aside.
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

# Where section citations are looked for, and in which files.
CITING_TOPS = ("sizer", "workloads", "reports", "docs", "README.md", "lab", "tests", "examples")
CITING_SUFFIXES = (".py", ".md", ".sh", ".j2")
CITATION = re.compile(
    r"(?P<file>[\w./-]+\.md)`?,\s*(?:#\s*)?"  # a Markdown file and a comma; a comment goes on below
    r"(?:\"\s*\n\s*\")?"  # a Python string continued on the next line
    r"\\?\"(?P<section>[^\"\\\n]+(?:\n[ \t]*#?[ \t]*[^\"\\\n]+)?)\\?\""  # the title, on one or two lines
)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def doc_files() -> list[Path]:
    """README.md, docs/*.md (without docs/history/), and the READMEs of examples/ and lab/."""
    readmes = [p for top in ("examples", "lab") for p in sorted((ROOT / top).rglob("README.md"))]
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md")), *readmes]


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


# ---------------------------------------------------------------------------- cited sections
def normalized(title: str) -> str:
    """A title as compared: no backticks, a comment's `#` at a wrapped line's start gone, one space."""
    return " ".join(re.sub(r"\n[ \t]*#", "\n", title).replace("`", "").split())


def citations(text: str) -> list[tuple[str, str]]:
    """(file, section title) of every section citation in a text."""
    return [(m.group("file"), normalized(m.group("section"))) for m in CITATION.finditer(text)]


def headings(markdown: str) -> set[str]:
    """The normalized text of every heading of a Markdown file, code blocks left out."""
    return {normalized(h) for h in HEADING.findall(FENCE.sub("", markdown))}


def citing_files(root: Path) -> list[Path]:
    files = []
    for top in CITING_TOPS:
        path = root / top
        files += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in CITING_SUFFIXES)
    return files


def missing_sections(root: Path) -> list[str]:
    """`citing file: file, "section"` for every citation whose file or heading does not exist."""
    missing = []
    for path in citing_files(root):
        for name, section in citations(path.read_text(errors="replace")):
            target = next((p for p in (path.parent / name, root / name) if p.is_file()), None)
            if target is None or section not in headings(target.read_text()):
                missing.append(f'{path.relative_to(root)}: {name}, "{section}"')
    return missing


def test_every_cited_section_exists() -> None:
    assert missing_sections(ROOT) == []


def test_a_made_up_or_moved_section_is_reported(tmp_path: Path) -> None:
    """The checker on a tree made here. Citations are assembled from parts, so that this file's own
    text cites nothing."""
    quote, guide = chr(34), "docs/guide" + ".md"

    def cite(name: str, section: str) -> str:
        return f"{name}, {quote}{section}{quote}"

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## Ranges\n\n### What `--cpu-cost` buys\n\n```sh\n# Not a heading\n```\n"
        + "(" + cite("report" + ".md", "Ranges") + ")\n"  # from docs/: no such file there or at the root
    )
    (tmp_path / "sizer").mkdir()
    (tmp_path / "sizer" / "mod.py").write_text("\n".join([
        f"# the range ({cite(guide, 'Ranges')})",
        f"# what it buys ({guide},",  # a title on the comment's next line, wrapped
        f"# {quote}What --cpu-cost",
        f"# buys{quote})",
        f"HELP = ({quote}see ({guide}, {quote}",  # a string continued between the comma and the title
        f"        {quote}\\{quote}Ranges\\{quote}).{quote})",
        f"# made up: {cite(guide, 'Made up')}",
        f"# in a code block only: {cite(guide, 'Not a heading')}",
        f"# no such file: {cite('docs/gone' + '.md', 'Ranges')}",
    ]) + "\n")
    (tmp_path / "README.md").write_text(f"See {cite(guide, 'Ranges')}.\n")

    assert citations((tmp_path / "sizer" / "mod.py").read_text())[:3] == [
        (guide, "Ranges"), (guide, "What --cpu-cost buys"), (guide, "Ranges")]
    assert sorted(missing_sections(tmp_path)) == [
        "docs/guide.md: " + cite("report" + ".md", "Ranges"),
        "sizer/mod.py: " + cite("docs/gone" + ".md", "Ranges"),
        "sizer/mod.py: " + cite(guide, "Made up"),
        "sizer/mod.py: " + cite(guide, "Not a heading"),
    ]
