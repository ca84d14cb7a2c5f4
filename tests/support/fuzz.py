r"""A misbehaving Ollama: hostile answers, byte for byte, in front of the well-behaved stub.

contreact must survive whatever comes back from a model server: a proxy's HTML error
page, a JSON list where an object belongs, a stream cut mid-chunk or never finished, a
slow drip, and model output no storage layer expects (401-digit integers, NaN, lone
surrogates, NUL and escape sequences, 10,000-deep nesting, megabytes of text, thousands
of tool calls). The stub's fault queue (`contreact.stub.faults`) shapes errors, but
answers like these have to be written at the byte level, so they live here, in a small
HTTP server of their own that forwards every other request to a `StubServer`.

Case `i` (0-based) is served once, to the first model request of cycle `i + 1`; the
retries and every later request of that cycle go to the stub, so a run that stops on a
case and is resumed finds the server behaving. Each case says what it is expected to
be: `transient` (retried, the run goes on: a server error, a broken stream, an answer
the client cannot decode or validate), `permanent` (the run stops with one line, resume
completes it) or `content` (a model answer that must be stored and shown safely).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

from contreact.stub.ollama_api import ChatRequest
from contreact.stub.server import StubServer

__all__ = ["CASES", "CONTROLS", "Case", "FuzzServer", "answer_with_numbers"]

Expect = Literal["transient", "permanent", "content"]
Writer = Callable[["_Handler", str], None]

HUGE = "1" + "0" * 400
SERVER_NUMBER_FIELDS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)
"""The counts and durations of Ollama's final chunk (spelled out: the suite is the spec)."""
BAD_NUMBERS = {"401-digit": HUGE, "NaN": "NaN", "negative": "-5", "string": '"12"'}
"""Values no count or duration may be taken as, as raw JSON."""
DEEP = "[" * 10_000 + "]" * 10_000
CONTROLS = "".join(chr(c) for c in (*range(0x20), 0x7F))
"""Every control character, U+0000 to U+001F and U+007F: text PostgreSQL cannot store as it is
(NUL) and text a terminal must not get raw (the rest)."""
ESCAPES = r"\u001b]0;pwned\u0007\u001b[2J\u001b[31mred\u009b31m\r\u0000\u202e"


@dataclass(frozen=True)
class Case:
    """One hostile answer: its name, what contreact should make of it, and where it is from."""

    name: str
    expect: Expect
    source: str
    write: Writer
    dropped: tuple[str, ...] = ()
    """The server numbers its `LLM_INVOCATION` must name in `dropped_fields`."""


# --------------------------------------------------------------------------- byte writers


def _now() -> str:
    return "2026-01-01T00:00:00.000000Z"


def _chunk(model: str, message_json: str, *, done: bool = False, extra: str = "") -> bytes:
    """One NDJSON line of Ollama's /api/chat stream, with `message` given as raw JSON text."""
    tail = ',"done_reason":"stop","total_duration":1000,"prompt_eval_count":5,"eval_count":5'
    return (
        f'{{"model":{json.dumps(model)},"created_at":"{_now()}","message":{message_json},'
        f'"done":{"true" if done else "false"}{tail if done else ""}{extra}}}\n'
    ).encode()


def _text(content_json: str) -> str:
    return f'{{"role":"assistant","content":{content_json}}}'


def _calls(*calls: tuple[str, str]) -> str:
    """A message with native tool calls, each (name as JSON, arguments as raw JSON)."""
    items = ",".join(f'{{"function":{{"name":{n},"arguments":{a}}}}}' for n, a in calls)
    return f'{{"role":"assistant","content":"","tool_calls":[{items}]}}'


def _numbers_done(model: str, numbers: dict[str, str]) -> bytes:
    """A final chunk with these counts and durations (name -> raw JSON)."""
    fields = ",".join(f'"{name}":{raw}' for name, raw in numbers.items())
    return (
        f'{{"model":{json.dumps(model)},"created_at":"{_now()}",'
        f'"message":{{"role":"assistant","content":""}},"done":true,"done_reason":"stop",'
        f"{fields}}}\n"
    ).encode()


def answer_with_numbers(content: str, **numbers: str) -> Writer:
    """An answer of `content` whose final chunk carries `numbers` (name -> raw JSON)."""
    return _stream(lambda m: [_chunk(m, _text(json.dumps(content))), _numbers_done(m, numbers)])


def _done(model: str) -> bytes:
    return _chunk(model, _text('""'), done=True)


