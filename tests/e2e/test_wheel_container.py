"""The container images' own install steps, run here so they cannot rot (no base
image can be pulled on this machine, so ``docker build`` itself cannot run).

The Dockerfiles are read, not copied: the build stage's ``COPY`` lines make the
build context, its ``RUN`` line that calls scripts/install-wheel.sh runs with
the ``ARG`` defaults and ``ENV`` of that stage (``/src`` and ``/opt/voxgate``
mapped to temporary directories), and the installed venv is then served with
the final stage's ``ENV``: the ASR extra transcribes real speech, the page and
the health check answer. Only ``TORCH_INDEX_URL`` is not the image's: PyTorch's
CPU index is out of reach here, so pip's configured index gives the same
torch release."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pytest
import tomllib
from packaging.specifiers import SpecifierSet

from gateway.audio import write_wav
from tests.support.net import free_port, stop_process
from tests.support.speech import piper_say, resample, silence, wer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = ("Dockerfile", "Dockerfile.cuda")
INSTALL_RUN = re.compile(r"/src/scripts/install-wheel\.sh /src /opt/voxgate$")
# The only other build step: the CUDA base image has no Python of its own.
APT_PYTHON = ("apt-get update && apt-get install -y --no-install-recommends python3 python3-venv "
              "&& rm -rf /var/lib/apt/lists/*")
SENTENCE = "Glue the sheet to the dark blue background."


@dataclass
class Stage:
    base: str
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[list[str], str]] = field(default_factory=list)  # (sources, destination), from the context
    copied_from: list[str] = field(default_factory=list)  # COPY --from=... lines
    runs: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) of a Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].strip() + " "
            continue
        full = (pending + line.strip()).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def pairs(rest: str) -> dict[str, str]:
    """``A=1 B="x y"`` as a dict (quotes removed, as the shell and Docker read them)."""
    return dict(item.split("=", 1) if "=" in item else (item, "") for item in shlex.split(rest))


def stages(path: Path) -> list[Stage]:
    global_args: dict[str, str] = {}
    result: list[Stage] = []
    for word, rest in instructions(path.read_text()):
        if word == "FROM":
            result.append(Stage(rest))
        elif not result:
            assert word == "ARG", f"{path.name}: {word} before the first FROM"
            global_args.update(pairs(rest))
        elif word == "ARG":
            result[-1].args.update(pairs(rest))
        elif word == "ENV":
            result[-1].env.update(pairs(rest))
        elif word == "COPY" and rest.startswith("--from="):
            result[-1].copied_from.append(rest)
        elif word == "COPY":
            *sources, dest = rest.split()
            result[-1].copies.append((sources, dest))
        elif word == "RUN":
            result[-1].runs.append(rest)
        else:
            result[-1].other.append(f"{word} {rest}")
    return result


def build_stage(name: str) -> Stage:
    build, final = stages(ROOT / name)
    assert build.base.endswith(" AS build"), build.base
    assert final.copied_from == ["--from=build /opt/voxgate /opt/voxgate"]
    return build


def install_command(stage: Stage) -> str:
    (command,) = [r for r in stage.runs if "install-wheel.sh" in r]
    assert INSTALL_RUN.search(command), command
    assert [r for r in stage.runs if r != command] in ([], [APT_PYTHON])
    return command


def stage_context(stage: Stage, src: Path) -> None:
    """Lay out ``/src`` as the stage's COPY lines make it, from this tree."""
    for sources, dest in stage.copies:
        assert dest.startswith("/src/"), dest
        for source in sources:
            target = src / dest.removeprefix("/src/")
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target = target / origin.name if dest.endswith("/") else target
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, target)


