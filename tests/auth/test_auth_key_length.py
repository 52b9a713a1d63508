"""API keys shorter than 24 characters refuse to start, unless
VOXGATE_ALLOW_SHORT_API_KEY=1 says so (then the auth state warns). The real
`voxgate serve` process: tests/e2e/test_serve_process.py."""

from __future__ import annotations

import logging

import pytest

from auth import AuthConfig, AuthState
from auth.config import MIN_API_KEY_CHARS
from gateway.config import ConfigError, Settings

HOW = ("an API key needs at least 24 (make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'). "
       "Set a longer VOXGATE_API_KEY or VOXGATE_API_KEY_FILE, or VOXGATE_ALLOW_SHORT_API_KEY=1 to start "
       "with this one anyway")


def test_a_key_of_23_characters_refuses_and_24_start() -> None:
    assert MIN_API_KEY_CHARS == 24
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"VOXGATE_API_KEY": "k" * 23})
    assert str(refused.value) == f"the API key in VOXGATE_API_KEY has 23 characters; {HOW}"
    assert "k" * 23 not in str(refused.value)
    assert Settings.from_env({"VOXGATE_API_KEY": "k" * 24}).api_key == "k" * 24
    with pytest.raises(ConfigError, match="^the API key in VOXGATE_API_KEY has 5 characters; "):
        Settings(api_key="short")  # built in code, too


def test_the_key_file_is_what_is_judged_and_named(tmp_path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("tiny-key\n")
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"VOXGATE_API_KEY": "k" * 40, "VOXGATE_API_KEY_FILE": str(key_file)})
    assert str(refused.value) == f"the API key in VOXGATE_API_KEY_FILE={str(key_file)!r} has 8 characters; {HOW}"
    key_file.write_text("f" * 30 + "\n")  # a long file wins over a short variable
    assert Settings.from_env({"VOXGATE_API_KEY": "short", "VOXGATE_API_KEY_FILE": str(key_file)}).api_key == "f" * 30


def test_the_flag_lets_a_short_key_start_and_the_auth_state_warns(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env({"VOXGATE_API_KEY": "short", "VOXGATE_ALLOW_SHORT_API_KEY": "1"})
    assert (settings.api_key, settings.allow_short_api_key) == ("short", True)
    caplog.set_level(logging.WARNING, "voxgate.auth")
    AuthState(settings.auth_config())
    assert caplog.messages == [("auth: the API key has fewer than 24 characters (allowed by "
                                "VOXGATE_ALLOW_SHORT_API_KEY); use a longer one")]
    caplog.clear()
    AuthState(AuthConfig(api_key="k" * 24))
    assert caplog.messages == []
