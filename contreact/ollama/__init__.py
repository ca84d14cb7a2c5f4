"""PLACEHOLDER ollama."""