def _plain(
    status: int, body: bytes, content_type: str = "application/json", **headers: str
) -> Writer:
    def write(h: _Handler, model: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            h.send_header(key.replace("_", "-"), value)
        h.end_headers()
        h.wfile.write(body)

    return write


def _stream(
    parts: Callable[[str], Sequence[bytes]],
    *,
    drip_s: float = 0.0,
    content_type: str = "application/x-ndjson",
    finish: bool = True,
    hang_s: float = 0.0,
) -> Writer:
    """A chunked answer of `parts(model)`; optionally slow, unfinished or left hanging."""

    def write(h: _Handler, model: str) -> None:
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.close_connection = True
        try:
            for part in parts(model):
                h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                h.wfile.flush()
                if drip_s:
                    time.sleep(drip_s)
            if hang_s:
                time.sleep(hang_s)
            if finish:
                h.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client gave up on the answer (a deadline): nothing more to send

    return write


def _answer(message_json: str) -> Writer:
    return _stream(lambda m: [_chunk(m, message_json), _done(m)])


def _cut_mid_chunk(h: _Handler, model: str) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/x-ndjson")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    line = _chunk(model, _text('"half an answer that never'))
    h.wfile.write(b"%x\r\n%s" % (len(line) + 200, line))
    h.wfile.flush()
    h.abort()


def _drop_before_headers(h: _Handler, model: str) -> None:
    h.abort()


def _headers_then_close(h: _Handler, model: str) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/x-ndjson")
    h.send_header("Content-Length", "5000")
    h.end_headers()
    h.wfile.write(b'{"model":')
    h.wfile.flush()
    h.abort()


# An nginx 502 page and a Cloudflare-style 429 page, as proxies in front of Ollama send them.
NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
    b"Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n"
)
PROXY_429 = (
    b"<!DOCTYPE html><html><head><title>Too Many Requests</title></head><body>1015</body></html>"
)
PORTAL_200 = (
    b"<!DOCTYPE html><html><body><form action='/login'>Sign in to the Wi-Fi</form></body></html>"
)

