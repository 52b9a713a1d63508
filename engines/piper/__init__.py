"""Piper TTS: VITS voices in ONNX on the ``piper-tts`` runtime, streamed per
sentence in 80 ms frames from a bounded pool of worker threads.

``engine.PiperEngine`` is the ``TtsEngine``; ``voices`` finds voice files,
``model`` wraps one loaded voice, ``pool`` runs inferences most urgent first,
``stream`` turns an utterance into frames. ``fastgraph`` (with ``conv2d``,
``phases`` and ``nchwc``) makes a voice's fast graph at load, and ``halves``
cuts it into front and decoder so a lone sentence decodes on two threads.
"""
