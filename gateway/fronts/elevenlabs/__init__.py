"""ElevenLabs' text-to-speech wire protocol: the ``stream-input`` and
``multi-stream-input`` sockets and the HTTP streaming route, thin translations
onto the gateway's own TTS sessions, with the same auth, limits and engines. A
client written for ElevenLabs points its base URL here and changes nothing else;
docs/fronts.md lists every deviation."""
