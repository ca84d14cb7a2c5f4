"""`contreact doctor` against the stub: what passes, what fails and says what to do."""

from __future__ import annotations

import re

import yaml

from contreact import __version__
from contreact.config.files import load_config
from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_in_process
from support.paths import ROOT


def test_doctor_passes_and_fails_with_advice(sqlite_backend: Backend) -> None:
    with StubServer(models=["stub-model"]).start() as server:
        server.add_model("prose-only", capabilities=["completion"])
        good = cli(sqlite_backend, "doctor", "--model", "stub-model", "--host", server.url)
        missing = cli(sqlite_backend, "doctor", "--model", "llama3.1:8b", "--host", server.url)
        prose = cli(sqlite_backend, "doctor", "--model", "prose-only", "--host", server.url)
        # The form OLLAMA_HOST usually takes: no scheme (doctor reads it as run does).
        bare = cli(sqlite_backend, "doctor", "--model", "stub-model", "--host", f":{server.port}")
        url = server.url
    assert good.returncode == 0, good.stdout
    # The bundled stub is named as such, never passed off as an Ollama server.
    assert f"contreact stub {__version__} (speaking Ollama 0.12.6) at {url}" in good.stdout
    assert "native tool calls (`tools: auto`)" in good.stdout
    # The similarity method in force: lexical without an embedding model.
    assert "lexical-char-tfidf" in good.stdout and "moderate > 0.26" in good.stdout
    assert missing.returncode == 1 and "ollama pull llama3.1:8b" in missing.stdout
    # A model without tool support runs in text-tool mode: doctor says so and passes.
    assert prose.returncode == 0, prose.stdout
    assert "will use text-tool mode" in prose.stdout
    assert bare.returncode == 0, bare.stdout
    down = cli(sqlite_backend, "doctor", "--host", "http://127.0.0.1:9")
    assert down.returncode == 1 and "cannot reach Ollama" in down.stdout


THRESHOLD_KEYS = {
    "lexical-char-tfidf": ("lexical_moderate", "lexical_high"),
    "embedding": ("moderate", "high"),
}


def test_the_example_config_shows_the_similarity_thresholds_doctor_applies(
    sqlite_backend: Backend,
) -> None:
    example = ROOT / "examples" / "explorer.yaml"
    written = yaml.safe_load(example.read_text(encoding="utf-8"))["similarity"]
    with StubServer(models=["llama3.1:8b"]).start() as server:
        checked = cli_in_process(sqlite_backend, "doctor", str(example), "--host", server.url)
    assert checked.returncode == 0, checked.stdout
    line = next(ln for ln in checked.stdout.splitlines() if "similarity" in ln)
    found = re.search(r"similarity\s+(\S+?)[: ].*moderate > ([\d.]+), high > ([\d.]+)", line)
    assert found is not None, line
    method, moderate, high = found.group(1), float(found.group(2)), float(found.group(3))
    keys = THRESHOLD_KEYS[method]
    # The thresholds in force are written in the example, as doctor states them...
    assert (written.get(keys[0]), written.get(keys[1])) == (moderate, high), (written, line)
    # ...and as the config resolves them.
    settings = load_config(example).similarity
    assert (getattr(settings, keys[0]), getattr(settings, keys[1])) == (moderate, high)