CASES: tuple[Case, ...] = (
    # HTTP error shapes: 5xx and 429 are retried whatever their body.
    Case("500 object", "transient", "Ollama error body", _plain(500, b'{"error":"internal"}')),
    Case("500 list", "transient", "issue 16", _plain(500, b"[]")),
    Case("500 string", "transient", "proxy", _plain(500, b'"oops"')),
    Case("500 number", "transient", "proxy", _plain(500, b"42")),
    Case("500 null", "transient", "proxy", _plain(500, b"null")),
    Case("500 html", "transient", "proxy", _plain(500, b"<h1>500</h1>", "text/html")),
    Case("500 empty", "transient", "proxy", _plain(500, b"")),
    Case("502 nginx page", "transient", "nginx default page", _plain(502, NGINX_502, "text/html")),
    Case(
        "503 busy",
        "transient",
        "Ollama server busy",
        _plain(
            503, b'{"error":"server busy, please try again.  maximum pending requests exceeded"}'
        ),
    ),
    Case(
        "503 retry-after", "transient", "RFC 9110", _plain(503, b"", "text/plain", Retry_After="1")
    ),
    Case("504 empty", "transient", "gateway timeout", _plain(504, b"", "text/plain")),
    Case("429 object", "transient", "rate limit", _plain(429, b'{"error":"too many requests"}')),
    Case("429 html", "transient", "CDN page", _plain(429, PROXY_429, "text/html")),
    Case(
        "200 error line only",
        "transient",
        "Ollama mid-stream error",
        _plain(200, b'{"error":"model runner stopped"}\n'),
    ),
    # Streams that break.
    Case("stream cut mid-chunk", "transient", "dropped connection", _cut_mid_chunk),
    Case("connection dropped before headers", "transient", "server crash", _drop_before_headers),
    Case("headers then close", "transient", "server crash", _headers_then_close),
    Case(
        "error line mid-stream",
        "transient",
        "Ollama runner crash",
        _stream(
            lambda m: [
                _chunk(m, _text('"Hel"')),
                b'{"error":"an error was encountered while running the model"}\n',
            ]
        ),
    ),
    Case(
        "stream never sends done (closed)",
        "transient",
        "server restart",
        _stream(lambda m: [_chunk(m, _text('"Reflection: cut short"'))]),
    ),
    Case(
        "stream never sends done (hangs)",
        "transient",
        "stuck runner",
        _stream(lambda m: [_chunk(m, _text('"Reflection: stuck"'))], hang_s=4.0, finish=False),
    ),
    Case(
        "non-JSON chunk",
        "transient",
        "corrupting proxy",
        _stream(lambda m: [_chunk(m, _text('"Reflection: "')), b"<<garbage>>\n", _done(m)]),
    ),
    Case(
        "non-object chunk",
        "transient",
        "corrupting proxy",
        _stream(lambda m: [_chunk(m, _text('"Reflection: "')), b"[1,2,3]\n", _done(m)]),
    ),
    Case("200 html page", "transient", "captive portal", _plain(200, PORTAL_200, "text/html")),
    Case("200 list body", "transient", "proxy", _plain(200, b"[]")),
    Case("200 empty body", "content", "load-only answer", _plain(200, b"")),
    Case(
        "invalid UTF-8 chunk",
        "content",
        "corrupting proxy (decoded with replacement)",
        _stream(
            lambda m: [
                b'{"model":"\xff\xfe","message":{"role":"assistant","content":"x"},"done":false}\n',
                _done(m),
            ]
        ),
    ),
    # Permanent errors: one clear line, then resume completes the run.
    Case("400 list", "permanent", "issue 16", _plain(400, b"[]")),
    Case("400 html", "permanent", "proxy", _plain(400, b"<h1>Bad Request</h1>", "text/html")),
    Case("401 unauthorized", "permanent", "auth proxy", _plain(401, b'{"error":"unauthorized"}')),
    Case("404 html", "permanent", "proxy", _plain(404, b"<h1>404 Not Found</h1>", "text/html")),
    Case(
        "413 too large",
        "permanent",
        "proxy",
        _plain(413, b"request entity too large", "text/plain"),
    ),
    # Answers that are well-formed HTTP but odd.
    Case(
        "wrong content-type",
        "content",
        "misconfigured proxy",
        _stream(
            lambda m: [_chunk(m, _text('"Reflection: served as text/plain"')), _done(m)],
            content_type="text/plain",
        ),
    ),
    Case(
        "slow drip",
        "content",
        "overloaded CPU model",
        _stream(
            lambda m: [*(_chunk(m, _text(json.dumps(c))) for c in "Reflection: drip"), _done(m)],
            drip_s=0.1,
        ),
    ),
    Case(
        "slow drip past the deadline",
        "transient",
        "issue 31: a model stuck repeating itself behind a slow link",
        _stream(lambda m: [*(_chunk(m, _text('"."')) for _ in range(8)), _done(m)], drip_s=1.0),
    ),
    Case(
        "garbage token counts",
        "content",
        "server bug",
        _stream(
            lambda m: [
                _chunk(m, _text('"Reflection: counts"')),
                b'{"model":"x","created_at":"%s","message":{"role":"assistant","content":""},"done":true,'
                b'"done_reason":"stop","prompt_eval_count":-5,"eval_count":1e400}\n'
                % _now().encode(),
            ]
        ),
        dropped=("eval_count", "prompt_eval_count"),
    ),
    # Every count and duration of the final chunk at once, with one kind of bad value:
    # recorded as absent and named on the LLM_INVOCATION, never retried or computed with.
    *(
        Case(
            f"final chunk: {label} counts and durations",
            "content",
            "issue 31",
            answer_with_numbers(
                f"Reflection: {label} numbers", **dict.fromkeys(SERVER_NUMBER_FIELDS, raw)
            ),
            dropped=tuple(sorted(SERVER_NUMBER_FIELDS)),
        )
        for label, raw in BAD_NUMBERS.items()
    ),
    Case(
        "done_reason length, empty",
        "content",
        "num_predict hit",
        _stream(lambda m: [_chunk(m, _text('""'), done=True, extra="")]),
    ),
    # Hostile content: stored losslessly (as text where it must be), shown escaped.
    Case(
        "content: 401-digit integer call",
        "content",
        "issue 16",
        _answer(_text(json.dumps(f'{{"name": "nope", "arguments": {{"n": {HUGE}}}}}'))),
    ),
    Case(
        "args: 401-digit integer",
        "content",
        "issue 16",
        _answer(_calls(('"write"', f'{{"key":"big","value":{HUGE}}}'))),
    ),
    Case(
        "args: NaN",
        "content",
        "Python json.dumps",
        _answer(_calls(('"write"', '{"key":"nan","value":NaN}'))),
    ),
    Case(
        "args: -Infinity",
        "content",
        "Python json.dumps",
        _answer(_calls(('"write"', '{"key":"inf","value":-Infinity}'))),
    ),
    Case(
        "content: lone surrogate",
        "transient",
        "broken UTF-16",
        _answer(_text('"Reflection: a\\ud800b"')),
    ),
    Case(
        "args: lone surrogate key",
        "content",
        "broken UTF-16",
        _answer(_calls(('"write"', '{"key":"k\\udc00","value":"v"}'))),
    ),
    Case(
        "content: NUL and controls",
        "content",
        "binary output",
        _answer(_text('"Reflection: \\u0000\\u0001\\u0008\\u007f end"')),
    ),
    Case(
        "content: every control character",
        "content",
        "binary output",
        _answer(_text(json.dumps(f"Reflection: <{CONTROLS}> end"))),
    ),
    Case(
        "args: every control character",
        "content",
        "binary output",
        _answer(_calls(('"write"', json.dumps({"key": f"k{CONTROLS}", "value": CONTROLS})))),
    ),
    Case(
        "content: escape sequences",
        "content",
        "terminal injection",
        _answer(_text(f'"Reflection: {ESCAPES}"')),
    ),
    Case(
        "args: escape sequences",
        "content",
        "terminal injection",
        _answer(_calls(('"write"', f'{{"key":"{ESCAPES}","value":"{ESCAPES}"}}'))),
    ),
    Case(
        "args: 10,000-deep nesting",
        "transient",
        "issue 16",
        _answer(_calls(('"write"', f'{{"key":"deep","value":{DEEP}}}'))),
    ),
    Case(
        "content: 10,000-deep nesting",
        "content",
        "issue 16",
        _answer(
            _text(json.dumps(f'{{"name": "write", "arguments": {{"key": "d", "value": {DEEP}}}}}'))
        ),
    ),
    Case(
        "content: 4 MB text",
        "content",
        "runaway generation",
        _stream(
            lambda m: [
                *(_chunk(m, _text(json.dumps("Reflection " * 40_000))) for _ in range(10)),
                _done(m),
            ]
        ),
    ),
    Case(
        "3,000 tool calls",
        "content",
        "looping model",
        _answer(_calls(*[('"write"', f'{{"key":"k{i}","value":"v"}}') for i in range(3000)])),
    ),
    Case(
        "tool name hostile",
        "content",
        "terminal injection",
        _answer(_calls((json.dumps("wr\x1b[2Jite" + "x" * 5000), '{"key":"a"}'))),
    ),
    Case(
        "args: list, not object",
        "transient",
        "malformed call",
        _answer(_calls(('"write"', "[1,2,3]"))),
    ),
    Case(
        "content: null",
        "transient",
        "malformed message",
        _answer('{"role":"assistant","content":null}'),
    ),
    Case(
        "content: number",
        "transient",
        "malformed message",
        _answer('{"role":"assistant","content":42}'),
    ),
    Case(
        "thinking: hostile",
        "content",
        "reasoning model",
        _answer(
            '{"role":"assistant","content":"Reflection: thought",'
            f'"thinking":"{ESCAPES}{"z" * 100_000}"}}'
        ),
    ),
)


