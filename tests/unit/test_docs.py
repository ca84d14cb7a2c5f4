"""The docs name files that exist: every repository path they quote is one.

Files move (this repository's tests moved into tests/unit and tests/e2e, checkpoints/db.py
was split); a doc that still names the old path sends a reader nowhere. Links are checked
by tests/e2e/test_readme.py; this checks the paths quoted as code.
"""

from __future__ import annotations

import re
import tomllib

from support.paths import ROOT

QUOTED_PATH = re.compile(
    r"`((?:contreact|tests|benchmarks|examples|scripts|docs)/[\w./-]+\.(?:py|ya?ml|md|json|txt))`"
)


def quoted_paths() -> list[tuple[str, str]]:
    docs = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")]
    return [
        (str(doc.relative_to(ROOT)), path)
        for doc in docs
        for path in QUOTED_PATH.findall(doc.read_text(encoding="utf-8"))
    ]


def test_every_path_the_docs_quote_exists() -> None:
    quoted = quoted_paths()
    assert len(quoted) >= 20, f"only {len(quoted)} quoted paths found: is the pattern right?"
    missing = [f"{doc}: {path}" for doc, path in quoted if not (ROOT / path).exists()]
    assert missing == []


def test_every_docs_page_is_in_the_readmes_documentation_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| \[[^\]]+\]\((docs/[^)#]+\.md)\)", table, re.M))
    pages = {str(page.relative_to(ROOT)) for page in (ROOT / "docs").glob("*.md")}
    assert len(pages) >= 10
    assert sorted(pages - listed) == []


def extra(name: str) -> set[str]:
    """The distributions an extra of pyproject.toml brings, the extras it names unfolded."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    brought: set[str] = set()
    for requirement in extras[name]:
        own = re.fullmatch(r"contreact\[(\w+)\]", requirement.split("#")[0].strip())
        brought |= extra(own.group(1)) if own else {re.split(r"[<>=~ ]", requirement)[0]}
    return brought


def installed_extras(page: str) -> set[str]:
    """The extras a page's `.venv/bin/pip install -e '.[X]'` commands install."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return {
        name.strip()
        for block in blocks
        for names in re.findall(r"^\.venv/bin/pip install -e '\.\[([\w,]+)\]'", block, re.M)
        for name in names.split(",")
    }


def test_the_studio_page_installs_the_server_it_starts() -> None:
    text = (ROOT / "docs" / "studio.md").read_text(encoding="utf-8")
    assert ".venv/bin/langgraph dev" in text
    brought = set().union(*(extra(name) for name in installed_extras("studio.md")))
    assert "langgraph-cli[inmem]" in brought


def test_the_notebook_page_installs_jupyter_beside_the_analysis_extra() -> None:
    text = (ROOT / "docs" / "notebook.md").read_text(encoding="utf-8")
    assert re.search(r"^\.venv/bin/jupyter lab$", text, re.M)
    brought = set().union(*(extra(name) for name in installed_extras("notebook.md")))
    assert {"pandas", "pyarrow", "jupyterlab"} <= brought
    assert "jupyterlab" not in extra("analysis") | extra("dev")  # heavy: its own extra only
