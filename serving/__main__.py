"""``python -m serving [--config PATH] [--host H] [--port P]``: same as ``driftgate serve``."""

from __future__ import annotations

import typer

from driftgate.commands.serve import serve

if __name__ == "__main__":
    typer.run(serve)
