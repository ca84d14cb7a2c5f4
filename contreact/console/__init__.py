"""The lab console (`contreact ui`): the runs of a storage in the browser, live.

A face of its own, in the optional extra `ui`: it reads runs through the readers every face
uses and answers the operator through the engine's reply path (`engine.replies`). `app`
wires the pages; `security` guards them; `feed` follows the storage for the open pages.
"""
