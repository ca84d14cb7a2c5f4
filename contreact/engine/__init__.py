"""The engine: the services that drive runs for every face (run driver, operator replies)."""
