"""PLACEHOLDER extensions."""
