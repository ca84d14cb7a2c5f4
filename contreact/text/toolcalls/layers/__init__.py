"""The parser's layers, one module each.

Native calls, JSON objects, ``<tool_call>`` tags, the families' own markup (dialects,
harmony, Python-call syntax) and ReAct text; ``nodes.toolcalls.parser`` orders them.
"""
