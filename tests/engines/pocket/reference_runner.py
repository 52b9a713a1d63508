"""Runs the reference ``pocket_tts`` package in its own process for the parity tests.

``import pocket_tts`` pins torch to one thread for the whole process, so the tests
never import it themselves. Usage::

    python reference_runner.py build  MODEL_DIR GEOMETRY SEED   (tiny, 2m, 7m, or a released
                                                                  English config name)
    python reference_runner.py run    MODEL_DIR JOBS.json OUT.safetensors
    python reference_runner.py shapes OUT.json CONFIG...

``build`` writes a complete model directory with random weights: a trained
sentencepiece unigram model, the reference's state_dict as model.safetensors, the
reference YAML it was built from, and two voices cloned by the reference from
synthetic speech-like audio and exported with the reference's own exporter.

``run`` reloads that directory in the reference and runs jobs: ``generate`` (text,
voice, seed, temperature, optional quantize) recording every latent, EOS flag and the
audio; ``clone`` (a WAV file, exported voice); ``chunks`` (text -> chunks and tokens).
"""

from __future__ import annotations

import io
import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import safetensors.torch
import sentencepiece
import torch
import yaml

WORDS = ("the a an one two three four five six seven eight nine ten hello world voice speech "
         "stream frame model small quick brown fox jumps over lazy dog rain spain plain stays "
         "mainly in on at by for with from time day night morning evening city river road house "
         "tree green red blue light dark water fire earth wind sound music song people friend "
         "friends talk talks walk walks run runs read reads write writes good great little old new "
         "first last long short high low right left open close start stop begin end here there "
         "today tomorrow yesterday always never often sometimes because while before after where "
         "what who why how is are was were be been will would can could should may might must "
         "have has had do does did say says said go goes went come comes came see sees saw know "
         "knows knew think thinks thought make makes made take takes took give gives gave").split()


def corpus(seed: int, count: int = 6000) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 14))]
        if rng.random() < 0.3:
            words.insert(rng.randint(1, len(words) - 1), rng.choice(["3.5", "42", "1999", "7"]))
        text = " ".join(words)
        if rng.random() < 0.4:
            cut = rng.randint(1, len(text.split()) - 1)
            parts = text.split()
            text = " ".join(parts[:cut]) + rng.choice([",", ";", ":"]) + " " + " ".join(parts[cut:])
        lines.append(text[0].upper() + text[1:] + rng.choice([".", ".", "!", "?", "...", "."]))
    return lines


def train_tokenizer(path: Path, vocab: int, seed: int) -> int:
    buf = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus(seed)), model_writer=buf, vocab_size=vocab,
        model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
        num_threads=1, minloglevel=2)
    path.write_bytes(buf.getvalue())
    return sentencepiece.SentencePieceProcessor(model_file=str(path)).vocab_size()


# Short names the parity tests use; any other name is a released config's own name.
ALIASES = {"tiny": "english", "2m": "english_2m_2026-10", "7m": "english_7m_2026-10"}
RELEASED_ENGLISH = ("english", "english_2026-04_24l", "english_drifting_26-09", "english_18m_2026-10",
                    "english_7m_2026-10", "english_2m_2026-10")


def released_config(geometry: str) -> str:
    released = ALIASES.get(geometry, geometry)
    if released not in RELEASED_ENGLISH:
        raise SystemExit(f"unknown geometry {geometry!r}: tiny, 2m, 7m or one of {RELEASED_ENGLISH}")
    return released


def make_config(geometry: str, vocab: int, tokenizer: Path) -> dict:
    from pocket_tts.utils.config import CONFIGS_DIR

    released = released_config(geometry)
    cfg = yaml.safe_load((CONFIGS_DIR / f"{released}.yaml").read_text())
    cfg["weights_path"] = None
    cfg["weights_path_without_voice_cloning"] = None
    lm = cfg["flow_lm"]
    lm["lookup_table"].update(n_bins=vocab, tokenizer="sentencepiece", tokenizer_path=str(tokenizer))
    if geometry == "tiny":
        lm["flow"].update(depth=2, dim=32)
        lm["transformer"].update(d_model=128, hidden_scale=2, num_heads=2, num_layers=2)
        lm["lookup_table"]["dim"] = 128
        mimi = cfg["mimi"]
        mimi["seanet"].update(dimension=64, n_filters=8)
        mimi["transformer"].update(d_model=64, num_heads=2, num_layers=2, context=50,
                                   dim_feedforward=128, input_dimension=64, output_dimensions=[64])
        mimi["quantizer"]["output_dimension"] = 64
        mimi["outer_dim"] = 64
    return cfg


