"""PLACEHOLDER studies."""
