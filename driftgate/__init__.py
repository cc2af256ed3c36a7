"""driftgate: train, gate, serve and monitor a PyTorch model."""

__version__ = "0.1.0"
