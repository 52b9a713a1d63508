"""Deepgram Flux's turn-taking socket, ``WS /v2/listen``: a thin translation of
the gateway's own dictation session (its utterances are Flux's turns, its eager
finals Flux's eager ends of turn) with the same auth, limits and recognizer. A
client written for Flux points its base URL here; docs/fronts.md lists every
field's meaning here and where it differs from Flux."""
