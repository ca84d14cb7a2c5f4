"""The engine: what drives a run and the services around one drive of it."""
