"""Machine codes of the auth refusals, sent next to the exact ``detail`` strings.

Clients switch on these, never on the English details (which stay exactly as
AUTH.md words them). The gateway lists them in its one error table
(gateway/errors.py) with their HTTP status and close code.
"""

from __future__ import annotations

PIN_REQUIRED = "pin_required"
API_KEY_REQUIRED = "api_key_required"
LOOPBACK_REQUIRED = "loopback_required"
ADMIN_REQUIRED = "admin_required"
ORIGIN_REJECTED = "origin_rejected"
TOO_MANY_ATTEMPTS = "too_many_attempts"
AUTH_NOT_READY = "auth_not_ready"
SHARE_UNAVAILABLE = "share_unavailable"
BAD_REQUEST = "bad_request"
TOO_LARGE = "too_large"
HOST_REJECTED = "host_rejected"
TOO_MANY_TOKENS = "too_many_tokens"

ALL = (PIN_REQUIRED, API_KEY_REQUIRED, LOOPBACK_REQUIRED, ADMIN_REQUIRED, ORIGIN_REJECTED, TOO_MANY_ATTEMPTS,
       AUTH_NOT_READY, SHARE_UNAVAILABLE, BAD_REQUEST, TOO_LARGE,
       HOST_REJECTED, TOO_MANY_TOKENS)
