"""The environment the gateway's child processes start with (the ASR sidecar,
the upload decoders): the one the settings were read from (``Settings.environ``), less
what a child must not see.
Nothing here reads the process environment: the caller at the settings edge passes it in.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.config import ENV_PREFIX

# Environment variables a child process never inherits: every VOXGATE_* (a child is
# configured by its arguments) and anything named like a credential.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less ``VOXGATE_*`` and credential-like variables."""
    return {name: value for name, value in environ.items()
            if not name.upper().startswith(ENV_PREFIX) and not any(p in name.upper() for p in SECRET_NAME_PARTS)}
