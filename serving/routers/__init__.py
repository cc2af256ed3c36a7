"""The service's routers, one per concern (FastAPI's "Bigger Applications" layout):
:mod:`.predict`, :mod:`.health` (health, readiness, metrics), :mod:`.admin`."""