def test_both_images_install_the_same_way():
    cpu, cuda = build_stage("Dockerfile"), build_stage("Dockerfile.cuda")
    assert cpu.copies == cuda.copies
    assert install_command(cpu) == install_command(cuda)
    assert (cpu.args["TORCH_INDEX_URL"], cpu.args["TORCH_SPEC"], cpu.args["VOXGATE_EXTRAS"]) == (
        "https://download.pytorch.org/whl/cpu", "torch==2.13.0", "asr,tts,piper")
    # The CUDA image's torch cannot be installed here (several GB of CUDA wheels); what can
    # be checked without it: the extras exist, and the torch pair satisfies the [tts] extra.
    assert (cuda.args["TORCH_INDEX_URL"], cuda.args["TORCH_SPEC"]) == (
        "https://download.pytorch.org/whl/cu130", "torch==2.11.0 torchaudio==2.11.0")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(cuda.args["VOXGATE_EXTRAS"].split(",")) == {"asr", "tts", "piper", "omnivoice"} <= set(extras)
    (torch_range,) = [r for r in extras["tts"] if r.startswith("torch")]
    assert SpecifierSet(torch_range.removeprefix("torch")).contains("2.11.0")


def test_the_dockerignore_lets_in_exactly_what_the_copies_need():
    lines = [ln for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    copied = {source.rstrip("/") for sources, _ in build_stage("Dockerfile").copies for source in sources}
    assert lines[0] == "**" and allowed == copied


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The CPU image's install, run here: (venv, the final stage's ENV)."""
    build = build_stage("Dockerfile")
    work = tmp_path_factory.mktemp("image")
    src, venv = work / "src", work / "opt-voxgate"
    stage_context(build, src)
    command = install_command(build).replace("/src", str(src)).replace("/opt/voxgate", str(venv))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_") and k != "PYTHONPATH"}
    env.update(build.args)
    env.update(build.env)
    env["TORCH_INDEX_URL"] = ""  # see the module docstring
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], env=env, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout == "voxgate 0.1.0\n"
    _, final = stages(ROOT / "Dockerfile")
    return venv, final.env


def test_the_image_serves_dictation_the_page_and_its_health_check(image, tmp_path):
    venv, image_env = image
    port = free_port()
    key = "k" * 40
    (tmp_path / "key").write_text(key + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_") and k != "PYTHONPATH"}
    env.update({k: v.replace("/opt/voxgate", str(venv)).replace("$PATH", env["PATH"]) for k, v in image_env.items()})
    assert (env["VOXGATE_SERVER_MODE"], env["VOXGATE_HOST"]) == ("1", "0.0.0.0")
    # only loopback here: this machine's other addresses are never used by a test
    env.update(VOXGATE_HOST="127.0.0.1", VOXGATE_PORT=str(port), VOXGATE_DATA_DIR=str(tmp_path / "data"),
               VOXGATE_API_KEY_FILE=str(tmp_path / "key"), VOXGATE_ASR_THREADS="2")
    proc = subprocess.Popen(["voxgate", "serve"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                ready = httpx.get(url + "/health/ready", timeout=2)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the image's server did not become ready"
            time.sleep(0.2)
        assert ready.json()["asr"]["state"] == "ready"
        assert ready.json()["engines"]["piper"]["state"] == "ready"  # its voice is in the image
        assert ready.json()["engines"]["pocket"]["state"] == "missing"  # weights are pulled at run time
        assert httpx.get(url + "/").status_code == 200
        health_check = [w.replace("8000", str(port)) for w in healthcheck_command()]
        assert subprocess.run(health_check, env=env, timeout=30, check=False).returncode == 0
        samples, rate = piper_say(SENTENCE)
        wav = write_wav(resample(np.concatenate([silence(0.3, rate), samples, silence(0.3, rate)]), rate), 16000)
        r = httpx.post(url + "/v1/audio/transcriptions", files={"file": ("s.wav", wav, "audio/wav")},
                       headers={"Authorization": f"Bearer {key}"}, timeout=120)
        assert r.status_code == 200, r.text
        assert wer(SENTENCE, r.json()["text"]) <= 0.25, r.json()
    finally:
        stop_process(proc, 30)


def healthcheck_command() -> list[str]:
    _, final = stages(ROOT / "Dockerfile")
    (line,) = [o for o in final.other if o.startswith("HEALTHCHECK ")]
    return json.loads(line.split(" CMD ", 1)[1])
