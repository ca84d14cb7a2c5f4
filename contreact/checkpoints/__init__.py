"""Persistence: database engines, checkpointer factory, run registry, events, journal."""
