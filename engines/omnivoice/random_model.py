"""A tiny OmniVoice with random weights, built offline, in the released layout.

The directory it writes loads through ``OmniVoice.from_pretrained`` exactly like
the real checkpoint: ``config.json`` + ``model.safetensors`` (an ``OmniVoiceConfig``
over a small Qwen3), the text tokenizer files, and ``audio_tokenizer/`` (a
``HiggsAudioV2TokenizerModel`` and its feature extractor). Its audio geometry
is the real one: 24 kHz, a hop of 960 samples (25 frames/s) and a 2 kbps target,
which gives 8 quantizers of 1024 codes, so every code path runs at the real
frame rate; only the widths and depths are small. The speech is noise, but noise
that depends on every input: the codec's weights are drawn so that different codes
decode to different audio and different clips encode to different codes (see
``_randomize_codec``), so the seed, the step count, the text and the voice all
change the waveform, as they do with the released weights.

Used by the tests and the benchmark; nothing here touches a network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engines.omnivoice.runtime import import_omnivoice

# The control tokens OmniVoice's prompt uses (omnivoice.models.omnivoice).
SPECIAL_TOKENS = ("<|denoise|>", "<|lang_start|>", "<|lang_end|>", "<|instruct_start|>", "<|instruct_end|>",
                  "<|text_start|>", "<|text_end|>")
_CORPUS = (
    "The quick brown fox jumps over the lazy dog. Hello, world! How are you today? "
    "This is a sentence for the tokenizer; it has commas, numbers like 42 and 2026, and questions? "
    "male female child teenager young adult middle-aged elderly low pitch moderate pitch high pitch whisper "
    "american british australian indian accent en zh ja de fr es None [laughter] [sigh]"
)
SAMPLE_RATE = 24000
HOP = 960  # 8 * 5 * 4 * 6: 25 frames per second, as in the released audio tokenizer
DOWNSAMPLING = (8, 5, 4, 6)
BANDWIDTHS_KBPS = (0.5, 1, 1.5, 2)  # 2000 bit/s / (25 frames/s * 10 bit) = 8 quantizers


def build_text_tokenizer(vocab_size: int = 320) -> Any:  # a PreTrainedTokenizerFast
    """A byte-level BPE tokenizer trained on a small built-in corpus, with OmniVoice's control tokens."""
    import_omnivoice()  # first: transformers' audio modules import torchaudio
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", *SPECIAL_TOKENS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", additional_special_tokens=list(SPECIAL_TOKENS))


def audio_tokenizer_config() -> Any:  # a HiggsAudioV2TokenizerConfig
    import_omnivoice()
    from transformers import HiggsAudioV2TokenizerConfig

    acoustic = {"encoder_hidden_size": 4, "downsampling_ratios": list(DOWNSAMPLING), "decoder_hidden_size": 32,
                "upsampling_ratios": list(DOWNSAMPLING), "hidden_size": 16, "sampling_rate": SAMPLE_RATE}
    semantic = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
                "conv_dim": [8] * 7, "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2,
                "mask_time_prob": 0.0}
    return HiggsAudioV2TokenizerConfig(acoustic_model_config=acoustic, semantic_model_config=semantic,
                                       target_bandwidths=list(BANDWIDTHS_KBPS), sample_rate=SAMPLE_RATE,
                                       codebook_size=1024, codebook_dim=8)


def build_random_model(dest: Path, seed: int = 0, hidden_size: int = 32, layers: int = 2) -> Path:
    """Write a random OmniVoice model directory to ``dest`` (created) and return it."""
    omnivoice = import_omnivoice()
    import torch
    from transformers import DacFeatureExtractor, HiggsAudioV2TokenizerModel, Qwen3Config

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    text_tokenizer = build_text_tokenizer()
    audio_config = audio_tokenizer_config()
    # The text embedding also looks up the audio positions' ids (masked away later), so the LLM's
    # vocabulary must cover the audio codes too, as the real (151k-token) one does.
    vocab = max(len(text_tokenizer), audio_config.codebook_size + 1)
    llm = Qwen3Config(vocab_size=vocab, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=hidden_size // 2, max_position_embeddings=4096)
    llm._attn_implementation = "sdpa"
    config = omnivoice.OmniVoiceConfig(audio_vocab_size=audio_config.codebook_size + 1,
                                       audio_mask_id=audio_config.codebook_size,
                                       num_audio_codebook=audio_config.num_quantizers, llm_config=llm)
    model = omnivoice.OmniVoice(config)
    model.save_pretrained(dest)
    text_tokenizer.save_pretrained(dest)
    audio = HiggsAudioV2TokenizerModel(audio_config)
    _randomize_codec(audio, torch)
    _make_audible(audio, audio_config.num_quantizers, torch)
    audio.save_pretrained(dest / "audio_tokenizer")
    DacFeatureExtractor(sampling_rate=SAMPLE_RATE, hop_length=HOP).save_pretrained(dest / "audio_tokenizer")
    return dest


def _randomize_codec(audio_tokenizer: Any, torch: Any) -> None:
    """Draw the codec weights that transformers' initialisation leaves input-independent.

    Its codebooks start at zero (a real checkpoint loads them), so every code would
    decode to the same waveform and every clip would encode to code 0: the seed, the
    steps and the text could not change the audio. Its decoder convolutions start at
    std 0.02, which shrinks the codes' signal below the constant the transposed
    convolutions' biases add. Here the codebooks are N(0, 1), and the linear maps around
    them and the decoder's convolutions keep the variance (std 1/sqrt(fan-in), zero bias),
    so the codebooks' scale matches what the encoder projects onto them and the decoded
    audio follows the codes.
    """
    nn = torch.nn
    with torch.no_grad():
        for stage in audio_tokenizer.quantizer.quantizers:
            codebook = stage.codebook
            codebook.embed.normal_(0.0, 1.0)
            codebook.embed_avg.copy_(codebook.embed)
            codebook.cluster_size.fill_(1.0)
            for linear in (stage.project_in, stage.project_out):
                _keep_variance(linear.weight, linear.in_features, linear.bias)
        for linear in (audio_tokenizer.fc, audio_tokenizer.fc2):
            _keep_variance(linear.weight, linear.in_features, linear.bias)
        for conv in audio_tokenizer.acoustic_decoder.modules():
            if isinstance(conv, nn.Conv1d):
                _keep_variance(conv.weight, conv.in_channels // conv.groups * conv.kernel_size[0], conv.bias)
            elif isinstance(conv, nn.ConvTranspose1d):
                fan_in = conv.in_channels * conv.kernel_size[0] // conv.stride[0]
                _keep_variance(conv.weight, fan_in, conv.bias)


def _keep_variance(weight: Any, fan_in: int, bias: Any) -> None:
    weight.normal_(0.0, fan_in ** -0.5)
    if bias is not None:
        bias.zero_()


def _make_audible(audio_tokenizer: Any, quantizers: int, torch: Any) -> None:
    """Scale the decoder's last convolution so random codes decode to about -14 dBFS.

    OmniVoice's post-processing cuts quiet stretches as silence, and random weights
    decode at an arbitrary level: fixing it here keeps every utterance audible.
    """
    generator = torch.Generator().manual_seed(1)
    codes = torch.randint(0, audio_tokenizer.config.codebook_size, (1, quantizers, 50), generator=generator)
    with torch.no_grad():
        rms = float(audio_tokenizer.decode(codes).audio_values.pow(2).mean().sqrt())
        last = audio_tokenizer.acoustic_decoder.conv2
        last.weight.mul_(0.2 / rms)
        last.bias.mul_(0.2 / rms)
