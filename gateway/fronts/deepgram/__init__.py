"""Deepgram's wire protocol: ``WS /v1/listen`` (live transcription) and
``WS /v1/speak`` (streaming TTS), thin translations onto the gateway's own
dictation and TTS sessions, with the same auth, limits and engines. A client
written for Deepgram points its base URL here and changes nothing else;
docs/fronts.md lists every deviation."""
