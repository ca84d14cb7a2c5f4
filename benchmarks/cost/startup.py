"""How long the `contreact` command takes to answer, cold (median of 5 each).

Figures: `contreact --help`, `contreact list`, `contreact status RUN` and `contreact show
RUN` from process start to exit (targets < 0.35 s for the first three), `contreact resume
RUN --cycles 1` from start to exit, and `contreact run CONFIG` from start to its first line
of output (target < 0.5 s). Each is a fresh `python -m contreact` process, as a person at a
shell starts it (cold: nothing is imported or kept between commands), on a data directory
holding one finished run; `resume` runs on a fresh copy of that run each time, so every
resume does the same cycle, against the stub in a child process (the constant-work script).
Wall and CPU seconds (user + system) of each process are printed; CPU seconds are what
other load on the machine inflates least, so they are the figures to compare on a busy
machine.

`--python PY` measures the `contreact` another interpreter imports (another checkout's
virtual environment), in a folder of its own so that this checkout is not on its path.
Given twice, both are measured in turns, the order alternating from round to round, so
both see the same machine: the way to compare a change with the code before it.

Start-up is mostly imports, so the script also prints the biggest imports of `list`
(`python -X importtime`): what would have to go for it to start faster.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    PYTHON,
    BenchStorage,
    Figure,
    StubProcess,
    bench_storage,
    child_env,
    constant_work_scenario,
    median,
    parser,
    print_table,
    report,
    run_config,
    write_yaml,
)
from long_run import a_copy

RUN = "startup-run"
TO_EXIT = ("--help", "list", "status RUN", "show RUN", "resume RUN --cycles 1")
"""The commands timed from process start to exit."""
FIRST_LINE = "run (first line)"
TARGETS = {"--help": 0.35, "list": 0.35, "status RUN": 0.35, FIRST_LINE: 0.5}


@dataclass
class Side:
    """One interpreter's `contreact`: where it is, its storage and what it measured."""

    python: str
    where: BenchStorage
    scratch: BenchStorage
    """Where the timed `run`s go, so that the finished run stays alone in `where`."""
    workdir: Path
    """The processes' working folder: no checkout of contreact is on their path."""
    package: str = ""
    wall: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def cmd(self, where: BenchStorage, *args: str) -> list[str]:
        """`python -m contreact` of this side, on `where`."""
        return [self.python, "-m", "contreact", *where.cli_args(), *args]

    def run(self, cmd: list[str]) -> str:
        """Run `cmd` untimed in the working folder; its output (it must succeed)."""
        done = subprocess.run(
            cmd, cwd=self.workdir, env=child_env(), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` exited {done.returncode}: {done.stderr}")
        return done.stdout

    def time_exit(self, name: str, cmd: list[str]) -> None:
        """Time `cmd` from start to exit: wall and CPU seconds."""
        with (self.workdir / "stderr.txt").open("w+") as errors:
            start = time.perf_counter()
            proc = subprocess.Popen(
                cmd, cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=errors, env=child_env()
            )
            _, status, usage = os.wait4(proc.pid, 0)
            took = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                errors.seek(0)
                raise RuntimeError(
                    f"`{' '.join(cmd[2:])}` exited {proc.returncode}: {errors.read()}"
                )
        self.wall.setdefault(name, []).append(took)
        self.cpu.setdefault(name, []).append(usage.ru_utime + usage.ru_stime)

    def time_first_line(self, cmd: list[str]) -> None:
        """Time `cmd` from start to its first line on stdout."""
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=self.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_env(),
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        took = time.perf_counter() - start
        proc.communicate()
        if not first:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` printed nothing")
        self.wall.setdefault(FIRST_LINE, []).append(took)


def prepare(side: Side, host: str) -> None:
    """Note which contreact the side imports, and make its finished run."""
    side.package = side.run(
        [side.python, "-c", "import contreact; print(contreact.__file__)"]
    ).strip()
    config = write_yaml(side.workdir / "finished.yaml", run_config(RUN, host, 1, side.where))
    side.run(side.cmd(side.where, "run", str(config), "-q"))


def one_round(side: Side, host: str, n: int) -> None:
    """Every command once, cold; `resume` on a fresh copy of the finished run."""
    for name in TO_EXIT:
        if name.startswith("resume"):
            with a_copy(side.where, side.workdir) as copy:
                side.time_exit(name, side.cmd(copy, "resume", RUN, "--cycles", "1"))
        else:
            args = [RUN if word == "RUN" else word for word in name.split()]
            side.time_exit(name, side.cmd(side.where, *args))
    config = write_yaml(
        side.workdir / f"first-{n}.yaml", run_config(f"first-{n}", host, 1, side.scratch)
    )
    side.time_first_line(side.cmd(side.scratch, "run", str(config)))


def biggest_imports(side: Side, count: int = 8) -> list[tuple[str, float]]:
    """The top-level imports of `list` with the most cumulative time (seconds)."""
    env = {**child_env(), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run(
        side.cmd(side.where, "list"),
        cwd=side.workdir,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    found: list[tuple[str, float]] = []
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if match:  # a module imported by the program itself, not by another module
            found.append((match.group(2), int(match.group(1)) / 1e6))
    return sorted(found, key=lambda f: -f[1])[:count]


def label(side: Side) -> str:
    """The checkout a side measures (the folder that holds its `contreact` package)."""
    return str(Path(side.package).parent.parent)


def show(sides: list[Side], repeat: int, load: tuple[float, float]) -> list[Figure]:
    """Print each side's table and, for two sides, the second's CPU over the first's."""
    for side in sides:
        print_table(
            ["command", "median s", "min s", "max s", "median CPU s"],
            [
                [
                    name,
                    median(s),
                    min(s),
                    max(s),
                    median(side.cpu[name]) if side.cpu.get(name) else "-",
                ]
                for name, s in side.wall.items()
            ],
            title=f"contreact start-up, cold, {repeat} runs each: {label(side)} "
            f"({side.python}); {os.cpu_count()} CPUs, load average {load[0]:.1f} before, "
            f"{load[1]:.1f} after",
        )
        print_table(
            ["module", "cumulative s"],
            [[name, seconds] for name, seconds in biggest_imports(side)],
            title=f"Biggest imports of `contreact list`, {label(side)} (python -X importtime)",
        )
    figures = []
    for n, side in enumerate(sides):
        tag = "" if len(sides) == 1 else chr(ord("a") + n)
        where = "" if len(sides) == 1 else f", {label(side)}"
        for i, (name, s) in enumerate(side.wall.items(), start=1):
            figures.append(
                Figure(
                    f"s{i}{tag}",
                    f"`contreact {name}` start-up (median{where})",
                    median(s),
                    "s",
                    TARGETS.get(name),
                    note=f"{median(side.cpu[name]):.2f} CPU-s" if side.cpu.get(name) else "",
                )
            )
    if len(sides) == 2:
        before, after = sides
        print_table(
            ["command", "CPU s before", "CPU s after", "after/before", "wall after/before"],
            [
                [
                    name,
                    median(before.cpu[name]),
                    median(after.cpu[name]),
                    median(after.cpu[name]) / median(before.cpu[name]),
                    median(after.wall[name]) / median(before.wall[name]),
                ]
                for name in TO_EXIT
            ],
            title=f"before: {label(before)}, after: {label(after)} (medians, taken in turns)",
        )
    return figures


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    p.add_argument(
        "--python",
        action="append",
        metavar="PY",
        help="the interpreter whose contreact to measure (default: this one); twice: "
        "both, in turns, the first as before and the second as after",
    )
    args = p.parse_args()
    repeat = 3 if args.quick else args.repeat
    # Absolute (the processes run in a folder of their own), not resolved (a venv's python
    # is a link to the system's, and only the link's place makes it the venv's).
    pythons = [os.path.abspath(py) for py in args.python or [PYTHON]]
    load_before = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        workdir = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="contreact-startup-"))
        )
        stub = stack.enter_context(StubProcess(constant_work_scenario(1000), workdir))
        sides = []
        for n, python in enumerate(pythons):
            folder = workdir / f"side-{n}"
            folder.mkdir()
            where = stack.enter_context(bench_storage(args.db_url, "contreact-startup-"))
            scratch = stack.enter_context(bench_storage(args.db_url, "contreact-startup-"))
            side = Side(python, where, scratch, folder)
            prepare(side, stub.url)
            print(f"measuring {label(side)} with {python}", flush=True)
            sides.append(side)
        for n in range(repeat):
            for side in sides if n % 2 == 0 else sides[::-1]:
                one_round(side, stub.url, n)
        figures = show(sides, repeat, (load_before, os.getloadavg()[0]))
    report(figures, args.json)


if __name__ == "__main__":
    main()
