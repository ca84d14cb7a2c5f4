"""PLACEHOLDER engine."""
