"""The ``voxgate`` command: ``serve``, and the subcommands of the feature modules.

Each feature module under ``gateway/cli/`` exposes ``register(subparsers)``;
this file wires them and implements ``serve``. Settings are built here, once,
from the environment and the flags.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from gateway import __version__
from gateway.config import ConfigError, Settings
from gateway.logging_setup import configure_logging

log = logging.getLogger("voxgate")

FEATURE_COMMANDS = ("gateway.cli.models", "gateway.cli.say", "gateway.cli.transcribe")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"voxgate: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voxgate", description="Self-hosted WebSocket gateway for real-time speech.")
    parser.add_argument("--version", action="version", version=f"voxgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_serve(sub)
    import importlib

    for module_name in FEATURE_COMMANDS:
        importlib.import_module(module_name).register(sub)
    return parser


def _register_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the gateway",
                       description="Run the gateway. Every flag also has a VOXGATE_* variable; flags win.")
    p.add_argument("--host", help="address to bind (VOXGATE_HOST, default 127.0.0.1)")
    p.add_argument("--port", help="port (VOXGATE_PORT, default 8000)")
    p.add_argument("--server-mode", action="store_const", const=True, default=None,
                   help="server mode: remote admin with the API key (VOXGATE_SERVER_MODE)")
    p.add_argument("--api-key-file", help="file holding the API key (VOXGATE_API_KEY_FILE); "
                   "the key itself is only taken from VOXGATE_API_KEY or this file, never a flag")
    p.add_argument("--allow-anonymous", action="store_const", const=True, default=None,
                   help="allow consume with no credential on a non-loopback bind (VOXGATE_ALLOW_ANONYMOUS)")
    p.add_argument("--trusted-networks", help="CIDRs that may consume without a credential (VOXGATE_TRUSTED_NETWORKS)")
    p.add_argument("--data-dir", help="state directory (VOXGATE_DATA_DIR)")
    p.add_argument("--engines", help="engines to load: pocket,piper,asr or none (VOXGATE_ENGINES)")
    p.add_argument("--log-level", help="debug, info, warning, error (VOXGATE_LOG_LEVEL)")
    p.add_argument("--wyoming", dest="wyoming_uri", metavar="URI",
                   help="also serve the Wyoming protocol, e.g. tcp://127.0.0.1:10300 (VOXGATE_WYOMING_URI)")
    p.add_argument("--wyoming-zeroconf", action="store_const", const=True, default=None,
                   help="announce the Wyoming listener over mDNS (VOXGATE_WYOMING_ZEROCONF)")
    p.set_defaults(func=serve)


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {name: getattr(args, name, None) for name in (
        "host", "port", "server_mode", "api_key_file", "allow_anonymous", "trusted_networks",
        "data_dir", "engines", "log_level", "wyoming_uri", "wyoming_zeroconf")}
    return Settings.from_env(**overrides)


def serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure_logging(settings.log_level)
    from auth import refuse_unsafe_bind
    from auth.bind import proxy_warning

    refusal = refuse_unsafe_bind(settings.auth_config(), settings.host)
    if refusal:
        print(f"voxgate: refusing to start: {refusal}", file=sys.stderr)
        return 2
    warning = proxy_warning(settings.auth_config())
    if warning:
        log.warning("%s", warning)
    from gateway.fronts.wyoming.trust import refuse_wyoming_bind

    refusal = refuse_wyoming_bind(settings)
    if refusal:
        print(f"voxgate: refusing to start: {refusal}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(settings))


async def _serve(settings: Settings) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.serving import uvicorn_config

    app = create_app(settings)
    server = uvicorn.Server(uvicorn_config(app, settings))
    print(banner(settings), file=sys.stderr, flush=True)
    await server.serve()
    return 0 if server.started else 1


def banner(settings: Settings) -> str:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    creds = []
    if settings.api_key:
        creds.append("API key" + (" (from file)" if settings.api_key_file else ""))
    if settings.trusted_networks:
        creds.append("trusted networks " + ", ".join(str(n) for n in settings.trusted_networks))
    if settings.allow_anonymous:
        creds.append("anonymous consume allowed")
    creds.append("loopback clients")
    lines = [
        f"voxgate {__version__} on http://{host}:{settings.port}/",
        f"  mode:        {'server' if settings.server_mode else 'local'}",
        f"  credentials: {'; '.join(creds)}",
        f"  engines:     {', '.join(settings.engines) or 'none'} (loading in the background; GET /health)",
    ]
    tts = [name for name in settings.engines if name != "asr"]
    if tts:
        from gateway.app import default_tts_engine

        name, reason = default_tts_engine(settings, tts)
        lines.append(f"  tts default: {name} ({reason})")
    if settings.wyoming_uri:
        zeroconf = ", announced over mDNS" if settings.wyoming_zeroconf else ""
        lines.append(f"  wyoming:     {settings.wyoming_uri} (no auth: loopback"
                     f"{' and trusted networks' if settings.trusted_networks else ''} only{zeroconf})")
    lines.append(f"  data dir:    {settings.data_dir}")
    return "\n".join(lines)
