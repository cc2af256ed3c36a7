"""driftgate's inference service (FastAPI): ``create_app(config, settings)``.

Serves ``models:/NAME@champion``, validates each record, logs every scored record to
the sample store with group commit, and honours the durable pause switch. Importing
this package imports nothing heavy; :mod:`serving.app` pulls in FastAPI and numpy.
"""

from driftgate.config.serving import ServingSettings

__all__ = ["ServingSettings", "create_app"]


def create_app(*args, **kwargs):
    """See :func:`serving.app.create_app` (imported lazily to keep this package light)."""
    from driftgate.serving.app import create_app as _create_app

    return _create_app(*args, **kwargs)
