"""Engines: everything that turns audio into text or text into audio.

Nothing here imports ``gateway``; the gateway depends on :mod:`engines.base`.
"""
