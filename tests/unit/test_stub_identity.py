"""The stub says it is the stub: a run's record can never pass it off as a real Ollama.

`/api/version` keeps an Ollama version (clients parse it) and adds `contreact_stub`; a
scripted model's digest starts with `stub:`; the real backend (a GGUF in llama.cpp)
reports the file's SHA-256, which is what a real-model run's provenance records. The real
tier (tests/real) checks that digest with the shipped models; here the digest path runs on a
fake GGUF file and a stand-in for llama-cpp-python, which is not built in this tier.
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from contreact import __version__
from contreact.stub import StubServer
from contreact.stub import real as real_backend
from contreact.stub.model_cards import STUB_DIGEST_PREFIX


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def test_version_names_the_stub_and_keeps_an_ollama_version(stub: StubServer) -> None:
    body = httpx.get(f"{stub.url}/api/version", timeout=5).json()
    assert body == {"version": "0.12.6", "contreact_stub": __version__}
    # Ollama's own client still reads it.
    assert ollama.Client(host=stub.url, timeout=5).ps().models == []


def test_scripted_models_digests_are_marked_as_the_stubs(stub: StubServer) -> None:
    tags = httpx.get(f"{stub.url}/api/tags", timeout=5).json()["models"]
    show = httpx.post(f"{stub.url}/api/show", json={"model": "stub-model"}, timeout=5).json()
    listed = {m["name"]: m["digest"] for m in tags}
    assert all(d.startswith(STUB_DIGEST_PREFIX) for d in listed.values())
    assert show["digest"] == listed["stub-model:latest"]
    # Stable per name, different between names.
    assert listed["stub-model:latest"] != listed["stub-embed:latest"]
    assert listed["stub-model:latest"] == (
        STUB_DIGEST_PREFIX + hashlib.sha256(b"stub-model:latest").hexdigest()
    )


class _FakeLlama:
    """Stands in for `llama_cpp.Llama` reading a GGUF's metadata (no weights are run)."""

    def __init__(self, model_path: str, n_ctx: int, **_: Any) -> None:
        self.model_path = model_path
        self.metadata = {"general.architecture": "llama", "general.file_type": "15"}
        self._model = types.SimpleNamespace(
            n_params=lambda: 135_000_000, n_ctx_train=lambda: 8192, n_embd=lambda: 576
        )

    def close(self) -> None:
        pass


def test_the_real_backend_reports_the_gguf_files_sha256_as_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "tiny-model.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 4099)  # > one 1 MiB read
    expected = hashlib.sha256(gguf.read_bytes()).hexdigest()
    monkeypatch.setattr(real_backend, "_llama_cpp", lambda: types.SimpleNamespace(Llama=_FakeLlama))
    assert real_backend.gguf_digest(gguf) == expected
    with real_backend.build_real_server(str(gguf)).start() as server:
        tags = httpx.get(f"{server.url}/api/tags", timeout=5).json()["models"]
        show = httpx.post(f"{server.url}/api/show", json={"model": "tiny-model"}, timeout=5)
    assert [m["digest"] for m in tags] == [expected]
    assert show.json()["digest"] == expected
    assert show.json()["details"]["quantization_level"] == "Q4_K_M"
