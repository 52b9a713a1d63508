"""The ASR sidecar: a separate process that owns faster-whisper.

``python -m engines.asr`` serves every dictation stream of one gateway over a
framed protocol on stdin/stdout (framing.py), with the streaming policy
(policy.py: Silero VAD, partials with LocalAgreement-3, speculative finals)
and one decode worker (server.py). The gateway side is gateway/asr_client.py.
Nothing here imports the gateway.
"""
