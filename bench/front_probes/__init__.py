"""Probes of bench/fronts.py: one module per wire protocol, measured side by side.

Contract (add ``openai_realtime.py``, ``elevenlabs.py`` ... next to these):

- ``NAME: str`` — the label shown in the tables.
- ``async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
  rounds: int) -> list[float]`` — stream ``audio16k`` (float32, 16 kHz, speech then at
  least 1 s of silence) in real time, 20 ms a message, ``rounds`` times, each on a fresh
  socket with a 500 ms end-of-speech window; per round, the seconds from the moment the
  chunk holding the sample at ``speech_end_s`` was sent to the arrival of the first
  non-empty final transcript.
- ``async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]`` —
  per round, on a fresh socket opened before the clock starts, the seconds from sending
  ``text`` (as the protocol's streaming text plus its flush) to the first audio byte.

A probe may define either or both. ``base_url`` is ``http://host:port``; probes speak
to 127.0.0.1 only and use plain ``websockets`` so the client's own overhead is equal.

A probe that drives an agent framework's own client instead (its own table, since
its overhead is not equal) defines ``METRIC: str`` (what the framework reports) and
``async def framework_stt_latency(base_url, audio16k, *, speech_end_s, rounds) ->
list[tuple[float, float]]``: per round, (the framework's own STT latency figure, our
clock's end-of-speech chunk sent -> final transcript of the same run), in seconds.
"""
