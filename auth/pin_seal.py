"""The LAN-share PIN as the auth store keeps it: never in clear.

The store (this process's memory, or a Redis that whoever reaches it can read)
holds one sealed record per PIN, ``v1.<key id>.<nonce>.<sealed>.<mac>``:

- ``mac``: HMAC-SHA256 of the PIN under the PIN key and a fresh random nonce.
  A presented PIN is checked by computing the same HMAC and comparing the two
  digests in constant time.
- ``sealed``: the PIN's bytes XOR the first bytes of HMAC-SHA256(key, nonce): a
  one-time pad per PIN, so that every replica can show the PIN to an admin (as
  ``GET /v1/admin/share`` does) without it being readable in the store.
- ``key id``: a digest of the key, not the key: a replica holding another key
  sees no PIN, instead of failing every check and spending the PIN's budget.

The PIN key is never in the store. It is derived from the API key when one is
set: every replica behind one balancer holds the same key (clients present it to
any of them), so any replica checks and shows a PIN that another one drew, and
changing the key ends a live PIN as it ends the key's sessions. Without an API
key the PIN key is drawn at random for this process, so only this process knows
its PIN: LAN sharing then works on one machine, the case it is made for.

Without the PIN key, the record gives a reader of the store nothing to test
guesses against offline (10^6 PINs would otherwise fall in a moment).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

VERSION = "v1"
_KEY_LABEL = b"voxgate LAN-share PIN key"
_KEY_ID_LABEL = b"voxgate LAN-share PIN key id"
_MAC_LABEL = b"mac:"
_PAD_LABEL = b"pad:"
NONCE_BYTES = 16
MAX_PIN_BYTES = hashlib.sha256().digest_size  # the pad is one HMAC-SHA256 block


def _hmac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


class PinSeal:
    """Seals PINs for the store and checks presented ones against a sealed record.
    Pure computation: safe from any thread."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("the PIN key needs a non-empty secret")
        self._key = _hmac(secret, _KEY_LABEL)
        self.key_id = _hmac(self._key, _KEY_ID_LABEL).hex()[:16]

    @classmethod
    def from_api_key(cls, api_key: str | None) -> PinSeal:
        """Derived from ``api_key`` (shared by every replica), or random for this process when there is none."""
        return cls(api_key.encode("utf-8") if api_key else secrets.token_bytes(32))

    def seal(self, pin: str) -> str:
        """The record to store for ``pin`` (ASCII digits)."""
        raw = pin.encode("ascii")
        if not raw or len(raw) > MAX_PIN_BYTES:
            raise ValueError(f"a PIN has 1 to {MAX_PIN_BYTES} characters")
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = bytes(a ^ b for a, b in zip(raw, _hmac(self._key, _PAD_LABEL, nonce), strict=False))
        return ".".join((VERSION, self.key_id, nonce.hex(), sealed.hex(), self._mac(nonce, raw).hex()))

    def owns(self, record: str) -> bool:
        """True when ``record`` was sealed with this key (so it can be checked and opened here)."""
        return self._parse(record) is not None

    def matches(self, record: str, presented: str) -> bool:
        """Constant-time check of ``presented`` against the PIN sealed in ``record``."""
        parsed = self._parse(record)
        if parsed is None:
            return False
        nonce, _, mac = parsed
        return hmac.compare_digest(self._mac(nonce, presented.encode("utf-8", "surrogatepass")), mac)

    def open(self, record: str) -> str | None:
        """The PIN sealed in ``record``; None when this key did not seal it or the record was altered."""
        parsed = self._parse(record)
        if parsed is None:
            return None
        nonce, sealed, mac = parsed
        raw = bytes(a ^ b for a, b in zip(sealed, _hmac(self._key, _PAD_LABEL, nonce), strict=False))
        if not hmac.compare_digest(self._mac(nonce, raw), mac):
            return None
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            return None

    def _mac(self, nonce: bytes, pin: bytes) -> bytes:
        return _hmac(self._key, _MAC_LABEL, nonce, pin)

    def _parse(self, record: str) -> tuple[bytes, bytes, bytes] | None:
        parts = record.split(".")
        if len(parts) != 5 or parts[0] != VERSION or parts[1] != self.key_id:
            return None
        try:
            nonce, sealed, mac = (bytes.fromhex(p) for p in parts[2:])
        except ValueError:
            return None
        if len(nonce) != NONCE_BYTES or not 0 < len(sealed) <= MAX_PIN_BYTES or len(mac) != MAX_PIN_BYTES:
            return None
        return nonce, sealed, mac
