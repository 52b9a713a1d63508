"""OpenAI's Realtime API in its transcription mode (``WS /v1/realtime?intent=transcription``),
a thin translation onto the gateway's own dictation session, with the same auth,
limits and recognizer. A client written for OpenAI points its base URL here and
changes nothing else; docs/fronts.md lists every deviation."""
