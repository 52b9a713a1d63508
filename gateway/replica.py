"""This process's name among the replicas behind one load balancer.

A replica's id is the prefix of the resume tokens it issues
(gateway/resume_tokens.py), so a balancer sends a resume to the replica that
holds its session by the token alone (docs/deployment.md, "Resuming dictation
behind a balancer"). It is ``VOXGATE_REPLICA_ID``, or else the first label of
the host name: a pod's name in a Kubernetes StatefulSet, the container id under
Docker. Replicas that share a host (several processes on one machine) must each
set their own.

An id is 1..63 letters, digits, ``-`` or ``_``: never a ``.``, which ends the
prefix, and nothing a URL, a query or a proxy's server name must escape.
"""

from __future__ import annotations

import re
import socket

MAX_CHARS = 63  # a DNS label
FALLBACK = "voxgate"  # a host name with nothing usable in its first label
_VALID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_CHARS}}}")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_-]")


def is_replica_id(text: str) -> bool:
    return _VALID.fullmatch(text) is not None


def parse_replica_id(raw: str) -> str | None:
    """``VOXGATE_REPLICA_ID``: an id, or None when unset (the host's is used)."""
    if raw == "":
        return None
    if not is_replica_id(raw):
        raise ValueError(f"must be 1..{MAX_CHARS} letters, digits, '-' or '_' "
                         "(it is the prefix of this replica's resume tokens, which a '.' ends)")
    return raw


def default_replica_id(hostname: str | None = None) -> str:
    """The id of a replica that sets none: the first label of ``hostname`` (this
    host's by default), lower-cased, each other character made a ``-``."""
    name = socket.gethostname() if hostname is None else hostname
    label = _INVALID_CHAR.sub("-", name.split(".", 1)[0].lower())[:MAX_CHARS]
    return label or FALLBACK
