"""The bottom layer: what every driftgate package may import, and which imports none.

- :mod:`driftgate.core.errors`: :class:`DriftgateError`, the base of every error driftgate
  raises on purpose (each carries the CLI exit code it maps to).
- :mod:`driftgate.core.yamlconfig`: YAML files into strict pydantic models, errors as
  ``FILE: dotted.key: message``; :class:`StrictModel`, the base of every config model.
- :mod:`driftgate.core.redaction`: credentials masked in any text before it is printed,
  logged, answered or recorded.
- :mod:`driftgate.core.collector`: the garbage collector's thresholds for a CLI command
  (fewer passes over its imports) and for the service (Python's own).

Nothing here imports another driftgate module (``tests/test_layers.py`` checks it).
"""