# --------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ollama-fuzz"

    @property
    def fuzz(self) -> FuzzServer:
        return cast(_Server, self.server).fuzz

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read what the server served, not its log."""

    def abort(self) -> None:
        """Close the connection without finishing the answer."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _forward(self, method: str, body: bytes | None) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.fuzz.inner.port, timeout=120)
        try:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            conn.request(method, self.path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(data)
        finally:
            conn.close()

    def do_GET(self) -> None:
        self._forward("GET", None)

    def do_HEAD(self) -> None:
        self._forward("HEAD", None)

    def do_DELETE(self) -> None:
        self._forward("DELETE", None)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        case = self.fuzz.case_for(self.path, body)
        if case is None:
            self._forward("POST", body)
            return
        try:
            data = json.loads(body)
            model = str(data.get("model", "stub-model"))
        except ValueError:
            model = "stub-model"
        case.write(self, model)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fuzz: FuzzServer) -> None:
        self.fuzz = fuzz
        super().__init__(("127.0.0.1", 0), _Handler)


class FuzzServer:
    """Serves `cases[i]` once to cycle i+1's first model request; forwards the rest to `inner`."""

    def __init__(self, cases: Sequence[Case], inner: StubServer) -> None:
        self.cases = list(cases)
        self.inner = inner
        self.served: list[str] = []
        self._done: set[int] = set()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def case_for(self, path: str, body: bytes) -> Case | None:
        """The case this request gets, if any (each case once, on its cycle's first call)."""
        if path != "/api/chat":
            return None
        try:
            request = ChatRequest.from_body(json.loads(body))
        except (ValueError, AttributeError):
            return None
        index = request.cycle - 1
        if request.step != 0 or not 0 <= index < len(self.cases):
            return None
        with self._lock:
            if index in self._done:
                return None
            self._done.add(index)
            self.served.append(self.cases[index].name)
        return self.cases[index]

    @property
    def url(self) -> str:
        """The base URL to give contreact as its Ollama host."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FuzzServer:
        """Start serving in a daemon thread (the inner stub must already be started)."""
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FuzzServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
