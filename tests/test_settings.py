"""Settings: CLI flags over environment over defaults, malformed values named, data dir never the cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foundation.errors import SettingsError
from foundation.settings import ENV_PREFIX, Settings, default_data_dir, env_name, load_settings
from mcp_server.cli import build_parser, settings_overrides


def from_cli(argv: list[str], environ: dict[str, str]) -> Settings:
    return load_settings(settings_overrides(build_parser().parse_args(argv)), environ=environ)


def test_defaults(tmp_path: Path) -> None:
    settings = load_settings({}, environ={})
    assert settings.log_level == "INFO"
    assert settings.roots == ()
    assert settings.http_token is None and settings.llm_base_url is None
    assert settings.bash_enabled is False
    assert settings.tool_profile == "default"
    assert settings.max_result_tokens == 12_000
    assert settings.data_dir == default_data_dir()


def test_environment_over_defaults(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    settings = load_settings({}, environ={
        "GENERALAGENT_DATA_DIR": str(tmp_path / "data"),
        "GENERALAGENT_ROOTS": f"{a}{os.pathsep}{b}",
        "GENERALAGENT_LOG_LEVEL": "DEBUG",
        "GENERALAGENT_BASH_ENABLED": "true",
        "GENERALAGENT_HTTP_ALLOWED_HOSTS": "one.example,two.example",
        "GENERALAGENT_MAX_RESULT_TOKENS": "2000",
        "GENERALAGENT_LLM_API_KEY": "sk-secret",
    })
    assert settings.data_dir == tmp_path / "data"
    assert settings.roots == (a, b)
    assert settings.log_level == "DEBUG"
    assert settings.bash_enabled is True
    assert settings.http_allowed_hosts == ("one.example", "two.example")
    assert settings.max_result_tokens == 2000
    assert settings.llm_api_key == "sk-secret"


def test_flags_over_environment(tmp_path: Path) -> None:
    environ = {
        "GENERALAGENT_DATA_DIR": str(tmp_path / "env-data"),
        "GENERALAGENT_ROOTS": str(tmp_path / "env-root"),
        "GENERALAGENT_LOG_LEVEL": "DEBUG",
        "GENERALAGENT_TOOL_PROFILE": "minimal",
        "GENERALAGENT_HTTP_ALLOWED_HOSTS": "env.example",
        "GENERALAGENT_BASH_ENABLED": "false",
    }
    settings = from_cli(
        ["--data-dir", str(tmp_path / "flag-data"), "--root", str(tmp_path / "r1"), "--root", str(tmp_path / "r2"),
         "--log-level", "ERROR", "--profile", "full", "serve", "--allow-host", "flag.example", "--enable-bash"],
        environ,
    )
    assert settings.data_dir == tmp_path / "flag-data"
    assert settings.roots == (tmp_path / "r1", tmp_path / "r2")
    assert settings.log_level == "ERROR"
    assert settings.tool_profile == "full"
    assert settings.http_allowed_hosts == ("flag.example",)
    assert settings.bash_enabled is True


def test_absent_flags_leave_the_environment_alone(tmp_path: Path) -> None:
    settings = from_cli(["serve"], {"GENERALAGENT_LOG_LEVEL": "WARNING", "GENERALAGENT_BASH_ENABLED": "1"})
    assert settings.log_level == "WARNING"
    assert settings.bash_enabled is True


def test_empty_environment_values_mean_unset() -> None:
    settings = load_settings({}, environ={"GENERALAGENT_LOG_LEVEL": "", "GENERALAGENT_HTTP_TOKEN": ""})
    assert settings.log_level == "INFO" and settings.http_token is None


@pytest.mark.parametrize(("key", "value"), [
    ("GENERALAGENT_MAX_RESULT_TOKENS", "abc"),
    ("GENERALAGENT_MAX_RESULT_TOKENS", "100"),
    ("GENERALAGENT_LOG_LEVEL", "LOUD"),
    ("GENERALAGENT_BASH_ENABLED", "perhaps"),
    ("GENERALAGENT_TOOL_PROFILE", "everything"),
    ("GENERALAGENT_HTTP_MAX_BODY_BYTES", "-1"),
    ("GENERALAGENT_LLM_TIMEOUT_SECONDS", "soon"),
])
def test_malformed_setting_names_the_key(key: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({}, environ={key: value})
    assert key in str(caught.value)


def test_every_field_has_its_env_name() -> None:
    for field in Settings.model_fields:
        assert env_name(field) == ENV_PREFIX + field.upper()


def test_settings_are_frozen_and_hide_secrets() -> None:
    settings = load_settings({}, environ={"GENERALAGENT_HTTP_TOKEN": "tok-123", "GENERALAGENT_LLM_API_KEY": "sk-456"})
    assert "tok-123" not in repr(settings) and "sk-456" not in repr(settings)
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError for frozen models
        settings.log_level = "DEBUG"  # type: ignore[misc]


def test_default_data_dir_is_never_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data_dir = load_settings({}, environ={}).data_dir
    assert data_dir.is_absolute()
    assert data_dir != Path.cwd()
    assert not data_dir.is_relative_to(tmp_path)


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"data_dir": "rel-data", "roots": ["rel-root"]}, environ={})
    assert settings.data_dir == tmp_path / "rel-data"
    assert settings.roots == (tmp_path / "rel-root",)
