#!/usr/bin/env bash
# Build voxgate's wheel from a source tree and install it, non-editable, into a new venv.
# These are the container images' install steps (Dockerfile, Dockerfile.cuda run this
# script); tests/e2e/test_wheel_container.py runs it too, so the images cannot rot
# without a test failing.
#
#   scripts/install-wheel.sh SOURCE_DIR VENV_DIR
#
# Environment:
#   VOXGATE_EXTRAS   extras to install with the wheel (default: asr,tts; empty: the core only)
#   TORCH_SPEC       the torch requirement(s) installed first, space-separated (default: torch==2.13.0;
#                    "none" skips it), e.g. "torch==2.11.0 torchaudio==2.11.0" for a CUDA 13 pair.
#                    Installed first and alone so the [tts] extra never pulls a build of its own choosing.
#   TORCH_INDEX_URL  where that torch comes from (default: pip's configured index). The CPU image
#                    points it at PyTorch's CPU wheel index; the CUDA image leaves it empty (PyPI's
#                    Linux torch wheels are CUDA builds).
#   PIP_NO_CACHE_DIR pip's own; the images set it so no cache is left in a layer.
#
# The source tree is copied before building, so building leaves nothing in it.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 SOURCE_DIR VENV_DIR" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
venv=$2
extras=${VOXGATE_EXTRAS-asr,tts}
torch_spec=${TORCH_SPEC:-torch==2.13.0}
python=${PYTHON:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Only what the wheel is built from; never a venv, git data or old build output.
tar -C "$src" --exclude=.git --exclude=.venv --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
    -cf - pyproject.toml README.md gateway engines auth | tar -C "$work" -xf -
mkdir "$work/wheels"

"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
if [[ -n $extras && $torch_spec != none ]]; then
  read -ra torch_reqs <<< "$torch_spec"
  "${pip[@]}" install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "${torch_reqs[@]}"
fi
"${pip[@]}" wheel --no-deps --wheel-dir "$work/wheels" "$work"
wheel=$(ls "$work"/wheels/voxgate-*.whl)
if [[ -n $extras ]]; then
  "${pip[@]}" install "${wheel}[${extras}]"
else
  "${pip[@]}" install "$wheel"
fi

# Fail the build here, not at the first request: the console script runs, and the app
# (browser client included) imports from the installed package, not from a source tree.
"$venv/bin/voxgate" --version
# pip only warns about an extra the package does not have; a typo must stop the build.
(cd / && "$venv/bin/python" - "$extras" <<'PY'
import sys
from importlib.metadata import metadata

import gateway
import gateway.app  # noqa: F401  (everything `serve` imports at start)
import gateway.http_api as http_api

assert "site-packages" in gateway.__file__, f"gateway comes from {gateway.__file__}, not the wheel"
assert (http_api.STATIC_DIR / "index.html").is_file(), f"no browser client in {http_api.STATIC_DIR}"
known = set(metadata("voxgate").get_all("Provides-Extra") or ())
unknown = [e for e in sys.argv[1].split(",") if e and e not in known]
assert not unknown, f"voxgate has no extra {unknown}; it has {sorted(known)}"
PY
)
