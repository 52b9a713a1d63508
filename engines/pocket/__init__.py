"""Kyutai Pocket TTS in plain torch: a flow LM over Mimi continuous latents.

24 kHz mono, 12.5 frames/s, one model step = one 1920-sample (80 ms) frame.

Model API (what the engine wrapper and the scheduler build on)
--------------------------------------------------------------

Loading::

    model = load_model(model_dir, quantize=False)          # -> PocketModel
    # model_dir holds model.safetensors, tokenizer.model, embeddings/<voice>.safetensors.
    # Geometry is read off tensor shapes. Any missing file or wrong shape raises
    # PocketModelError (an engines.base.EngineError) whose message names the file,
    # the expected and the found shape; .code is "model_file_missing" or
    # "model_file_invalid".

``PocketModel`` (immutable after load; its methods may be called from one worker
thread at a time -- the model holds no per-stream state):

- ``sample_rate`` (24000), ``frame_samples`` (1920), ``geometry`` (PocketGeometry),
  ``defaults`` (GenerationSettings: temperature 0.3, lsd_steps 1, eos_threshold,
  max_tokens_per_chunk 50, frames_after_eos None = the reference's guess).
- ``voice_ids() -> list[str]`` voices under ``embeddings/``.
- ``load_voice(voice_id) -> VoiceState`` (reads ``embeddings/<id>.safetensors``;
  raises PocketModelError on a bad file, KeyError-free: unknown ids raise
  ``engines.base.UnknownVoice``).
- ``can_clone`` (False when the Mimi encoder weights are all zero).
- ``clone_voice(wav: np.ndarray, sample_rate: int) -> VoiceState`` (mono or
  [channels, samples] float audio at any rate; raises ``engines.base.CloneRefused``
  on the ungated checkpoint).
- ``read_voice(path) -> VoiceState`` any voice file (checked against this model).
- ``tokenizer`` (``encode(text) -> list[int]``, ``decode``), ``quantized``.

``engines.pocket.stream``: ``PocketStream(model, text, voice, settings=None, seed=None)``
single-stream convenience: iterate it for float32 frames of shape (1920,); ``cancel()``
stops it between frames. ``synthesize(model, text, voice, settings=None, seed=None) ->
np.ndarray`` the whole utterance.

``save_voice_file(voice, path)`` / ``load_voice_file(path, geometry)`` read and write a
voice in the shipped layout (``transformer.layers.N.self_attn/cache`` [2,1,T,H,D] with
rope applied, I64 ``.../offset``), interchangeable with the reference's export.

``StreamBatch`` -- many independent utterances stepped together (owned by ONE thread,
not thread-safe). Each stream has its own KV cache length and Mimi decoder state;
streams join and leave between steps::

    batch = StreamBatch(model, max_streams=8)  # engines.pocket.batch
    sid = batch.add(text, voice, settings=None, seed=None)  # text prompt pass now
    for out in batch.step():            # ONE batched forward for every active stream
        out.stream_id, out.pcm, out.done  # pcm: float32 (1920,) or None; done: finished
    batch.remove(sid)                   # cancel; finished streams are removed by step()
    len(batch), batch.stream_ids()
    batch.close()                       # stops the helper thread of a pipelined batch

``add`` raises ValueError (text with nothing to say, a voice of another model) or
EngineError(code="over_capacity") when full. Each ``step()`` returns one StepOutput per
stream that was in the batch; ``StepOutput.pcm`` holds zero or more 80 ms frames
(``.frames`` splits them): a stream's first frame is decoded at once, later ones may be
decoded several per Mimi call (``decode_chunk``), which amortizes the decoder's per-call
cost. A stream's frames arrive in order and are the same whatever else is in the batch.
``pipelined=True`` runs Mimi on a helper thread owned by the batch while the LM steps
ahead (up to a bounded number of queued latents per stream): same audio, more
throughput when a second core is free.

``GenerationSettings`` (frozen dataclass, validated: ValueError naming the field):
temperature, lsd_steps, eos_threshold, frames_after_eos, max_tokens_per_chunk,
replace_characters; start from ``model.defaults`` and ``dataclasses.replace`` it.
``prepare_text`` / ``split_text`` expose the reference's text preparation and chunking
(``engines.pocket.generation``).

With ``temperature == 0`` the flow noise is exactly zero: output is deterministic.
With a ``seed`` the noise stream is ``torch.Generator().manual_seed(seed)`` drawn
exactly as the reference draws from the global generator after ``torch.manual_seed``.
"""

from __future__ import annotations

import importlib
from typing import Any

# Names resolve on first use, so ``engines.pocket.download`` (and the gateway, when the
# ``tts`` extra with torch is not installed) can import this package without torch.
_EXPORTS = {
    "GenerationSettings": "engines.pocket.generation",
    "PocketGeometry": "engines.pocket.geometry",
    "PocketModel": "engines.pocket.model",
    "PocketModelError": "engines.pocket.errors",
    "PocketStream": "engines.pocket.stream",
    "StepOutput": "engines.pocket.batch",
    "StreamBatch": "engines.pocket.batch",
    "VoiceState": "engines.pocket.voice",
    "load_model": "engines.pocket.model",
    "load_voice_file": "engines.pocket.voice",
    "prepare_text": "engines.pocket.generation",
    "save_voice_file": "engines.pocket.voice",
    "split_text": "engines.pocket.generation",
    "synthesize": "engines.pocket.stream",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'engines.pocket' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
