"""The ASR sidecar: a separate process that owns faster-whisper.

``python -m engines.asr`` serves every dictation stream of one gateway over a
framed protocol on stdin/stdout (framing.py), with one streaming policy per
stream (policy.py: Silero VAD and utterances; partials.py with agreement.py;
speculation.py; finals.py), tuned by one ``PolicyTuning`` (tuning.py), and
decode lanes (lanes.py) fed by a scheduler (server.py, scheduler.py). The gateway side
is gateway/dictation/sidecar.py. Nothing here imports the gateway.
"""
