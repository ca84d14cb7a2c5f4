"""Research commands: `contreact pei`, `report`, `export` (placeholder, being written)."""
