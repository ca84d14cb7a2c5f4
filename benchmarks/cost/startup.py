"""How long the `contreact` command takes to answer (median of 10 each).

Figures: `contreact --help`, `contreact list` and `contreact status RUN` from process
start to exit (targets < 0.35 s), and `contreact run CONFIG` from process start to its
first line of output (target < 0.5 s). Each is a fresh `python -m contreact` process, as
a person at a shell starts it, on a data directory holding one finished run (made
first, by `contreact demo`); `run` runs against the stub in a child process.

Start-up is mostly imports, so the script also prints the biggest imports of `list`
(`python -X importtime`): what would have to go for it to start faster. Timings are wall
clock: load on the machine inflates them (the load average is printed with them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    Figure,
    StubProcess,
    bench_storage,
    child_env,
    contreact_cmd,
    median,
    parser,
    print_table,
    report,
    run_config,
    write_yaml,
)

RUN = "startup-run"


CPU: dict[str, list[float]] = {}
"""CPU seconds (user + system) of each timed process, by command: unlike wall-clock time,
hardly inflated by other load on the machine."""


def _time_exit(name: str, cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    _, _, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    proc.returncode = 0  # reaped by wait4
    CPU.setdefault(name, []).append(usage.ru_utime + usage.ru_stime)
    return took


def _time_first_line(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env()
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    took = time.perf_counter() - start
    proc.communicate()
    if not first:
        raise RuntimeError(f"`{' '.join(cmd)}` printed nothing")
    return took


def biggest_imports(cmd: list[str], count: int = 8) -> list[tuple[str, float]]:
    """The top-level imports of `cmd` with the most cumulative time (seconds)."""
    env = {**child_env(), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found: list[tuple[str, float]] = []
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if match:  # a module imported by the program itself, not by another module
            found.append((match.group(2), int(match.group(1)) / 1e6))
    return sorted(found, key=lambda f: -f[1])[:count]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10, help="runs per command (default 10)")
    args = p.parse_args()
    repeat = 3 if args.quick else args.repeat
    load_before = os.getloadavg()[0]
    with bench_storage(args.db_url, "contreact-bench-startup-") as where:
        subprocess.run(
            contreact_cmd(where, "demo", "--cycles", "1", "--run-id", RUN, "--quiet"),
            check=True,
            stdout=subprocess.DEVNULL,
            env=child_env(),
        )
        commands = {
            "--help": contreact_cmd(where, "--help"),
            "list": contreact_cmd(where, "list"),
            "status RUN": contreact_cmd(where, "status", RUN),
        }
        samples = {
            name: [_time_exit(name, cmd) for _ in range(repeat)] for name, cmd in commands.items()
        }
        tmp = Path(where.data_dir).parent
        with StubProcess({"agent": "simulated"}, tmp) as stub:
            configs = [
                write_yaml(tmp / f"r{i}.yaml", run_config(f"first-{i}", stub.url, 1, where))
                for i in range(repeat)
            ]
            run_cmds = [contreact_cmd(where, "run", str(c)) for c in configs]
            samples["run (first line)"] = [_time_first_line(cmd) for cmd in run_cmds]
        imports = biggest_imports(commands["list"])
    load_after = os.getloadavg()[0]
    print_table(
        ["command", "median s", "min s", "max s", "median CPU s"],
        [
            [name, median(s), min(s), max(s), median(CPU[name]) if name in CPU else "-"]
            for name, s in samples.items()
        ],
        title=f"contreact start-up, {repeat} runs each; {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before, {load_after:.1f} after",
    )
    print_table(
        ["module", "cumulative s"],
        [[name, seconds] for name, seconds in imports],
        title="Biggest imports of `contreact list` (python -X importtime)",
    )
    targets = {"--help": 0.35, "list": 0.35, "status RUN": 0.35, "run (first line)": 0.5}
    report(
        [
            Figure(f"s{i}", f"`contreact {name}` start-up (median)", median(s), "s", targets[name])
            for i, (name, s) in enumerate(samples.items(), start=1)
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
