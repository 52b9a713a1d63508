from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from gateway.config import OPTIONS, ConfigError, Settings, markdown_table

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_local_mode_on_loopback():
    s = Settings.from_env({})
    assert (s.host, s.port, s.server_mode, s.api_key, s.allow_anonymous) == ("127.0.0.1", 8000, False, None, False)
    assert s.engines == ("pocket", "piper", "asr")
    assert s.tts_engine == "auto"
    assert s.data_dir == Path("~/.local/share/voxgate").expanduser()
    assert s.pocket_model_dir == s.data_dir / "models" / "pocket"


def test_the_final_window_default_is_the_sidecars():
    # the sidecar has its own default for a stream's final window; the gateway must not start it with another
    from engines.asr.utterance import DEFAULT_FINAL_WINDOW

    assert Settings.from_env({}).asr_final_window == Settings().asr_final_window == DEFAULT_FINAL_WINDOW


def test_env_values_are_parsed_into_types():
    s = Settings.from_env({
        "VOXGATE_PORT": "9000",
        "VOXGATE_SERVER_MODE": "yes",
        "VOXGATE_TRUSTED_NETWORKS": "192.168.1.0/24, 10.0.0.0/8",
        "VOXGATE_ALLOWED_ORIGINS": "https://app.example.com",
        "VOXGATE_ENGINES": "asr",
        "VOXGATE_IDLE_TIMEOUT_S": "12.5",
    })
    assert s.port == 9000 and s.server_mode is True and s.engines == ("asr",)
    assert s.trusted_networks == (ipaddress.ip_network("192.168.1.0/24"), ipaddress.ip_network("10.0.0.0/8"))
    assert s.allowed_origins == ("https://app.example.com",)
    assert s.idle_timeout_s == 12.5


@pytest.mark.parametrize(("env", "message"), [
    ({"VOXGATE_PORT": "x"}, "VOXGATE_PORT='x' is not an integer"),
    ({"VOXGATE_PORT": "70000"}, "VOXGATE_PORT='70000' is out of range (0..65535)"),
    ({"VOXGATE_SERVER_MODE": "maybe"}, "VOXGATE_SERVER_MODE='maybe' is not a boolean (use 1/0, true/false, yes/no, on/off)"),
    ({"VOXGATE_TRUSTED_NETWORKS": "lan"}, "VOXGATE_TRUSTED_NETWORKS='lan' has 'lan', which is not an IP network (CIDR like 192.168.1.0/24)"),
    ({"VOXGATE_ALLOWED_ORIGINS": "app.example.com"}, "VOXGATE_ALLOWED_ORIGINS='app.example.com' has 'app.example.com'; an origin is scheme://host[:port] with no path"),
    ({"VOXGATE_ENGINES": "pocket,kokoro"}, "VOXGATE_ENGINES='pocket,kokoro' has 'kokoro'; known engines: pocket, piper, omnivoice, asr (or none)"),
    ({"VOXGATE_LOG_LEVEL": "loud"}, "VOXGATE_LOG_LEVEL='loud' must be one of: debug, info, warning, error"),
    ({"VOXGATE_POCKET_QUANTIZE": "int4"}, "VOXGATE_POCKET_QUANTIZE='int4' must be one of: none, int8"),
    ({"VOXGATE_DEVICE": "tpu"}, "VOXGATE_DEVICE='tpu' must be auto, cpu, cuda, cuda:N or mps"),
    ({"VOXGATE_OMNIVOICE_IDLE_S": "-1"}, "VOXGATE_OMNIVOICE_IDLE_S='-1' is out of range (0..86400)"),
    ({"VOXGATE_PIPER_PRECISION": "fp16"}, "VOXGATE_PIPER_PRECISION='fp16' must be one of: fp32, int8"),
])
def test_bad_values_name_the_variable_and_why(env, message):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    assert str(err.value) == message


def test_engines_none_disables_all():
    assert Settings.from_env({"VOXGATE_ENGINES": "none"}).engines == ()


def test_cli_overrides_win_over_env_and_go_through_the_same_parser():
    s = Settings.from_env({"VOXGATE_PORT": "9000"}, port="9001", host=None)
    assert s.port == 9001 and s.host == "127.0.0.1"
    with pytest.raises(ConfigError, match=r"^VOXGATE_PORT='nine' is not an integer$"):
        Settings.from_env({}, port="nine")


def test_api_key_file_wins_and_its_value_never_shows(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("s3cret-from-file-Qm7vT2xL9p\n")
    s = Settings.from_env({"VOXGATE_API_KEY": "from-env-Zr4kW8nB3s6hJ1yD", "VOXGATE_API_KEY_FILE": str(key_file)})
    assert s.api_key == "s3cret-from-file-Qm7vT2xL9p"
    assert "s3cret" not in repr(s) and "s3cret" not in str(s.describe())
    assert s.describe()["api_key"] == "(set)"


def test_unreadable_or_empty_key_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=r"^VOXGATE_API_KEY_FILE='.*nope' cannot be read: No such file or directory$"):
        Settings.from_env({"VOXGATE_API_KEY_FILE": str(missing)})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=r"is empty$"):
        Settings.from_env({"VOXGATE_API_KEY_FILE": str(empty)})


def test_settings_are_frozen():
    s = Settings.from_env({})
    with pytest.raises(AttributeError):
        s.port = 1  # type: ignore[misc]


def test_every_option_is_a_field_and_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, "README's table is stale: python -m gateway.config prints it"
    documented = set(re.findall(r"`(VOXGATE_[A-Z0-9_]+)`", readme))
    declared = {opt.env for opt in OPTIONS}
    assert declared - documented == set(), "undocumented settings"
    assert documented - declared == set(), "README documents settings that do not exist"
    field_names = set(Settings.__dataclass_fields__) - {"environ"}  # where they were read from, not a setting
    assert {opt.name for opt in OPTIONS} == field_names


def test_settings_carry_the_environment_they_were_read_from_and_never_show_it():
    settings = Settings.from_env({"VOXGATE_PORT": "9001", "PATH": "/opt/bin", "HOME": "/home/x"})
    assert settings.environ == {"VOXGATE_PORT": "9001", "PATH": "/opt/bin", "HOME": "/home/x"}
    assert "environ" not in settings.describe() and "/opt/bin" not in repr(settings)
    assert settings == Settings.from_env({"VOXGATE_PORT": "9001"})  # not part of what the settings are
