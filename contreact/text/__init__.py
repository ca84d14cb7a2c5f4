"""Pure text helpers any layer of contreact may import: the token estimate, text-tool markup.

This package is a leaf: it imports nothing of contreact and nothing outside the standard
library, so the graph's nodes, analysis and the bundled stub server (which must not
import the graph) can share one definition of each instead of keeping copies in step.
"""
