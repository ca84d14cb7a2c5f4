"""The operator inbox: every message an agent waits on, across the storage, and its reply.

A reply goes through the engine's one path (`engine.replies.post_reply`), the one
`contreact reply` takes: recorded once, keyed by the message, so of two browsers answering
at once one wins and the other is told. Then the run goes on by itself: a run of a study
goes back on the study's queue for its workers (`study_queue.requeue`); a run started
alone is resumed by the console, in a process of its own that outlives the page.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contreact.checkpoints.private_files import open_private, private_dir
from contreact.checkpoints.registry import RunNotFoundError
from contreact.checkpoints.storage import Storage
from contreact.console.context import console_of
from contreact.engine.inbox import pending_operator_messages
from contreact.engine.replies import AlreadyAnsweredError, post_reply
from contreact.errors import NotWaitingError
from contreact.studies.queue import requeue

REPLY_LIMIT = 100_000
"""The longest reply taken (characters): a reply is a message to an agent, not a file."""


def inbox(request: Request) -> Response:
    """The inbox page."""
    console = console_of(request)
    waiting = pending_operator_messages(console.storage)
    return console.page(
        request, "inbox.html", messages=waiting, empty=not waiting, stream="/stream/inbox"
    )


def inbox_update(request: Request) -> Response:
    """The messages that began to wait since the page's, and those that wait no longer.

    A message on the page is never drawn again: a reply being typed or sent stays as it is.
    """
    console = console_of(request)
    waiting = pending_operator_messages(console.storage)
    shown = [tuple(s.split(" ", 1)) for s in request.query_params.getlist("shown") if " " in s]
    keys = {(w.run_id, w.ask) for w in waiting}
    return console.page(
        request,
        "_inbox_update.html",
        messages=[w for w in waiting if (w.run_id, w.ask) not in shown],
        gone=[s for s in shown if s not in keys],
        empty=not waiting,
    )


def resume_alone(storage: Storage, run_id: str) -> int:
    """Resume `run_id` in a process of its own (the engine's run-process entry); its pid.

    The process gets the console's storage through the environment (the URL's password
    stays out of `ps`), writes what it prints to `console/RUN.out` in the data folder,
    and runs on when the console stops.
    """
    folder = private_dir(storage.data_dir / "console")
    log = folder / f"{run_id}.out"
    with open_private(log, "a"):
        pass
    env = {
        **os.environ,
        "CONTREACT_DB_URL": storage.url,
        "CONTREACT_HOME": str(storage.data_dir),
    }
    with log.open("a", encoding="utf-8") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "contreact.engine.child", run_id],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # Reaped when it ends, so no finished run process lingers as a zombie.
    threading.Thread(target=child.wait, name=f"resume-{run_id}", daemon=True).start()
    return child.pid


async def reply(request: Request) -> Response:
    """Answer one message (form: `run`, `ask`, `reply`); the run goes on by itself."""
    form = await request.form()
    run_id, ask, text = (str(form.get(k) or "") for k in ("run", "ask", "reply"))
    return await _answer(request, run_id, ask, text)


async def _answer(request: Request, run_id: str, ask: str, text: str) -> Response:
    from starlette.concurrency import run_in_threadpool

    console = console_of(request)

    def shown(outcome: str, status: int, message: str = "") -> Response:
        return console.page(
            request,
            "_reply_outcome.html",
            status=status,
            outcome=outcome,
            run_id=run_id,
            ask=ask,
            text=text,
            message=message,
        )

    if not text.strip():
        return shown("empty", 400)
    if "\x00" in text or len(text) > REPLY_LIMIT:
        return shown(
            "refused", 400, f"a reply holds no NUL character and at most {REPLY_LIMIT:,} characters"
        )
    try:
        await run_in_threadpool(post_reply, console.storage, run_id, text, ask=ask or None)
    except AlreadyAnsweredError:
        return shown("taken", 409)
    except (NotWaitingError, RunNotFoundError):
        return shown("gone", 409)
    if await run_in_threadpool(requeue, console.storage, run_id):
        return shown("queued", 200)
    try:
        pid = await run_in_threadpool(resume_alone, console.storage, run_id)
    except OSError as exc:
        # The reply is recorded: whichever drive comes next answers the agent with it.
        return shown("recorded", 200, f"`contreact resume {run_id}` goes on ({exc.strerror})")
    return shown("resumed", 200, str(pid))


ROUTES = [
    Route("/inbox", inbox),
    Route("/fragments/inbox", inbox_update),
    Route("/inbox/reply", reply, methods=["POST"]),
]
POSTS = ["/inbox/reply"]
