"""Run the stub server as a process: ``python -m contreact.stub``.

Subprocess users (crash tests that ``kill -9`` the engine, benchmarks, a developer
poking at the API with curl) need the server outside their own interpreter. The
process prints exactly one line, ``STUB READY http://HOST:PORT``, once it is listening,
so a parent can read the URL (with ``--port 0`` the port is only known then); it
serves until SIGTERM or SIGINT and exits 0.

``--real-model gemma3:270m|smollm2:135m|PATH.gguf`` serves a real model instead of an
agent (:mod:`contreact.stub.real`, needs the ``real`` extra).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from contreact.stub.agents import LooperAgent, SimulatedAgent
from contreact.stub.foreground import serve_until_signal
from contreact.stub.server import StubServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m contreact.stub",
        description="Ollama-compatible stub server for contreact demos, tests and benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind")
    parser.add_argument("--port", type=int, default=0, help="port (0 = pick a free one)")
    parser.add_argument(
        "--scenario", help="scenario YAML file or bundled name (e.g. demo); default: simulated"
    )
    parser.add_argument("--agent", choices=["simulated", "looper"], help="override the agent")
    parser.add_argument("--seed", type=int, help="seed for the simulated agent")
    parser.add_argument("--models", help="comma-separated chat model names")
    parser.add_argument("--embedding-models", help="comma-separated embedding model names")
    parser.add_argument("--latency-ms", type=float, help="delay added to every chat request")
    parser.add_argument("--record", help="append every request as a JSON line to this file")
    parser.add_argument(
        "--real-model",
        metavar="MODEL",
        help="serve a real GGUF model: gemma3:270m, smollm2:135m or a path (extra 'real')",
    )
    return parser


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_server(args: argparse.Namespace) -> StubServer:
    """Create (not start) the server the command line describes.

    Args:
        args: Parsed command-line arguments.

    Returns:
        The configured server.
    """
    overrides: dict[str, Any] = {"host": args.host, "port": args.port}
    if args.models:
        overrides["models"] = _names(args.models)
    if args.embedding_models:
        overrides["embedding_models"] = _names(args.embedding_models)
    if args.latency_ms is not None:
        overrides["latency_ms"] = args.latency_ms
    if args.record:
        overrides["record"] = args.record
    if args.agent == "looper":
        overrides["agent"] = LooperAgent()
    elif args.agent == "simulated" or args.seed is not None:
        overrides["agent"] = SimulatedAgent(seed=args.seed or 0)
    if args.scenario:
        return StubServer.from_scenario(args.scenario, **overrides)
    agent = overrides.pop("agent", None)
    return StubServer(agent, **overrides)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        0 on a signal-initiated shutdown, 2 on bad arguments or a bad scenario.
    """
    args = _parser().parse_args(argv)
    if args.real_model:
        from contreact.stub.real import serve_real

        return serve_real(args.real_model, host=args.host, port=args.port, record=args.record)
    try:
        server = build_server(args)
        server.start()
    except (OSError, ValueError) as exc:
        print(f"stub: {exc}", file=sys.stderr)
        return 2
    return serve_until_signal(server)


if __name__ == "__main__":
    sys.exit(main())
