"""The engine: turns a config into a running graph and drives it, and the run's services.

`runner` starts, resumes, extends and forks runs; `drive` moves the graph until a run
completes, pauses or fails; `child` is a run's own process; `operator_policy` and `inbox`
answer the agent's messages; `doctor` checks a set-up before a long run; `evaluator` makes
the model calls a PEI evaluation needs; `api` is `contreact.run`; `tracing` (and, with
the `otel` extra, `spans`) sends a drive's OpenTelemetry spans when asked to. Faces call
these; nothing here prints, prompts or parses a command line.
"""
