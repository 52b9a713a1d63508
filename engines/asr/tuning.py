"""The streaming policy's tuning: one frozen ``PolicyTuning``, passed in.

Whoever builds the policy hands it down: the sidecar server gives every stream
and its scheduler the same instance (the defaults, ``SidecarServer(tuning=...)``);
bench/asr_variants.py builds its variants with ``dataclasses.replace``.
``StreamPolicy`` reads the VAD, partial and final knobs, its ``Agreement`` the
agreement ones, the ``Scheduler`` the cadence and batching ones, and each
decode job carries its encoder margin (``short_window_margin_s`` or
``final_margin_s``) to the decoder.

Each knob's comment says what it is and why. The measurements that chose the
defaults are in docs/dictation.md (*Tuning*), not here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class PolicyTuning:
    # ---- hearing speech (Silero VAD: one probability per 32 ms window)
    speech_threshold: float = 0.5  # a window at or above this is speech
    silence_threshold: float = 0.35  # below this a window is silence; in between nothing changes (hysteresis)
    open_windows: int = 3  # speech windows in a row (~100 ms) that open an utterance: a click opens none
    speech_pad_s: float = 0.4  # audio decoded before the speech onset and after its end: edge words stay whole
    max_utterance_s: float = 25.0  # a longer utterance is cut at its quietest window: Whisper hears 30 s at most
    min_cut_part_s: float = 5.0  # a forced cut leaves at least this much audio in the first part
    detect_language_after_s: float = 2.0  # a language detected on less audio is not kept for the utterance

    # ---- partials
    partial_step_s: float = 0.5  # new audio that makes a partial due while the decoder has room
    max_partial_step_s: float = 1.5  # the most that load stretches the step: a short sentence still gets a partial
    partial_share: float = 0.6  # decode time partials may take when streams compete: finals are never crowded out
    partial_beam: int = 5  # stable words end up in the final, so a greedy slip in a partial becomes a final error
    partials_in_pauses: bool = False  # a pause's audio is what its speculative final decodes: no partial repeats it

    # ---- LocalAgreement: which words of the partials become stable
    agree: int = 3  # consecutive hypotheses that must agree on a word: with two, a shared early slip gets through
    hold_back_words: int = 10  # words at the end of the newest agreeing hypothesis never committed: still revised
    hold_back_earlier_words: int = 10  # the same for the agreeing hypotheses before the newest

    # ---- finals
    final_beam: int = 5  # the beam of file transcription, so a final reads as the offline text does
    speculate_from_s: float = 0.032  # silence that starts the speculative final: the first silent window, ready soonest
    speculate_after_s: float = 0.16  # silence after which the speculative final ends the turn (eager_final, final due)
    final_tail_s: float = 0.032  # a short-window final decodes this far into its silence, however late it is taken
    # an eager stream's 30 s-window final is speculated from the first silent window (its eager final ready
    # soonest), not once the turn has ended as for a stream without eager
    eager_full_window_speculates_early: bool = True
    short_window_margin_s: int = 7  # silence after a partial's audio on its short encoder window (the encoder's cost)
    # the same for a short-window final: on 7 s a short sentence's final misreads words and repeats itself that
    # the 30 s window reads right; 12 s reads as offline decoding does, at a third of the 30 s window's cost
    final_margin_s: int = 12
    final_rounds: int = 2  # waiting finals are batched to spread over about this many rounds of the lanes
    # an eager stream's speculative final goes before partials from the first silent window: an agent waits
    # for it, while a partial only refreshes text on screen; a pause that proves short wastes that decode
    eager_speculation_first: bool = True

    # silence after which a stream with a turn threshold asks the end-of-turn model whether its turn is over
    # (a confident answer ends it at the eager point, speculate_after_s, not before: the model hears many short
    # pauses within sentences as finished). Its answer to one pause changes little from 32 to 200 ms into it,
    # and it takes 70-150 ms on a busy core: asked this early, it is usually in by the eager point, and the
    # pauses shorter than this, which cannot end a turn anyway, cost no question
    turn_question_after_s: float = 0.096

    # ---- context across utterances
    # words of the stream's earlier finals each decode is conditioned on (after its vocabulary), as offline
    # decoding conditions a window on the text before it; 0: each utterance is decoded on its own. Dictation
    # streams and agent streams (eager) apart: on real speech with pauses it took both closer to offline, on
    # synthetic sets without pauses inside sentences it added errors to agent streams only
    context_words: int = 40
    agent_context_words: int = 0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool):
                continue
            if not isinstance(value, int | float) or value < 0:
                raise ValueError(f"PolicyTuning.{field.name} must be a number of at least 0, not {value!r}")
        if self.agree < 2:
            raise ValueError(f"PolicyTuning.agree must be at least 2 (hypotheses compared), not {self.agree!r}")
        for name in ("open_windows", "partial_beam", "final_beam", "final_rounds", "partial_step_s",
                     "partial_share", "max_utterance_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"PolicyTuning.{name} must be above 0, not {getattr(self, name)!r}")
        if not self.silence_threshold <= self.speech_threshold <= 1:
            raise ValueError(f"PolicyTuning needs silence_threshold <= speech_threshold <= 1, not "
                             f"{self.silence_threshold!r} and {self.speech_threshold!r}")
        if self.max_partial_step_s < self.partial_step_s:
            raise ValueError(f"PolicyTuning.max_partial_step_s ({self.max_partial_step_s!r}) is below "
                             f"partial_step_s ({self.partial_step_s!r})")
        if self.min_cut_part_s >= self.max_utterance_s:
            raise ValueError(f"PolicyTuning.min_cut_part_s ({self.min_cut_part_s!r}) must be below "
                             f"max_utterance_s ({self.max_utterance_s!r})")
