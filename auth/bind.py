"""The start-up check: refuse to serve a non-loopback address with no protection."""

from __future__ import annotations

import ipaddress

from .config import AuthConfig

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback_host(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and the usual names for them."""
    text = host.strip().strip("[]").lower()
    if text in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def refuse_unsafe_bind(config: AuthConfig, host: str) -> str | None:
    """The message to refuse start-up with, or None when binding ``host`` is safe.

    Binding beyond loopback is safe with an API key, with trusted networks, or
    when ``allow_anonymous`` says the deployment is open on purpose. A PIN does
    not exist at start-up (LAN sharing makes one at run time, on its own
    listener), so the message points to it as the way to share a local server.
    """
    if is_loopback_host(host) or config.has_key or config.trusted_networks or config.allow_anonymous:
        return None
    return (
        f"{host} is not a loopback address, and listening there needs a credential. Choose one of:\n"
        "  1. an API key: set VOXGATE_API_KEY (or VOXGATE_API_KEY_FILE);\n"
        "  2. a PIN: keep the default 127.0.0.1 bind and enable LAN sharing "
        "(POST /v1/admin/share from this machine), which opens a PIN-protected LAN listener;\n"
        "  3. trusted networks: set VOXGATE_TRUSTED_NETWORKS to the CIDRs allowed without a credential;\n"
        "or start with --allow-anonymous to serve everyone on purpose."
    )


def proxy_warning(config: AuthConfig) -> str | None:
    """What to warn about at start-up when a proxy is trusted but the gateway is not
    in server mode with an API key: every client that proxy names as ``127.0.0.1``
    (or that it fails to name) is then judged as local mode judges it."""
    if not config.forwarded_allow_ips or (config.server_mode and config.has_key):
        return None
    return ("VOXGATE_FORWARDED_ALLOW_IPS names a proxy, but the gateway is not in server mode with an API key: "
            "run proxied deployments with VOXGATE_SERVER_MODE=1 and VOXGATE_API_KEY(_FILE) (docs/deployment.md)")
