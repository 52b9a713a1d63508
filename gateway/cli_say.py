"""``voxgate say``: synthesize text to a WAV file."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    return None
