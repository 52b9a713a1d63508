"""Foreign wire protocols, one sub-package each (Deepgram, OpenAI Realtime,
ElevenLabs, Wyoming): thin translations onto the same dictation and TTS
sessions, with the same auth and limits."""
