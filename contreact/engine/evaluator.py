"""The model call a PEI evaluation needs, made on behalf of `contreact.analysis.pei`.

Analysis reads runs and never drives them (docs/architecture.md): the PEI module builds the
question (the rated history and the instrument) and the face passes this function in to
send it, through the same ChatOllama client, retry policy and error classification as a
run's `invoke` node, with no tools and no thinking requested.
"""

from __future__ import annotations

from contreact.analysis.pei.evaluation import EvaluatorError, Question
from contreact.ollama.client import (
    ModelCallError,
    RetryPolicy,
    chat_client,
    classify,
    with_retries,
    within_deadline,
)


def ask_evaluator(question: Question, *, retries: int = 2, keep_alive: str = "5m") -> str:
    """Send `question` to its evaluator model and return the answer's text.

    Raises:
        EvaluatorError: The model gave no answer, after retrying transient errors.
    """
    client = chat_client(question.evaluator, question.host, question.timeout_s, keep_alive, None)

    def once() -> str:
        reply = within_deadline(
            lambda: client.invoke(question.messages, options=question.options),
            question.timeout_s,
            model=question.evaluator,
            host=question.host,
        )
        return reply.content if isinstance(reply.content, str) else str(reply.content)

    try:
        answer, _ = with_retries(
            once,
            RetryPolicy(retries=retries),
            lambda exc: classify(
                exc, model=question.evaluator, host=question.host, timeout_s=question.timeout_s
            ),
        )
    except ModelCallError as exc:
        raise EvaluatorError(exc.message) from None
    return answer