def speechlike(seconds: float, rate: int, seed: int) -> np.ndarray:
    """Voiced bursts with pauses: enough structure for end_on_pause to find an end."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = 110 + 40 * rng.random()
    wave = sum(np.sin(2 * np.pi * f0 * k * t + rng.random()) / k for k in range(1, 8))
    envelope = (np.sin(2 * np.pi * 3.0 * t) > -0.2).astype(np.float64)
    envelope[-int(0.3 * rate):] = 0.0  # ends on silence
    return (0.3 * wave * envelope / 3).astype(np.float32)


def write_wav(path: Path, audio: np.ndarray, rate: int) -> None:
    import scipy.io.wavfile

    scipy.io.wavfile.write(str(path), rate, (np.clip(audio, -1, 1) * 32767).astype(np.int16))


def load_reference(model_dir: Path, quantize: bool = False):
    from pocket_tts import TTSModel

    model = TTSModel.load_model(config=str(model_dir / "reference.yaml"))
    model.flow_lm.speaker_proj_weight.data.zero_()
    state = safetensors.torch.load_file(str(model_dir / "model.safetensors"))
    model.load_state_dict(state, strict=True)
    if quantize:
        from pocket_tts.quantization import RECOMMENDED_CONFIG, apply_dynamic_int8

        apply_dynamic_int8(model.flow_lm, RECOMMENDED_CONFIG)
    return model


def build(model_dir: Path, geometry: str, seed: int) -> None:
    from pocket_tts.models.model_state import export_model_state

    model_dir.mkdir(parents=True, exist_ok=True)
    # the small models' 300 pieces keep their tokenizer quick to train; the vocabulary size
    # changes one table lookup, not a frame's cost
    wide = released_config(geometry) in ("english", "english_2026-04_24l", "english_drifting_26-09")
    vocab = train_tokenizer(model_dir / "tokenizer.model", 600 if wide and geometry != "tiny" else 300, seed)
    (model_dir / "reference.yaml").write_text(
        yaml.safe_dump(make_config(geometry, vocab, model_dir / "tokenizer.model")))
    torch.manual_seed(seed)
    from pocket_tts import TTSModel

    model = TTSModel.load_model(config=str(model_dir / "reference.yaml"))
    lm = model.flow_lm
    with torch.no_grad():
        lm.speaker_proj_weight.normal_(0.0, lm.speaker_proj_weight.shape[1] ** -0.5)
        lm.emb_std.uniform_(0.5, 1.5)
        lm.emb_mean.normal_(0.0, 0.1)
        # EOS logits around the threshold, so utterances end at varied frames
        lm.out_eos.weight.normal_(0.0, lm.out_eos.weight.shape[1] ** -0.5)
        lm.out_eos.bias.fill_(model.eos_threshold - 1.5)
    safetensors.torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                                str(model_dir / "model.safetensors"))
    (model_dir / "embeddings").mkdir(exist_ok=True)
    for index, name in enumerate(["alba", "marius"]):
        wav_path = model_dir / f"{name}.wav"
        write_wav(wav_path, speechlike(1.2 + 0.4 * index, 24000, seed + index), 24000)
        state = model.get_state_for_audio_prompt(wav_path)
        export_model_state(state, model_dir / "embeddings" / f"{name}.safetensors")


def run(model_dir: Path, jobs_path: Path, out_path: Path) -> None:
    from pocket_tts.models.model_state import export_model_state
    from pocket_tts.models.text_chunking import split_into_best_sentences

    jobs = json.loads(jobs_path.read_text())
    models = {}
    out: dict[str, torch.Tensor] = {}
    meta: dict[str, object] = {}
    for job in jobs:
        quantize = bool(job.get("quantize", False))
        if quantize not in models:
            models[quantize] = load_reference(model_dir, quantize)
        model = models[quantize]
        name = job["name"]
        if job["kind"] == "chunks":
            tok = model.flow_lm.conditioner.tokenizer
            chunks = split_into_best_sentences(tok, job["text"], job.get("max_tokens", 50), False,
                                               False, replace_characters=model.replace_characters)
            meta[name] = {"chunks": chunks, "tokens": [tok.encode(c) for c in chunks]}
        elif job["kind"] == "clone":
            state = model.get_state_for_audio_prompt(Path(job["wav"]))
            export_model_state(state, job["export"])
        elif job["kind"] == "generate":
            voice = model.get_state_for_audio_prompt(Path(job["voice"]))
            model.temp = job.get("temperature", 0.3)
            played, eos = [], []
            original = model._run_flow_lm_and_increment_step
            decode = model.mimi.decode_from_latent

            # The wrappers run within this iteration only, so the loop variables they use are current.
            def record(*args, **kwargs):
                latent, is_eos = original(*args, **kwargs)  # noqa: B023
                if kwargs.get("backbone_input_latents") is not None:
                    eos.append(bool(is_eos.item()))  # noqa: B023
                return latent, is_eos

            def record_decode(latent, state):
                played.append(latent[0].clone())  # noqa: B023  (de-normalised latents, as Mimi gets them)
                return decode(latent, state)  # noqa: B023

            model._run_flow_lm_and_increment_step = record
            model.mimi.decode_from_latent = record_decode
            torch.manual_seed(job["seed"])
            audio = model.generate_audio(voice, job["text"])
            model._run_flow_lm_and_increment_step = original
            model.mimi.decode_from_latent = decode
            out[f"{name}/audio"] = audio.contiguous()
            out[f"{name}/latents"] = torch.cat(played)
            meta[name] = {"eos": eos}
    out["meta"] = torch.frombuffer(bytearray(json.dumps(meta).encode()), dtype=torch.uint8)
    safetensors.torch.save_file(out, str(out_path))


def shapes(out_path: Path, configs: list[str]) -> None:
    """State-dict shapes of released configs, built with random weights and no download."""
    from pocket_tts.models import tts_model
    from pocket_tts.modules import text_conditioner
    from pocket_tts.utils.config import CONFIGS_DIR, load_config

    class _NoTokenizer:  # the shapes do not depend on the tokenizer
        def __init__(self, *args, **kwargs) -> None:
            pass

    text_conditioner.build_tokenizer = _NoTokenizer
    result = {}
    for name in configs:
        config = load_config(CONFIGS_DIR / f"{name}.yaml")
        config.weights_path = config.weights_path_without_voice_cloning = None
        model = tts_model.TTSModel._from_pydantic_config_with_weights(config, 0.3, 1, None, -4.0)
        t = config.flow_lm.transformer
        decoder = config.mimi.decoder_transformer or config.mimi.transformer
        result[name] = {
            "shapes": {k: list(v.shape) for k, v in model.state_dict().items()},
            "config": {"num_heads": t.num_heads, "num_kv_heads": t.num_kv_heads or t.num_heads,
                       "num_layers": t.num_layers, "flow_type": config.flow_lm.flow.type,
                       "eos_threshold": config.default_eos_threshold,
                       "decoder_context": decoder.context, "decoder_heads": decoder.num_heads,
                       "ratios": (config.mimi.decoder_seanet or config.mimi.seanet).ratios}}
    out_path.write_text(json.dumps(result))


if __name__ == "__main__":
    command, directory = sys.argv[1], Path(sys.argv[2])
    if command == "shapes":
        shapes(directory, sys.argv[3:])
    elif command == "build":
        build(directory, sys.argv[3], int(sys.argv[4]))
    else:
        run(directory, Path(sys.argv[3]), Path(sys.argv[4]))
    # The work is done and written. Skip the interpreter's teardown: torch's thread
    # pools in the reference sometimes abort there ("terminate called without an
    # active exception"), which says nothing about the results.
    sys.stdout.flush()
    os._exit(0)
