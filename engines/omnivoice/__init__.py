"""OmniVoice (the PyPI package ``omnivoice``, k2-fsa) as a voxgate TTS engine.

- engine.py      ``OmniVoiceEngine``: the ``TtsEngine`` the gateway calls
- stream.py      one utterance, sentence by sentence, cut into 80 ms frames
- options.py     the per-utterance options (instruct, language), checked against the package
- synthesis.py   what each sentence asks of the model; voice prompts through the cache
- worker.py      the one thread that touches the model (bounded queue, idle unload)
- backend.py     loading the package's model; generate / make_prompt behind ``Backend``
- prompts.py     voice-clone prompts: memory LRU + versioned files on disk
- voices.py      designed (built-in) and cloned voices
- runtime.py     importing the package (torchaudio on a CPU torch), device and dtype
- random_model.py  a tiny random model in the released layout, for tests and benchmarks

Nothing here imports torch or the package at import time, so the gateway can
report "not installed" instead of failing to start.
"""
