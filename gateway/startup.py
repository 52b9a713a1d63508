"""Startup progress, read by /health while engines load in the background."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Startup:
    step: str = "starting"
    ready: bool = False

    def done(self) -> None:
        self.step = "ready"
        self.ready = True
