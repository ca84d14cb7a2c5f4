"""Everything that speaks to an Ollama server: hosts, credentials, options and the client.

`client` wraps LangChain's `ChatOllama` with a deadline per attempt (`deadline`) and
retries; `hosts` and `credentials` read host settings as Ollama does and keep passwords
out of every record; `options` checks model option names and types; `tool_mode` asks a
model's capabilities; `server_numbers` checks the counts and durations a server reports.
"""
