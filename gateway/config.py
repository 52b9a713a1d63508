"""Settings: one frozen object, built once at the edge from env vars and CLI flags.

Every option is declared once in ``OPTIONS`` (name, env var, parser, default,
help). ``Settings.from_env`` and the CLI both go through it, so a bad value
always names the variable and says why, and the README table can be checked
against this list. Nothing outside this module reads ``os.environ``: ``Settings.environ`` carries it.

Longer than 300 lines on purpose: each setting is a line in ``OPTIONS`` and one in ``Settings`` (the two tables take ~125).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from auth import AuthConfig
from auth.config import IPNetwork, short_key_problem
from gateway.config_parsers import (
    _bool,
    _choice,
    _device,
    _engines,
    _float_range,
    _hosts,
    _int_range,
    _networks,
    _opt_path,
    _opt_str,
    _origins,
    _path,
    _paths,
    _str,
    _wyoming_uri,
    parse_tcp_uri,
)
from gateway.replica import default_replica_id, parse_replica_id
from gateway.share_tls import supplied_pair_problem

ENV_PREFIX = "VOXGATE_"


class ConfigError(ValueError):
    """A setting has a bad value; the message names the variable and why."""


@dataclass(frozen=True)
class Option:
    name: str  # Settings attribute
    parse: Callable[[str], Any]
    default: str  # raw default, parsed like any other value ("" = unset)
    help: str
    secret: bool = False

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


DEFAULT_DATA_DIR = Path("~/.local/share/voxgate").expanduser()


def _default_data_dir() -> str:
    # Resolved at the edge only (Settings.from_env); ~ is expanded by _path.
    return "~/.local/share/voxgate"


OPTIONS: tuple[Option, ...] = (
    # listener and mode
    Option("host", _str, "127.0.0.1", "Address to bind. A non-loopback address needs a credential (see docs/auth.md)."),
    Option("port", _int_range(0, 65535), "8000", "TCP port to bind."),
    Option("server_mode", _bool, "0", "Server mode: remote admin with the API key (the container default)."),
    Option("api_key", _opt_str, "", "API key for consume (and admin in server mode). Prefer VOXGATE_API_KEY_FILE.", secret=True),
    Option("api_key_file", _opt_path, "", "File holding the API key (first line); wins over VOXGATE_API_KEY."),
    Option("allow_short_api_key", _bool, "0", "Start even with an API key shorter than 24 characters (a warning is logged); without it such a key refuses to start."),
    Option("allow_anonymous", _bool, "0", "Allow consume without any credential on a non-loopback bind (deliberately open)."),
    Option("trusted_networks", _networks, "", "Comma-separated CIDRs whose clients may consume without a credential."),
    Option("allowed_origins", _origins, "", "Extra browser origins allowed for cookie credentials and WebSockets."),
    Option("forwarded_allow_ips", _networks, "", "Proxies whose X-Forwarded-For is trusted (CIDRs)."),
    Option("share_host", _opt_str, "", "LAN address for the PIN-share listener (default: the primary LAN address)."),
    Option("share_port", _int_range(0, 65535), "0", "Port for the PIN-share listener (0: main port + 1)."),
    Option("share_cert", _opt_path, "", "PEM certificate the HTTPS share listener serves (with VOXGATE_SHARE_KEY); unset: a self-signed one kept in <data_dir>/share-tls."),
    Option("share_key", _opt_path, "", "PEM private key of VOXGATE_SHARE_CERT; set both or neither."),
    Option("data_dir", _path, _default_data_dir(), "Where voices, models and other state are kept."),
    Option("log_level", _choice("debug", "info", "warning", "error"), "info", "Log level."),
    # engines
    Option("engines", _engines, "pocket,piper,asr",
           "Engines to load at startup: pocket, piper, omnivoice, asr (comma-separated, or none)."),
    Option("tts_engine", _choice("auto", "pocket", "piper", "omnivoice"), "auto",
           "Default TTS engine for requests that name none; auto: pocket when its weights are on disk, else piper."),
    Option("pocket_dir", _opt_path, "", "Pocket TTS model directory (default: <data_dir>/models/pocket)."),
    Option("pocket_quantize", _choice("none", "int8"), "int8", "Pocket TTS weight quantization of the LM linears."),
    Option("pocket_decoder_precision", _choice("fp32", "bf16", "int8"), "fp32", "Pocket TTS's Mimi decoder arithmetic: fp32 (the reference's), bf16 or int8 (faster, the audio moves slightly: docs/engines/pocket.md); bf16 needs AVX512_BF16 or AMX, int8 AVX512_VNNI, else the gateway refuses to start."),
    Option("tts_threads", _int_range(0, 256), "0", "Torch threads for TTS (0: all cores)."),
    Option("max_tts_sessions", _int_range(1, 10000), "16", "Concurrent TTS sessions (/v1/tts sockets, HTTP streams, vendor fronts' sessions and ElevenLabs contexts, Wyoming syntheses); above it new ones close 1013 (HTTP: 503)."),
    Option("asr_model", _str, "tiny.en", "ASR model: a bundled id (tiny.en, whisper-base), a faster-whisper name or a CTranslate2 directory."),
    Option("asr_compute_type", _str, "int8", "CTranslate2 compute type for the ASR model."),
    Option("asr_threads", _int_range(0, 256), "0", "CPU threads per ASR decode (0: the cores divided among VOXGATE_ASR_LANES)."),
    Option("max_dictation_streams", _int_range(1, 10000), "8", "Concurrent dictation streams (/v1/dictation, Deepgram, OpenAI Realtime, Wyoming); above it new ones close 1013."),
    Option("idle_timeout_s", _float_range(1, 3600), "30", "Close a socket (4408) after this long with no message or read."),
    # OmniVoice TTS engine (engines/omnivoice, the [omnivoice] extra; docs/engines/omnivoice.md)
    Option("device", _device, "auto", "Torch device for OmniVoice: auto (cuda, then mps, then cpu), cpu, cuda, cuda:N, mps."),
    Option("omnivoice_model", _str, "", "OmniVoice model: a directory, or a model id already in the local Hugging Face cache (default: <data_dir>/models/omnivoice)."),
    Option("omnivoice_idle_s", _float_range(0, 86400), "0", "Unload the OmniVoice model after this long without a request (0: never); the next request reloads it."),
    Option("omnivoice_asr_model", _str, "", "Whisper model (transformers directory or cached id) that transcribes voice clips sent without ref_text (default: openai/whisper-large-v3-turbo if cached)."),
    Option("omnivoice_steps", _int_range(1, 128), "32", "OmniVoice decoding steps per sentence (fewer: faster, rougher)."),
    Option("omnivoice_max_streams", _int_range(1, 1000), "8", "OmniVoice utterances waiting or generating at once; one more gets over_capacity."),
    # Piper TTS engine
    Option("piper_voices", _paths, "", "Comma-separated directories of extra Piper voices (NAME.onnx + NAME.onnx.json)."),
    Option("piper_threads", _int_range(0, 256), "0", "Piper worker threads, one inference each (0: one per core)."),
    # Wyoming front (Home Assistant and satellites)
    Option("wyoming_uri", _wyoming_uri, "",
           "Also serve the Wyoming protocol at tcp://HOST:PORT (e.g. tcp://127.0.0.1:10300); unset: off."),
    Option("wyoming_zeroconf", _bool, "0", "Announce the Wyoming listener over mDNS (needs the zeroconf package)."),
    # resource limits and the Host allow-list (docs/deployment.md, docs/auth.md)
    Option("allowed_hosts", _hosts, "", "Host names the gateway answers to besides loopback names, the bind address and the LAN-share address: name, .domain (with subdomains), or * for any."),
    Option("limit_concurrency", _int_range(8, 100000), "256", "Open connections (HTTP and WebSocket) past which new HTTP requests and WebSocket upgrades get 503; keep it under the process's open-file limit."),
    Option("header_timeout_s", _float_range(1, 300), "10", "Close a connection whose request headers are not complete within this time."),
    Option("pending_sockets", _int_range(1, 100000), "64", "WebSockets waiting for an in-band credential (ElevenLabs' first message) at once; one more is closed 1013."),
    Option("pending_sockets_per_client", _int_range(1, 100000), "8", "Such waiting WebSockets from one client address (after trusted proxies); one more is closed 1013."),
    Option("auth_wait_s", _float_range(0.5, 60), "5", "Time a WebSocket has to send the first message that carries its credential; then it is closed 1008."),
    Option("max_transcriptions", _int_range(1, 64), "2", "Concurrent file transcriptions; more get 503 + Retry-After (live dictation streams are counted apart)."),
    Option("decode_memory_mb", _int_range(64, 65536), "512", "Memory (address space, MB) a decoder process may take for one uploaded file past its loaded size; a file that needs more gets 400 bad_audio."),
    Option("decode_cpu_s", _float_range(1, 3600), "60", "CPU seconds a decoder process may spend on one uploaded file; a file that needs more gets 400 bad_audio."),
    Option("resume_grace_s", _float_range(0, 3600), "30", "How long a resumable dictation or TTS session (resumable=true) is held after its socket drops, waiting for the client to resume it; its results stay retrievable once for as long after it ends (0: sessions are not held)."),
    Option("dictation_max_ahead_s", _float_range(1, 3600), "30", "Audio a dictation stream may send ahead of real time; past it the gateway reads that socket only as fast as real time."),
    Option("max_tts_sessions_per_client", _int_range(0, 10000), "0", "TTS sessions (sockets, HTTP streams, ElevenLabs contexts, Wyoming syntheses) one client address may hold at once; past it new ones close 1013 (HTTP: 503). 0: a quarter of VOXGATE_MAX_TTS_SESSIONS, at least 1."),
    Option("max_dictation_streams_per_client", _int_range(0, 10000), "0", "Dictation streams (/v1/dictation, Deepgram, OpenAI Realtime, Wyoming) one client address may hold at once; past it new ones close 1013. 0: a quarter of VOXGATE_MAX_DICTATION_STREAMS, at least 1."),
    # replicas: the drain before a stop and the shared auth state (docs/deployment.md)
    Option("drain_s", _float_range(0, 3600), "30", "On SIGTERM, how long open sessions may take to finish their work (ready answers 503 meanwhile) before they close 1001."),
    Option("redis_url", _opt_str, "", "Redis for auth state shared by replicas (sessions, tickets, lockout, PIN), e.g. redis://host:6379/0; unset: in memory.", secret=True),
    Option("redis_prefix", _str, "voxgate:", "Prefix of every Redis key, so deployments can share one Redis."),
    Option("replica_id", parse_replica_id, "", "This replica's name: the prefix of its resume tokens, on which a load balancer routes a dictation resume to this replica (docs/deployment.md); 1..63 letters, digits, - or _. Unset: the host name's first label (a StatefulSet pod's name); replicas that share a host must each set one."),
    Option("asr_lanes", _int_range(0, 64), "0", "Decodes the ASR sidecar runs at once, each on VOXGATE_ASR_THREADS threads (0: the cores divided by VOXGATE_ASR_THREADS; both 0: one per core)."),  # dictation at load
    Option("asr_turn_model", _str, "off", "End-of-turn model for /v2/listen turns: off (a turn ends after its silence), auto (Smart Turn v3 from an installed pipecat-ai: a pause the model hears as a finished turn ends it at the eager point), or the path of its ONNX file (docs/fronts.md)."),
    Option("asr_batch", _int_range(1, 64), "4", "Most finals of different streams the ASR sidecar decodes together in one beam search."),
    Option("asr_final_window", _choice("auto", "short", "full"), "short", "Encoder window of dictation finals: short (the utterance plus 12 s of silence: as many word errors as offline decoding, at less than half the cost of the 30 s window), full (Whisper's 30 s window, as file transcription decodes it), or auto (full for streams without eager, short for eager streams; docs/dictation.md)."),
    # Piper's fast graph (engines/piper/fastgraph.py, docs/engines/piper.md)
    Option("piper_graph", _choice("fast", "stock"), "fast", "Piper voices' ONNX graph: fast (rewritten at load for ONNX Runtime's blocked-layout kernels, checked against stock) or stock (as shipped)."),
    # Piper's int8 decoder (engines/piper/int8.py, docs/engines/piper.md)
    Option("piper_precision", _choice("fp32", "int8"), "fp32", "Piper voices' decoder: fp32, or int8 (quantized at load on top of the fast graph, about 30% less CPU per second of audio, a higher noise floor in pauses; checked against fp32 at load)."),
)

_BY_NAME = {opt.name: opt for opt in OPTIONS}


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    server_mode: bool = False
    api_key: str | None = field(default=None, repr=False)
    api_key_file: Path | None = None
    allow_short_api_key: bool = False
    allow_anonymous: bool = False
    trusted_networks: tuple[IPNetwork, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    forwarded_allow_ips: tuple[IPNetwork, ...] = ()
    share_host: str | None = None
    share_port: int = 0
    share_cert: Path | None = None
    share_key: Path | None = None
    data_dir: Path = DEFAULT_DATA_DIR
    log_level: str = "info"
    engines: tuple[str, ...] = ("pocket", "piper", "asr")
    tts_engine: str = "auto"
    pocket_dir: Path | None = None
    pocket_quantize: str = "int8"
    pocket_decoder_precision: str = "fp32"
    tts_threads: int = 0
    max_tts_sessions: int = 16
    asr_model: str = "tiny.en"
    asr_compute_type: str = "int8"
    asr_threads: int = 0
    max_dictation_streams: int = 8
    idle_timeout_s: float = 30.0
    device: str = "auto"
    omnivoice_model: str = ""
    omnivoice_idle_s: float = 0.0
    omnivoice_asr_model: str = ""
    omnivoice_steps: int = 32
    omnivoice_max_streams: int = 8
    piper_voices: tuple[Path, ...] = ()
    piper_threads: int = 0
    wyoming_uri: str | None = None
    wyoming_zeroconf: bool = False
    allowed_hosts: tuple[str, ...] = ()
    limit_concurrency: int = 256
    header_timeout_s: float = 10.0
    pending_sockets: int = 64
    pending_sockets_per_client: int = 8
    auth_wait_s: float = 5.0
    max_transcriptions: int = 2
    decode_memory_mb: int = 512
    decode_cpu_s: float = 60.0
    dictation_max_ahead_s: float = 30.0
    resume_grace_s: float = 30.0
    max_tts_sessions_per_client: int = 0
    max_dictation_streams_per_client: int = 0
    drain_s: float = 30.0
    redis_url: str | None = field(default=None, repr=False)
    redis_prefix: str = "voxgate:"
    replica_id: str | None = None
    asr_lanes: int = 0
    asr_batch: int = 4
    asr_final_window: str = "short"
    asr_turn_model: str = "off"
    piper_graph: str = "fast"
    piper_precision: str = "fp32"
    # The environment these settings were read from: what the child processes start
    # from (gateway/child_env.py filters it). Never shown, compared or logged.
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Parse ``VOXGATE_*`` from ``environ`` (default ``os.environ``), then apply overrides.

        Overrides are typed values (from CLI flags that were already parsed) or raw
        strings, which go through the same parser as the env var.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for opt in OPTIONS:
            raw = env.get(opt.env)
            values[opt.name] = parse_option(opt.name, opt.default if raw is None else raw)
        for name, value in overrides.items():
            if name not in _BY_NAME:
                raise ConfigError(f"unknown setting {name!r}")
            if value is None:
                continue
            values[name] = parse_option(name, value) if isinstance(value, str) else value
        if values["api_key_file"] is not None:  # the file wins, and is what the key-length rule judges
            values["api_key"] = _read_key_file(values["api_key_file"])
        return cls(**values, environ=dict(env))

    def __post_init__(self) -> None:
        where = f"VOXGATE_API_KEY_FILE={str(self.api_key_file)!r}" if self.api_key_file else "VOXGATE_API_KEY"
        problem = short_key_problem(self.api_key, where)
        if problem is not None and not self.allow_short_api_key:
            raise ConfigError(problem)
        tls_problem = supplied_pair_problem(self.share_cert, self.share_key)
        if tls_problem is not None:
            raise ConfigError(tls_problem)
        if "pocket" in self.engines and self.pocket_decoder_precision != "fp32":
            from engines.pocket.decoder_precision import unavailable  # imports torch: only when asked for

            precision_problem = unavailable(self.pocket_decoder_precision)
            if precision_problem is not None:
                raise ConfigError(precision_problem)

    def with_key_file(self) -> Settings:
        """Read ``api_key_file`` (if set) into ``api_key``; the file wins."""
        if self.api_key_file is None:
            return self
        return replace(self, api_key=_read_key_file(self.api_key_file))

    def replace(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def auth_config(self) -> AuthConfig:
        """What the auth middleware enforces, from these settings."""
        return AuthConfig(server_mode=self.server_mode, api_key=self.api_key,
                          trusted_networks=self.trusted_networks, allowed_origins=self.allowed_origins,
                          forwarded_allow_ips=self.forwarded_allow_ips, allow_anonymous=self.allow_anonymous,
                          bind_host=self.host, allowed_hosts=self.allowed_hosts)

    @property
    def pocket_model_dir(self) -> Path:
        return self.pocket_dir or self.data_dir / "models" / "pocket"

    @property
    def omnivoice_model_ref(self) -> str:
        return self.omnivoice_model or str(self.data_dir / "models" / "omnivoice")

    @property
    def wyoming_address(self) -> tuple[str, int] | None:
        """(host, port) of the Wyoming listener, or None when it is off."""
        return parse_tcp_uri(self.wyoming_uri) if self.wyoming_uri else None

    @property
    def replica(self) -> str:
        """This replica's id: ``replica_id``, or else derived from the host name (gateway/replica.py)."""
        return self.replica_id or default_replica_id()

    @property
    def voices_dir(self) -> Path:
        return self.data_dir / "voices"

    def describe(self) -> dict[str, Any]:
        """Every setting for a startup log or /v1/admin, secrets masked."""
        out = {}
        for f in fields(self):
            if f.name == "environ":
                continue
            value = getattr(self, f.name)
            if f.name in ("api_key", "redis_url"):  # a Redis URL may hold a password
                value = "(set)" if value else "(unset)"
            elif isinstance(value, tuple):
                value = [str(v) for v in value]
            elif isinstance(value, Path):
                value = str(value)
            out[f.name] = value
        return out


def _read_key_file(path: Path) -> str:
    """The first line of the API key file, stripped."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"VOXGATE_API_KEY_FILE={str(path)!r} cannot be read: {exc.strerror}") from None
    key = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not key:
        raise ConfigError(f"VOXGATE_API_KEY_FILE={str(path)!r} is empty")
    return key


def parse_option(name: str, raw: str) -> Any:
    opt = _BY_NAME[name]
    try:
        return opt.parse(raw)
    except ValueError as exc:
        shown = "(hidden)" if opt.secret else repr(raw)
        raise ConfigError(f"{opt.env}={shown} {exc}") from None


def markdown_table() -> str:
    """The README's configuration table, generated from ``OPTIONS``."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for opt in OPTIONS:
        default = f"`{opt.default}`" if opt.default else "(unset)"
        rows.append(f"| `{opt.env}` | {default} | {opt.help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
