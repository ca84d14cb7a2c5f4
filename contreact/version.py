"""The package's version, in a module of its own so that any layer can name it.

Provenance records and the report's Methods section cite it; importing it from the package's
front door would run `contreact/__init__` and tie every layer to it.
"""

__version__ = "0.1.0"
