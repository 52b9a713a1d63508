"""One loaded Piper voice: text to phoneme ids per sentence, and phoneme ids
to audio, on the ``piper-tts`` runtime.

The ONNX sessions are made here rather than by ``PiperVoice.load`` so their
threading and their graph are ours. Each voice has a *narrow* and a *wide* way
to run a sentence:

- *narrow*: one thread per inference. The engine's pool runs several of these
  at once, which beats one inference spread over every core when streams
  compete: VITS parallelises poorly inside a call, and spinning intra-op
  threads fight every other inference (and process) for the cores. With
  ``graph="fast"`` (the default) it runs the voice's fast graph (fastgraph.py:
  the same model on ONNX Runtime's blocked-layout kernels, less CPU per
  second of audio), cut in front and decoder (halves.py), checked against the
  stock graph at load; anything that goes wrong there leaves the stock graph
  in place, with a warning;
- *wide*: for a sentence a listener is waiting for when nothing else runs, so
  a lone request starts as fast as possible: the same front on two intra-op
  threads (about 0.8x its one-thread time), then the decoder's two halves on
  two threads at once (the decoder gains nothing from intra-op threads: its
  blocked kernels split work by rows, and audio is one row). With the stock
  graph, or a voice that cannot be cut (a multi-speaker one), it is the
  stock graph with ONNX Runtime's defaults (every core).

With ``precision="int8"`` both ways run the cut's decoder on ONNX Runtime's
8-bit kernels (int8.py: less CPU per second of audio, not the same audio),
checked against the float32 decoder at load; if that fails the voice keeps
the float32 one, with a warning.

Thread safety: ``infer`` may run on several threads at once (an ONNX Runtime
session is safe for concurrent ``run`` calls); ``phonemize`` too (piper keeps
espeak-ng behind its own lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from engines.piper.int8 import PRECISIONS
from engines.piper.voices import VoiceFile

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install piper-tts (the Piper runtime; scripts/setup.sh installs it)"
GRAPHS = ("fast", "stock")
CHECK_TEXT = "The quick brown fox jumps over the lazy dog."


class Synthesizer(Protocol):
    """What a Piper stream needs from a voice (the tests give it fakes)."""

    sample_rate: int
    speakers: dict[str, int]

    def phonemize(self, text: str) -> list[list[int]]:
        """Phoneme ids of each sentence of ``text``, in order (empty sentences dropped)."""
        ...

    def infer(self, phoneme_ids: Sequence[int], speaker_id: int | None = None, wide: bool = False) -> np.ndarray:
        """Float32 mono audio at ``sample_rate`` for one sentence; ``wide``: the
        inference may use every core (nothing else runs)."""
        ...


@runtime_checkable
class TimedSynthesizer(Synthesizer, Protocol):
    """A synthesizer that also says how long each phoneme id lasts (alignment.py)."""

    word_gap_id: int | None  # the id between two words (espeak's space), None if the voice has none
    quiet_ids: frozenset[int]  # ids that voice no phoneme: pads, the start and end marks

    def phoneme_count(self, text: str) -> int:
        """How many phonemes ``text`` holds, phonemized on its own."""
        ...

    def infer_timed(self, phoneme_ids: Sequence[int], speaker_id: int | None = None,
                    wide: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """``infer``'s audio, and the samples each phoneme id lasts (None: the graph does not say)."""
        ...


def timed_model(model: Path) -> Path | bytes:
    """The voice's graph with its phoneme durations as a second output (piper-tts's own
    patch), or the file unchanged where that cannot be done (no onnx package, another
    graph shape): the voice then speaks without word timing."""
    try:
        import onnx
        from piper.patch_voice_with_alignment import add_alignment_output

        proto = onnx.load(str(model))
        add_alignment_output(proto)
        return bytes(proto.SerializeToString())
    except (ImportError, ValueError) as exc:
        log.info("Piper voice %s: no word timing from its stock graph (%s)", model.name, exc)
        return model


def runtime_missing() -> str | None:
    """Why the Piper runtime cannot be imported here, or None when it can."""
    try:
        import onnxruntime  # type: ignore[import-untyped]  # noqa: F401
        import piper  # noqa: F401
    except ImportError as exc:
        return f"the Piper runtime is not installed ({exc})"
    return None


