"""`contreact stub`: the bundled Ollama-compatible stub server, for trying contreact without Ollama.

It serves the models the README's real-Ollama quickstart uses (`examples/explorer.yaml`'s
`llama3.1:8b`) besides the demo's `stub-model`, on Ollama's own port by default, so the
quickstart's commands run word for word against it (or with `--host URL` /
`OLLAMA_HOST=URL` on another port). The answers come from the stub's deterministic
simulated agent, not a language model.

A thin wrapper over `python -m contreact.stub` (`contreact.stub.__main__`): the same
server, options and `STUB READY URL` line. `--model` serves a real small GGUF model
instead (`contreact.stub.real`, the `real` extra).
"""

from __future__ import annotations

from typing import Annotated

import typer

from contreact.cli.app import command, out

OLLAMA_PORT = 11434
QUICKSTART_MODELS = "llama3.1:8b,stub-model"
"""The example config's model (README quickstart) and the demo's."""


@command(touches_runs=False)
def stub(
    port: Annotated[
        int, typer.Option(help="Port (Ollama's 11434 by default; 0 picks a free one).")
    ] = OLLAMA_PORT,
    models: Annotated[
        str, typer.Option(help="Comma-separated chat model names to serve.")
    ] = QUICKSTART_MODELS,
    bind: Annotated[str, typer.Option("--bind", help="Interface to listen on.")] = "127.0.0.1",
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", help="Delay added to every chat answer.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the simulated agent.")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Serve a real GGUF model instead: gemma3:270m, smollm2:135m or a .gguf path "
            "(needs the `real` extra; see the README).",
        ),
    ] = None,
) -> None:
    """Serve the bundled Ollama stub (no Ollama needed) until Ctrl-C; prints `STUB READY URL`."""
    from contreact.stub.__main__ import main as serve

    if model is not None:
        out.print(
            f"Real model {model} (llama.cpp, CPU) behind the stub's Ollama API at "
            f"http://{bind}:{port or '<port below>'}. Ctrl-C stops it.",
            markup=False,
        )
        raise typer.Exit(serve(["--host", bind, "--port", str(port), "--real-model", model]))
    argv = ["--host", bind, "--port", str(port), "--models", models]
    if latency_ms is not None:
        argv += ["--latency-ms", str(latency_ms)]
    if seed is not None:
        argv += ["--seed", str(seed)]
    where = f"http://{bind}:{port}" if port else f"http://{bind}:<port below>"
    out.print(
        f"Ollama-compatible stub (a simulated agent, not a language model) serving {models} "
        f"at {where}. Point contreact at it with --host URL or OLLAMA_HOST=URL "
        "(on port 11434 nothing is needed). Ctrl-C stops it.",
        markup=False,
    )
    raise typer.Exit(serve(argv))
