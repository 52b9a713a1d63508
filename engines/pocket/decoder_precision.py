"""The arithmetic of Mimi's decoder: fp32 (the default), bf16 or int8, chosen by the
user (``VOXGATE_POCKET_DECODER_PRECISION``, docs/engines/pocket.md).

- ``fp32``: the reference's arithmetic; the parity tests hold it to the reference.
- ``bf16``: the decoder path (quantizer projection, upsampler, decoder transformer,
  SEANet decoder) holds bfloat16 weights, and its activations and streaming state
  are bfloat16 too, so the convs' copies and activations move half the bytes;
  oneDNN's AVX512_BF16 / AMX kernels accumulate the products in float32.
- ``int8``: the decoder's matrix products at least ``INT8_MIN_INPUT`` wide in and
  ``INT8_MIN_OUTPUT`` out (the decoder transformer's linears, the SEANet convs of the
  wide stages) run on :class:`engines.pocket.kernels.Int8Matrix` (int8 weights, one
  scale per output channel; the input quantized at each call). The narrow stages
  and the conv that writes the waveform stay float32, like every activation and the
  state: on so few channels the int8 kernel's per-call quantizing costs more than it
  saves (a 64-in, 256-out product over 1920 rows takes 765 us in int8 against 591 in
  float32 on the reference machine), and that conv's output is the audio.

Either changes the audio (bench/pocket_decoder.py measures by how much), and
neither runs where the CPU lacks the instructions that make it fast: the settings
(gateway/config.py) and the engine's constructor refuse it with :func:`unavailable`'s
message rather than fall back.
"""

from __future__ import annotations

import torch
from torch import nn

from engines.pocket.kernels import Int8Linear, Int8Matrix, Linear
from engines.pocket.mimi import Mimi
from engines.pocket.streaming_conv import StreamingConv, StreamingConvTranspose

PRECISIONS = ("fp32", "bf16", "int8")
SETTING = "VOXGATE_POCKET_DECODER_PRECISION"
INT8_MIN_INPUT, INT8_MIN_OUTPUT = 128, 64  # the products that go int8 (see above)

_MISSING = {
    "bf16": "this CPU has no bfloat16 instructions (AVX512_BF16 or AMX) for torch's oneDNN kernels",
    "int8": "this CPU has no AVX512_VNNI instructions, or this torch build no fbgemm int8 kernels",
}


class DecoderPrecisionError(ValueError):
    """A decoder precision that is not one of ``PRECISIONS``, or that this machine cannot run."""


def cpu_supports(precision: str) -> bool:
    """Whether this CPU and torch build run ``precision`` on native instructions."""
    if precision == "fp32":
        return True
    cpu = torch.cpu
    if precision == "bf16":
        return bool(torch.backends.mkldnn.is_available()
                    and (_probe(cpu, "_is_avx512_bf16_supported") or _probe(cpu, "_is_amx_tile_supported")))
    engines = set(torch.backends.quantized.supported_engines)
    return bool(engines & {"x86", "fbgemm"}) and _probe(cpu, "_is_vnni_supported")


def _probe(module: object, name: str) -> bool:
    check = getattr(module, name, None)  # private torch API: absent means unknown, so no
    return bool(check()) if callable(check) else False


def unavailable(precision: str) -> str | None:
    """Why ``precision`` cannot be used here (a message naming the setting), or None."""
    if precision not in PRECISIONS:
        return f"{SETTING}={precision!r}: must be one of: {', '.join(PRECISIONS)}"
    if cpu_supports(precision):
        return None
    return f"{SETTING}={precision}: {_MISSING[precision]}; set it to fp32 (the default)"


def check(precision: str) -> None:
    """Raise :class:`DecoderPrecisionError` unless ``precision`` can run here."""
    problem = unavailable(precision)
    if problem is not None:
        raise DecoderPrecisionError(problem)


def apply_decoder_precision(mimi: Mimi, precision: str) -> None:
    """Switch ``mimi``'s decoder to ``precision``, once, after its weights are loaded.

    Decoder states made before the switch have the old dtype: make new ones.
    """
    check(precision)
    if precision == "bf16":
        for module in mimi.decoder_path():
            module.to(torch.bfloat16)
        mimi.decoder_dtype = torch.bfloat16
    elif precision == "int8":
        _int8_transformer(mimi.decoder_transformer)
        _int8_convs(mimi)


def _int8_transformer(transformer: nn.Module) -> None:
    targets = [(parent, name, child) for parent in transformer.modules()
               for name, child in parent.named_children() if isinstance(child, Linear)]
    for parent, name, child in targets:
        if _pays(child.out_features, child.in_features):
            setattr(parent, name, Int8Linear(child))


def _int8_convs(mimi: Mimi) -> None:
    for module in mimi.decoder.streaming_modules():
        matrix = module.step_matrix()
        if not _pays(*matrix.shape):
            continue
        if isinstance(module, StreamingConv):
            module.int8 = Int8Matrix(matrix, module.conv.bias)
        elif isinstance(module, StreamingConvTranspose):
            module.int8 = Int8Matrix(matrix)  # its bias is added after the overlap-add


def _pays(out_features: int, in_features: int) -> bool:
    return in_features >= INT8_MIN_INPUT and out_features >= INT8_MIN_OUTPUT