class PiperModel:
    """A Piper voice loaded into an ONNX Runtime session (see module docstring)."""

    def __init__(self, voice: VoiceFile, wide: bool = True, graph: str = "fast", precision: str = "fp32") -> None:
        from piper import PiperVoice
        from piper.config import PiperConfig

        from engines.piper import fastgraph

        if graph not in GRAPHS:
            raise ValueError(f"graph: must be one of {', '.join(GRAPHS)}, got {graph!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision: must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.voice = voice
        self.sample_rate = voice.sample_rate
        config = PiperConfig.from_dict(voice.raw)
        timed = timed_model(voice.model)
        stock = fastgraph.session(timed, 0)  # ONNX Runtime's defaults: every core
        # PiperVoice does the phonemes and the tensors; its session is chosen per call.
        self._wide_voice: Any = PiperVoice(session=stock, config=config)
        self.graph = "stock"
        self.precision = "fp32"
        sessions = self._fast_sessions(stock, precision) if graph == "fast" else None
        if precision == "int8" and graph == "stock":
            log.warning("Piper voice %s: float32 decoder (the int8 decoder is made from the fast graph, and the "
                        "stock graph was asked for)", voice.id)
        narrow, fast_wide = sessions or (fastgraph.session(timed, 1, spinning=False), None)
        self._voice: Any = PiperVoice(session=narrow, config=config)
        if fast_wide is not None:
            self._wide_voice = PiperVoice(session=fast_wide, config=config)
        if not wide:
            self._wide_voice = None
        self.speakers = dict(config.speaker_id_map)
        self.word_gap_id = _first_id(config.phoneme_id_map, " ")
        self.quiet_ids = frozenset(i for p in ("_", "^", "$") for i in config.phoneme_id_map.get(p, ()))

    def _fast_sessions(self, stock: Any, precision: str) -> tuple[Any, Any] | None:
        """(narrow, wide or None) sessions of the voice's fast graph, checked against
        ``stock``; None (logged) to keep the stock graph. The wide one decodes in
        two halves on two threads (halves.py); a voice that cannot be cut has none.
        ``precision`` int8: on the int8 decoder when it passes its check."""
        import onnx

        from engines.piper import fastgraph
        from engines.piper.halves import HalvesSession, split_graph

        started = time.monotonic()
        reference = self._wide_voice
        try:
            parts = split_graph(onnx.load(str(self.voice.model)))
            wide = None
            if parts is None:
                narrow = fastgraph.session(fastgraph.prepare(timed_model(self.voice.model)), 1, spinning=False,
                                           fast=True)
            else:
                front, decoder, latent = parts
                fast_front = fastgraph.prepare(front.SerializeToString())
                front_session = fastgraph.session(fast_front, 1, spinning=False, fast=True)
                # a lone sentence's front on both cores: its part of the first audio's wait is a third shorter
                fronts = (front_session, fastgraph.session(fast_front, 2, spinning=False, fast=True))
                decoder_session = fastgraph.session(fastgraph.prepare(decoder.SerializeToString()), 1,
                                                    spinning=False, fast=True)
                narrow = HalvesSession(fronts[0], decoder_session, latent, halves=False)
                wide = HalvesSession(fronts[1], decoder_session, latent, halves=True)
            ids = next(reference.phonemes_to_ids(p) for p in reference.phonemize(CHECK_TEXT) if p)
            speaker = reference.config.default_speaker_id if reference.config.num_speakers > 1 else None
            problem = fastgraph.check(narrow, stock, ids, speaker)
            if problem is None and wide is not None:
                problem = fastgraph.check(wide, stock, ids, speaker)
        except ImportError as exc:
            log.warning("Piper voice %s: stock graph (the fast graph needs the onnx package: %s)", self.voice.id, exc)
            return None
        except fastgraph.NoBlockedKernels as exc:
            log.info("Piper voice %s: stock graph (%s)", self.voice.id, exc)
            return None
        except Exception as exc:  # a voice the rewrite or this ONNX Runtime cannot take: the stock graph serves it
            log.warning("Piper voice %s: stock graph (making the fast graph failed: %s: %s)", self.voice.id,
                        exc.__class__.__name__, exc)
            return None
        if problem is not None:
            log.warning("Piper voice %s: stock graph (the fast graph does not compute the same audio here: %s)",
                        self.voice.id, problem)
            return None
        self.graph = "fast"
        log.info("Piper voice %s: fast graph ready in %.1f s (a lone sentence: %s)", self.voice.id,
                 time.monotonic() - started, "decoder halves on two threads" if wide else "stock graph, every core")
        if precision == "int8":
            if parts is None:
                log.warning("Piper voice %s: float32 decoder (the int8 decoder is made from the voice cut in front "
                            "and decoder, and this voice's decoder also takes a speaker embedding)", self.voice.id)
            else:
                made = self._int8_sessions(*parts, fronts, narrow, ids)
                if made is not None:
                    narrow, wide = made
        return narrow, wide

    def _int8_sessions(self, front: Any, decoder: Any, latent: str, fronts: tuple[Any, Any], fp32: Any,
                       ids: list[int]) -> tuple[Any, Any] | None:
        """(narrow, wide) sessions of the voice on the int8 decoder (int8.py), checked
        against ``fp32`` on ``ids``; None (logged) to keep the float32 decoder."""
        from engines.piper import int8
        from engines.piper.halves import HalvesSession

        started = time.monotonic()
        reference = self._wide_voice
        config = reference.config
        try:
            sentences = [reference.phonemes_to_ids(p) for text in int8.CALIBRATION for p in reference.phonemize(text)
                         if p]
            examples = int8.calibration_frames(front, latent, sentences,
                                               (config.noise_scale, config.length_scale, config.noise_w_scale))
            decoder_session = int8.session(int8.quantize_decoder(decoder, latent, examples))
            narrow = HalvesSession(fronts[0], decoder_session, latent, halves=False)
            wide = HalvesSession(fronts[1], decoder_session, latent, halves=True)
            problem = (int8.check(narrow, fp32, ids, self.sample_rate)
                       or int8.check(wide, fp32, ids, self.sample_rate))
        except Exception as exc:  # this ONNX Runtime cannot quantize or run it: the float32 decoder serves
            log.warning("Piper voice %s: float32 decoder (making the int8 decoder failed: %s: %s)", self.voice.id,
                        exc.__class__.__name__, exc)
            return None
        if problem is not None:
            log.warning("Piper voice %s: float32 decoder (the int8 decoder strays too far from it here: %s)",
                        self.voice.id, problem)
            return None
        self.precision = "int8"
        log.info("Piper voice %s: int8 decoder ready in %.1f s", self.voice.id, time.monotonic() - started)
        return narrow, wide

    def phonemize(self, text: str) -> list[list[int]]:
        # Piper splits sentences while phonemizing (espeak-ng's own clause rules).
        text = " ".join(text.split())
        return [self._voice.phonemes_to_ids(phonemes) for phonemes in self._voice.phonemize(text) if phonemes]

    def phoneme_count(self, text: str) -> int:
        return sum(len(p) - p.count(" ") for p in self._voice.phonemize(" ".join(text.split())))

    def infer(self, phoneme_ids: Sequence[int], speaker_id: int | None = None, wide: bool = False) -> np.ndarray:
        return self.infer_timed(phoneme_ids, speaker_id, wide)[0]

    def infer_timed(self, phoneme_ids: Sequence[int], speaker_id: int | None = None,
                    wide: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        from piper.config import SynthesisConfig

        voice = self._wide_voice if wide and self._wide_voice is not None else self._voice
        audio, id_samples = voice.phoneme_ids_to_audio(list(phoneme_ids), SynthesisConfig(speaker_id=speaker_id),
                                                       include_alignments=True)
        audio = peak_normalize(np.asarray(audio, dtype=np.float32).reshape(-1))
        if id_samples is not None:
            id_samples = np.asarray(id_samples, dtype=np.int64).reshape(-1)
        return audio, id_samples


def _first_id(id_map: Mapping[str, Sequence[int]], phoneme: str) -> int | None:
    ids = id_map.get(phoneme)
    return ids[0] if ids else None


def peak_normalize(audio: np.ndarray) -> np.ndarray:
    """Scale a sentence so its loudest sample is at full range, as Piper's own
    synthesis does (VITS output levels vary from sentence to sentence)."""
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    if peak < 1e-8:
        return np.zeros_like(audio, dtype=np.float32)
    return np.clip(audio / peak, -1.0, 1.0).astype(np.float32)
