"""PEI: evaluator models rate a finished run's history on the Phenomenal Experience Inventory.

Szeider (2025, §5.4) hands the conversation history of a finished run to an evaluator
model, which then answers the PEI instrument (Box 2) as the next turn: the evaluator
"self-assesses" while holding a history another model lived. The ContReAct-Ollama
reference implementation sends the whole message log. Here the history is rebuilt from
the run's event log (the checkpointed state holds only the current cycle, by design), in
order, as the agent lived it: the system prompt, then every cycle's opening turn, each
model answer with its tool calls, each tool result (operator exchanges are the results of
`send_message_to_operator`), corrective turns, and the answer that closed the cycle (its
reflection); thinking is left out, as the agent never saw it again. The instrument is the
last user turn; no tools are offered.

What is left out when the history does not fit `pei.num_ctx` (minus an answer reserve),
in this order until it fits: (1) the working steps (tool calls, results, corrective
turns) of the oldest cycles, keeping each cycle's opening turn and reflection; (2) whole
cycles, oldest first. The system prompt, the instrument and the last cycle's reflection
always stay. What was left out is stored with the answer and shown in reports.

The model call itself is not made here: `contreact.analysis` reads runs and never drives
them, so the face passes in an `Ask` (see `contreact.engine.evaluator`). One row per (run,
evaluator) is stored in `contreact_pei` with the evaluator's own options, so running
`pei` again reuses stored answers (re-parsing them) instead of asking again; a level set by
hand (`pei --set`) is marked manual and kept. A rating made before its run's last cycle is
stale: flagged, left out of the means, and asked again by `pei --refresh`. Across runs x
evaluators: the matrix, evaluator means, agreement statistics (see
`contreact.analysis.agreement`) and the self vs cross figure.

The modules, in the order a rating passes through them: `instrument` (the question),
`history` (the run's conversation, fitted to the evaluator's context), `evaluation`
(asking every evaluator about every run), `answers` (the level read from a reply),
`results` (the stored ratings), `matrix` (ratings as histories x evaluators, stale ones
left out) and `self_rating` (a model's ratings of its own histories against the others').
"""
