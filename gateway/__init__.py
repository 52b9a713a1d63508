"""voxgate: a self-hosted WebSocket gateway for real-time speech."""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
