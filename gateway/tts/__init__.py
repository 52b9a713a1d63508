"""The TTS wing: ``/v1/tts`` sessions, the speech HTTP routes and the voices."""
