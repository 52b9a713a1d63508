"""Helpers shared by every test layer: ports and servers on 127.0.0.1, a fake
LAN-share listener, socket receive helpers, real speech for the ASR tests."""
