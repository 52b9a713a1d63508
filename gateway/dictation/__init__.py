"""The dictation wing: ``/v1/dictation`` sessions, file transcription, and the
supervisor of the ASR sidecar process they share."""
