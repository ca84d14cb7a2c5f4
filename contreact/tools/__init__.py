"""The six agent tools: memory (SQLAlchemy store), operator channel, registry and schemas."""
