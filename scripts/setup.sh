#!/usr/bin/env bash
# Install voxgate into ./.venv (created if missing).
#   scripts/setup.sh          the gateway with its ASR, Piper TTS (bundled voice) and Pocket TTS engines
#   scripts/setup.sh --test   the same plus everything the test suite needs (apt packages included)
#   scripts/setup.sh --omnivoice   the gateway with the OmniVoice engine too (docs/engines/omnivoice.md)
# torch: a CPU build of torch 2.13.0 is installed first when no torch is present,
# so pip never pulls a multi-GB CUDA build as a side effect of the [tts] extra.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="asr,tts,piper,client"
want_test=0
if [[ "${1:-}" == "--test" ]]; then
  extras="test"
  want_test=1
elif [[ "${1:-}" == "--omnivoice" ]]; then
  extras="asr,tts,omnivoice"
fi

if [[ $want_test == 1 ]] && command -v apt-get >/dev/null 2>&1; then
  sudo_cmd=""
  if [[ $(id -u) != 0 ]]; then sudo_cmd="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends espeak-ng sox libsox-fmt-all >/dev/null
  $sudo_cmd apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
  # real peers of the replica tests: the shared auth store and a load balancer
  $sudo_cmd apt-get install -y -qq --no-install-recommends redis-server haproxy >/dev/null
  # the LAN share's certificate is made with the openssl command
  $sudo_cmd apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  "${pip[@]}" install "torch==2.13.0"
fi
"${pip[@]}" install -e ".[${extras}]"
echo "voxgate installed in $(pwd)/.venv"
