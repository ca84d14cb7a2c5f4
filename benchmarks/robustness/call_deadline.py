"""When a stream that drips one chunk a second is abandoned under `ollama.timeout_s: 3`.

A stream sending a chunk a second never trips a per-read timeout: without a deadline for the
whole call, a run with `timeout_s: 3` would take a 25-second answer. Figures: (g1) one model
call against that stream, from the request to the timeout error (target: the 3 s deadline,
within 0.5 s); (g2) a 1-cycle `contreact run` whose first answer drips (the attempt is
abandoned and retried: it completes); (g3) the same run when every attempt drips
(`retries: 2`: it fails with one line, printed here). Every answer goes over real HTTP to
the bundled stub, which drips 25 one-dot chunks a second apart
(`{"kind": "drip", "seconds": 1, "chunks": 25}`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    MODEL,
    Figure,
    StubProcess,
    bench_storage,
    child_env,
    constant_work_scenario,
    contreact_cmd,
    parser,
    report,
    run_config,
    write_yaml,
)

from contreact.stub import StubServer

TIMEOUT_S = 3
DRIP = {"kind": "drip", "seconds": 1, "chunks": 25}


def one_call() -> tuple[float, str]:
    """Seconds from the request to the timeout error, and the error's line."""
    from langchain_core.messages import HumanMessage

    from contreact.ollama.client import ModelCallError, chat_client, within_deadline

    with StubServer().start() as stub:
        stub.add_faults(DRIP)
        client = chat_client(MODEL, stub.url, TIMEOUT_S, "5m", None)
        started = time.monotonic()
        try:
            within_deadline(
                lambda: client.invoke([HumanMessage("Cycle 1 begins.")]),
                TIMEOUT_S,
                model=MODEL,
                host=stub.url,
            )
            line = "(no timeout: the 25-second answer was taken)"
        except ModelCallError as error:
            line = error.message
        return time.monotonic() - started, line


def one_run(
    tmp: Path, db_url: str | None, dripping_attempts: int
) -> tuple[float, int, str, list[str]]:
    """A 1-cycle run whose first `dripping_attempts` answers drip: seconds, exit, stderr, log."""
    scenario = {**constant_work_scenario(1), "faults": [{**DRIP, "times": dripping_attempts}]}
    with bench_storage(db_url) as where, StubProcess(scenario, tmp) as stub:
        ollama = {"timeout_s": TIMEOUT_S, "retries": 2, "retry_budget_s": 30}
        config = run_config("deadline", stub.url, 1, where, ollama=ollama)
        path = write_yaml(tmp / f"deadline-{dripping_attempts}.yaml", config)
        started = time.monotonic()
        done = subprocess.run(
            contreact_cmd(where, "run", str(path), "--quiet"),
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
            check=False,
        )
        elapsed = time.monotonic() - started
        log = where.data_dir / "logs" / "deadline.jsonl"
        events = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        said = []
        for e in events:
            if e["event_type"] == "LLM_INVOCATION":
                said += [f"retried {r['kind']}" for r in e["payload"].get("retries") or []]
            elif e["event_type"] == "ERROR":
                said.append(f"failed {e['payload']['kind']} after {e['payload']['attempts']}")
    return elapsed, done.returncode, done.stderr.strip(), said


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    call_s, call_line = one_call()
    print(f"one call: abandoned after {call_s:.2f} s: {call_line}")
    with tempfile.TemporaryDirectory(prefix="contreact-bench-deadline-") as tmp:
        ok_s, ok_code, ok_err, ok_retries = one_run(Path(tmp), args.db_url, 1)
        print(f"run, first answer drips: exit {ok_code} after {ok_s:.2f} s {ok_retries} {ok_err}")
        figures = [
            Figure("g1", "one call, 1 chunk/s, timeout_s 3", round(call_s, 2), "s", 3.5),
            Figure("g2", "run: drip once, retried, completes", round(ok_s, 2), "s", None),
        ]
        if not args.quick:
            bad_s, bad_code, bad_err, _ = one_run(Path(tmp), args.db_url, 3)
            print(f"run, every attempt drips: exit {bad_code} after {bad_s:.2f} s: {bad_err}")
            figures.append(Figure("g3", "run: every attempt drips, fails", round(bad_s, 2), "s"))
    report(figures, args.json)


if __name__ == "__main__":
    main()
