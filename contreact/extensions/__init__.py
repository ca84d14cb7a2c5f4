"""A run's extensions: its toolset, the hooks called at points of the run, interventions.

Your own tools and hooks are loaded here from import paths, entry points or Python objects,
and called inside the journaled step they belong to, so a step re-run after a crash
replays their effect instead of acting twice.
"""
