"""The gateway's one codec layer: every route and socket that takes or gives
audio other than raw PCM goes through here.

- formats.py: the formats as data (names, rates, media types); no codec imports;
- decoders.py: live stream decoders for /v1/dictation (PCM, G.711, raw Opus
  packets, and WebM / Ogg Opus byte streams through containers.py, webm.py, ogg.py);
- files.py: whole-file decoding for /v1/audio/transcriptions, capped (MP4 sample
  tables checked first by mp4_tables.py), run in the capped child processes of
  decode_worker.py, which decode_pool.py starts and feeds;
- encoders.py: streaming encoders for the TTS routes (PCM, WAV, G.711 here;
  MP3, AAC, FLAC, Ogg Opus in av_encoders.py; their common shape in base.py);
- g711.py, opus.py, pyav.py: the codecs themselves.

FFmpeg (PyAV) is imported by pyav.py only, on the first use of a format that
needs it: a PCM or G.711 path never loads it.
"""
