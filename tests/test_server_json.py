"""server.json (the MCP registry entry) validates offline against the vendored 2025-12-11 schema."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from foundation.settings import Settings, env_name

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
SCHEMA_FILE = ROOT / "tests" / "schemas" / "server.schema.2025-12-11.json"
REQUIRED_ENV = {
    "GENERALAGENT_DATA_DIR", "GENERALAGENT_ROOTS", "GENERALAGENT_LLM_BASE_URL", "GENERALAGENT_LLM_API_KEY",
    "GENERALAGENT_LLM_MODEL", "GENERALAGENT_HTTP_TOKEN", "GENERALAGENT_LOG_LEVEL", "GENERALAGENT_BASH_ENABLED",
}
SECRETS = {"GENERALAGENT_LLM_API_KEY", "GENERALAGENT_HTTP_TOKEN"}


@pytest.fixture(scope="module")
def server_json() -> dict[str, Any]:
    return dict(json.loads((ROOT / "server.json").read_text()))


def pypi_package(server_json: dict[str, Any]) -> dict[str, Any]:
    (package,) = [p for p in server_json["packages"] if p["registryType"] == "pypi"]
    return dict(package)


def test_validates_against_the_vendored_schema(server_json: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["$id"] == SCHEMA_URL == server_json["$schema"]
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(server_json)]
    assert not errors, "\n".join(errors)


def test_the_schema_rejects_a_broken_entry(server_json: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    broken = {**server_json, "name": "no-slash", "description": "x" * 101}
    assert len(list(jsonschema.Draft7Validator(schema).iter_errors(broken))) >= 2


def test_versions_match_pyproject(server_json: dict[str, Any]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert server_json["version"] == version
    assert pypi_package(server_json)["version"] == version


def test_pypi_package_runs_over_stdio_with_uvx(server_json: dict[str, Any]) -> None:
    package = pypi_package(server_json)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert package["identifier"] == project["name"] == "generalagent-mcp"
    assert package["runtimeHint"] == "uvx"
    assert package["transport"] == {"type": "stdio"}
    assert "generalagent-mcp" in project["scripts"]


def test_environment_variables_are_real_settings(server_json: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in pypi_package(server_json)["environmentVariables"]}
    known = {env_name(field) for field in Settings.model_fields}
    assert set(variables) <= known, set(variables) - known
    assert set(variables) >= REQUIRED_ENV, REQUIRED_ENV - set(variables)
    for name, variable in variables.items():
        assert variable.get("description"), name
        assert variable.get("isSecret", False) == (name in SECRETS), name


def test_readme_carries_the_mcp_name(server_json: dict[str, Any]) -> None:
    readme = (ROOT / "README.md").read_text()
    names = re.findall(r"mcp-name:\s*(\S+)", readme)
    assert names == [server_json["name"]]
    assert re.fullmatch(r"io\.github\.[A-Za-z0-9-]+/generalagent-mcp", server_json["name"])
