"""An installed contreact adds one name to site-packages: `contreact`.

The card's packages (`graph`, `nodes`, `tools`, `checkpoints`) live under the `contreact`
namespace, so they never collide with a user's own `graph` or `tools` module, and every
file has one real location: the repository tracks no symlinks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from support.paths import ROOT


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    # Built from a copy of what git tracks, as a clean clone would be: an in-tree build
    # leaves build/ behind, whose stale files a later wheel would ship.
    source = tmp_path / "src"
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listed:
        origin, copy = ROOT / name, source / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_file():
            shutil.copy2(origin, copy)
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("contreact-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "contreact",
        wheel.name.split("-py")[0] + ".dist-info",
    }
    for package in ("graph", "nodes", "tools", "checkpoints"):
        assert f"contreact/{package}/__init__.py" in names
        # The repository's own folder is what gets installed, file for file.
        ours = {p.name for p in (ROOT / "contreact" / package).glob("*.py")}
        assert ours <= {Path(n).name for n in names if n.startswith(f"contreact/{package}/")}
    # The schema's migrations ship whole: Alembic finds them in the installed package.
    migrations = ROOT / "contreact" / "checkpoints" / "migrations"
    shipped = {
        str(p.relative_to(ROOT))
        for p in (*migrations.glob("*.py"), *migrations.glob("versions/*.py"))
    } | {"contreact/checkpoints/migrations/script.py.mako"}
    assert shipped <= set(names)
    # Test machinery stays in tests/: the stub ships its server and the demo's scenario,
    # not the hostile-answer server or the scenarios only tests load.
    assert not [n for n in names if "fuzz" in n]
    assert [n for n in names if n.startswith("contreact/stub/scripts/")] == [
        "contreact/stub/scripts/demo.yaml"
    ]
    # The console works offline: its templates and the scripts it vendors ship with it.
    for folder in ("templates", "static"):
        ours = {p.name for p in (ROOT / "contreact" / "console" / folder).iterdir()}
        shipped = {Path(n).name for n in names if n.startswith(f"contreact/console/{folder}/")}
        assert ours and ours <= shipped, folder


def test_the_generic_names_are_not_importable_from_an_install() -> None:
    probe = (
        "import importlib.util as u; "
        "print([n for n in ('graph', 'nodes', 'tools', 'checkpoints') if u.find_spec(n)])"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd="/", timeout=60
    )
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def test_the_repository_tracks_no_symlinks() -> None:
    # Git for Windows checks links out as small text files, and tools that map import
    # paths to files cannot follow them: every file has one real location.
    staged = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line for line in staged if line.startswith("120000")] == []
