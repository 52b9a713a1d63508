"""``voxgate transcribe``: stream a WAV file through /v1/dictation."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    return None
