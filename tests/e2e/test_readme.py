"""The README contract: two set-up commands (CI runs one, the first works fresh); links resolve."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from support.paths import ROOT


def setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    commands = setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands), commands
    assert "contreact demo" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def newcomer_env() -> dict[str, str]:
    """The caller's environment without this checkout's virtual environment or settings."""
    venv = str(ROOT / ".venv")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not p.startswith(venv)]
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("CONTREACT_", "VIRTUAL_ENV"))}
    # pip's compiling every installed module ahead of time is most of the install's CPU and
    # none of what the command proves; the demo compiles what it imports as it runs.
    return {**keep, "PATH": os.pathsep.join(path), "PIP_COMPILE": "false"}


def test_newcomer_install_and_demo(tmp_path: Path) -> None:
    """The first command, as a newcomer runs it: a copy of the project, a fresh venv, no Ollama."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    copy = tmp_path / "contreact"
    for name in files:
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    result = subprocess.run(
        ["bash", "-c", setup_commands()[0]],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=900,
        env=newcomer_env(),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert len(re.findall(r"^cycle \d+ reflection: \S", result.stdout, re.M)) >= 3, result.stdout
    assert re.search(r"^run demo-\S+ completed$", result.stdout, re.M)


MARKDOWN_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """The anchors a Markdown file's headings give (code blocks are not headings)."""
    text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"), flags=re.S | re.M)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        name = slug(heading)
        n = 0
        while (name if n == 0 else f"{name}-{n}") in found:
            n += 1
        found.add(name if n == 0 else f"{name}-{n}")
    return found


def relative_links(doc: Path) -> list[str]:
    """Links in a Markdown file that point into the repository (not into code or the web)."""
    text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    links = MARKDOWN_LINK.findall(text)
    return [link for link in links if not re.match(r"[a-z][a-z0-9+.-]*:", link)]


def test_every_relative_link_in_the_docs_points_at_a_file_that_exists() -> None:
    docs = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")]
    assert len(docs) >= 10, docs
    checked, broken = 0, []
    for doc in docs:
        for link in relative_links(doc):
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            checked += 1
            if not target.is_relative_to(ROOT) or not target.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such heading)")
    assert checked >= 20, f"only {checked} relative links found: is the link pattern right?"
    assert not broken, "\n".join(broken)
