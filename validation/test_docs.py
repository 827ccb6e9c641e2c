"""The documents a user gets with a clone: every link resolves inside the repository, and nothing cites a file
that is not in it (the team's working notes live outside the product)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", ".nox", ".device", "artifacts", "published", "__pycache__", "node_modules"}
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "reports" / "published" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# The team's notes outside the product: a design file, the shared folder beside the checkout, the seed documents
# (written with classes so that this line does not cite them itself).
OUTSIDE = re.compile(r"DESIGN[.]md|[.][.]/shared|seeds/[0]\d\d")


def _project_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*"):
        if path.is_file() and not SKIP_DIRS & set(path.relative_to(ROOT).parts[:-1]) and path.suffix in (
                ".py", ".md", ".toml", ".txt", ".cfg", ".html", ".j2", "") and path.stat().st_size < 1_000_000:
            files.append(path)
    return files


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_relative_link_resolves(doc: Path) -> None:
    assert doc.is_file(), f"{doc} is missing"
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the page
        path = (doc.parent / unquote(target.split("#", 1)[0])).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to what the repository does not hold: {broken}"


def test_nothing_cites_a_file_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    cites = [f"{p.relative_to(ROOT)}:{n}" for p in _project_files() if p != this
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), start=1) if OUTSIDE.search(line)]
    assert not cites, f"citations of files a clone does not have: {cites[:20]}"


def test_the_readme_results_blocks_are_what_their_runs_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's results are generated from the published results files (reports/readme_table.py), never typed:
    regenerating every block with the command its marker records gives the same text."""
    from reports import readme_table

    text = (ROOT / "README.md").read_text()
    assert readme_table.BLOCK.search(text), "the README has no generated results block"
    monkeypatch.chdir(ROOT)  # the markers' paths are relative to the repository
    assert readme_table.refresh(text) == text, (
        "a results block of the README differs from its runs: python -m reports.readme_table --refresh README.md")
