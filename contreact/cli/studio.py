"""Commands for looking at the graph itself: `contreact graph` (placeholder, being written)."""
