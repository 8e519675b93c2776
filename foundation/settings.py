"""Settings, read once at the edge (CLI flags over environment over defaults).

Each field `foo_bar` is read from the environment variable `GENERALAGENT_FOO_BAR`.
The result is one frozen pydantic model that is passed down as plain values;
nothing below the CLI reads the environment. This module imports no MCP code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from foundation.errors import SettingsError

ENV_PREFIX = "GENERALAGENT_"
USER_RULES_FILENAME = "policy.toml"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
ToolProfile = Literal["minimal", "default", "full"]
EmbeddingProviderName = Literal["auto", "off", "local", "openai"]


def default_data_dir() -> Path:
    """The platform's per-user data directory (never the current working directory)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("generalagent-mcp", appauthor=False))


class Settings(BaseModel):
    """Every setting of the server. Field docs double as the README's settings table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = Field(default_factory=default_data_dir, description="Where all state lives.")
    database_url: str | None = Field(
        default=None, repr=False,
        description="postgresql://USER:PASSWORD@HOST:PORT/DB: keep the state there instead of SQLite in the data dir.",
    )
    roots: tuple[Path, ...] = Field(
        default=(), description="Workspace roots, os.pathsep-separated. Empty: a workspace in the data dir."
    )
    log_level: LogLevel = Field(default="INFO", description="Log level (logs go to stderr).")
    # HTTP transport
    http_token: str | None = Field(default=None, repr=False, description="Bearer token required over HTTP.")
    http_allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host values allowed over HTTP (needed to bind a non-loopback host)."
    )
    http_max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, description="HTTP request body limit.")
    # LLM endpoint (OpenAI-compatible)
    llm_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint base URL.")
    llm_api_key: str | None = Field(default=None, repr=False, description="API key for the LLM endpoint.")
    llm_model: str | None = Field(default=None, description="Model name for the LLM endpoint.")
    llm_timeout_seconds: float = Field(default=120.0, gt=0, description="Timeout of one LLM request.")
    # Model slots: each falls back to the base LLM_* settings above (see context/llm.py)
    llm_reasoning_base_url: str | None = Field(default=None, description="Reasoning slot endpoint (default: base).")
    llm_reasoning_model: str | None = Field(default=None, description="Reasoning slot model (default: base model).")
    llm_reasoning_api_key: str | None = Field(default=None, repr=False, description="Reasoning slot API key.")
    llm_vision_base_url: str | None = Field(default=None, description="Vision slot endpoint (default: base).")
    llm_vision_model: str | None = Field(default=None, description="Vision slot model (default: base model).")
    llm_vision_api_key: str | None = Field(default=None, repr=False, description="Vision slot API key.")
    llm_code_base_url: str | None = Field(default=None, description="Code slot endpoint (default: base).")
    llm_code_model: str | None = Field(default=None, description="Code slot model (default: base model).")
    llm_code_api_key: str | None = Field(default=None, repr=False, description="Code slot API key.")
    llm_chat_base_url: str | None = Field(default=None, description="Chat slot endpoint (compact_context; default: base).")
    llm_chat_model: str | None = Field(default=None, description="Chat slot model (default: base model).")
    llm_chat_api_key: str | None = Field(default=None, repr=False, description="Chat slot API key.")
    # Dispatch
    max_result_tokens: int = Field(
        default=12_000, ge=500, le=24_000, description="Upper bound of one tool result (estimated tokens)."
    )
    tool_profile: ToolProfile = Field(default="default", description="Which tools are listed: minimal/default/full.")
    tools_enabled: tuple[str, ...] = Field(default=(), description="Extra tools to list, comma-separated names.")
    tools_disabled: tuple[str, ...] = Field(default=(), description="Tools not to list (core tools stay), comma-separated.")
    # Approval and workspace tools
    policy_file: Path | None = Field(default=None, description="User approval rules (TOML); default: data dir.")
    approval_ttl_seconds: int = Field(default=600, ge=10, description="How long an out-of-band approval lasts.")
    bash_enabled: bool = Field(default=False, description="Enable run_bash_command (always policy-checked).")
    bash_network: bool = Field(default=False, description="Let sandboxed shell commands use the network.")
    bash_read_paths: tuple[Path, ...] = Field(
        default=(), description="Folders outside the roots that shell commands may read (toolchains: ~/.cargo, "
        "~/.pyenv), os.pathsep-separated; the secret stores the policy names in the home stay hidden.")
    # Indexing limits
    max_file_bytes: int = Field(default=200 * 1024 * 1024, ge=1, description="Largest file that is indexed.")
    max_extracted_chars: int = Field(default=20_000_000, ge=1000, description="Text cap per document.")
    max_decompressed_bytes: int = Field(
        default=512 * 1024 * 1024, ge=1024, description="Zip (DOCX/XLSX/PPTX/EPUB/ODF) uncompressed size cap."
    )
    file_timeout_seconds: float = Field(default=120.0, gt=0, description="Time budget to extract one file.")
    ocr_languages: str = Field(
        default="eng+chi_sim", pattern=r"^([a-z_]+(\+[a-z_]+)*)?$",
        description="Tesseract languages for PDF pages without a text layer (scans); empty turns OCR off.",
    )
    chunk_max_chars: int = Field(default=500, ge=50, description="Largest chunk, in characters.")
    chunk_overlap_chars: int = Field(
        default=80, ge=0,
        description="Overlap of neighbouring chunks (sentences after a cut in a paragraph, windows, sheet rows).",
    )
    chunk_min_chars: int = Field(default=50, ge=0, description="Smaller fragments are merged.")
    search_memory_min_chunks: int = Field(
        default=2_000, ge=1, description="Smallest index (in chunks) kept in memory; smaller ones use FTS5 alone."
    )
    search_memory_max_chunks: int = Field(
        default=5_000_000, ge=0,
        description="Largest index (in chunks) searched through memory-mapped postings (saved in the data dir); 0: never.",
    )
    watch_indexed: bool = Field(
        default=True,
        description="Watch every folder given to index_path from then on (across restarts) and re-index its "
        "changes in the background; false: folders are indexed only when asked.",
    )
    watch_roots: bool = Field(default=False, description="Also watch (and so index) every workspace root.")
    watch_polling: bool = Field(
        default=False,
        description="Watch folders by polling (every 2 s) instead of file-system events, e.g. on network drives; "
        "used anyway when events are unavailable.",
    )
    # Hybrid (meaning-aware) search: on when the bundled model (the semantic extra) is installed
    embedding_provider: EmbeddingProviderName = Field(
        default="auto",
        description="Meaning-aware search and recall: auto (the bundled model when the semantic extra is installed, "
                    "else off), off, local or openai.",
    )
    embedding_base_url: str | None = Field(default=None, description="OpenAI-compatible embeddings endpoint base URL.")
    embedding_api_key: str | None = Field(default=None, repr=False, description="API key for the embeddings endpoint.")
    embedding_model: str | None = Field(default=None, description="Model name for the embeddings endpoint.")
    # Context management
    context_warning_ratio: float = Field(default=0.75, gt=0, lt=1, description="context_status warning level.")
    context_critical_ratio: float = Field(default=0.95, gt=0, le=1, description="context_status critical level.")
    # Memory recall
    memory_lexical_weight: float = Field(default=0.5, ge=0, le=1, description="recall: weight of word similarity.")
    memory_dense_weight: float = Field(
        default=0.5, ge=0, le=1, description="recall: weight of embedding similarity (when a model is available)."
    )
    memory_confidence_weight: float = Field(
        default=0.4, ge=0, le=1, description="recall: share of a fact's confidence in its score."
    )
    memory_expansion_weight: float = Field(
        default=1.0, ge=0, le=2, description="recall: weight of synonym and word-form terms relative to words."
    )
    # Sub-agents
    delegate_timeout_seconds: float = Field(default=600.0, gt=0, description="Overall sub-agent time limit.")
    agents_file: Path | None = Field(default=None, description="Agent cards (TOML); default: data dir.")
    handoff_max_depth: int = Field(default=5, ge=1, le=20, description="Longest chain of agent handoffs.")
    mcp_servers_file: Path | None = Field(
        default=None, description="Other MCP servers sub-agents may use (TOML); default: data dir mcp_servers.toml."
    )
    mcp_server_idle_seconds: float = Field(
        default=300.0, gt=0, description="Stop another MCP server after this long unused (it restarts on use)."
    )
    # The web (off unless turned on: it reaches the network)
    web_fetch_enabled: bool = Field(default=False, description="Enable fetch_url (HTTP GET of public web pages).")
    web_search_url: str | None = Field(
        default=None, pattern=r"^https?://", description="SearXNG base URL for web_search (its JSON API); unset: off."
    )
    web_allow_networks: tuple[str, ...] = Field(
        default=(), description="Private or loopback networks fetch_url may reach anyway (CIDR, comma-separated)."
    )
    web_max_bytes: int = Field(default=5 * 1024 * 1024, ge=1024, description="Largest body fetch_url reads.")
    web_timeout_seconds: float = Field(default=20.0, gt=0, le=300, description="fetch_url's time limit per URL.")
    web_max_redirects: int = Field(default=5, ge=0, le=20, description="Most redirects fetch_url follows.")
    # Skills (SKILL.md folders)
    skills_dirs: tuple[Path, ...] = Field(
        default=(), description="Skill folders (or folders of them), os.pathsep-separated; plus <data dir>/skills."
    )
    skills_file: Path | None = Field(default=None, description="Skills config (TOML); default: data dir skills.toml.")
    jieba_user_dict: Path | None = Field(
        default=None, description="Words jieba keeps whole (one a line: names, products); re-read when it changes.")
    builtins_enabled: bool = Field(
        default=True, description="Built-in skills and agent cards (yours of the same name win); 0: none."
    )

    @field_validator("data_dir", "policy_file", "agents_file", "skills_file", "mcp_servers_file", "jieba_user_dict",
                     "roots", "skills_dirs", "bash_read_paths",
                     mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        """An empty path would be the current folder (Path('') is '.'): refused, never taken as the cwd."""
        values = value if isinstance(value, list | tuple) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise ValueError("is empty; give a folder's path (or leave the option out for the default)")
        return value

    @field_validator("data_dir", "policy_file", "agents_file", "skills_file", "mcp_servers_file", "jieba_user_dict",
                     mode="after")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()

    @field_validator("database_url", mode="after")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        from foundation.storage.urls import is_postgres_url

        if value is not None and value.strip() and not is_postgres_url(value):
            raise ValueError("use postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or leave it unset for SQLite)")
        return value.strip() or None if value is not None else None

    @field_validator("roots", "skills_dirs", "bash_read_paths", mode="after")
    @classmethod
    def _absolute_roots(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        return tuple(p.expanduser().absolute() for p in value)

    @field_validator("web_allow_networks", mode="after")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        import ipaddress

        for network in value:
            try:
                ipaddress.ip_network(network.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{network!r} is not a network; write CIDR like 127.0.0.1/32 or 10.0.0.0/8") from None
        return tuple(n.strip() for n in value)

    @model_validator(mode="after")
    def _embeddings_endpoint(self) -> Settings:
        if self.embedding_provider == "openai" and not (self.embedding_base_url and self.embedding_model):
            raise ValueError(f"{env_name('embedding_provider')}=openai needs {env_name('embedding_base_url')} and "
                             f"{env_name('embedding_model')} (or set it to off or local)")
        return self

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)


def user_rules_file(data_dir: Path, policy_file: Path | None) -> Path | None:
    """The user's approval rules file: `policy_file` if set, else `<data dir>/policy.toml` if it exists."""
    if policy_file is not None:
        return policy_file
    candidate = data_dir / USER_RULES_FILENAME
    return candidate if candidate.is_file() else None


_LIST_FIELDS = {"roots": os.pathsep, "skills_dirs": os.pathsep, "bash_read_paths": os.pathsep, "http_allowed_hosts": ",", "tools_enabled": ",", "tools_disabled": ",",
                "web_allow_networks": ","}


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in Settings.model_fields:
        raw = environ.get(env_name(field))
        if raw is None or raw == "":
            continue
        sep = _LIST_FIELDS.get(field)
        values[field] = [part for part in raw.split(sep) if part] if sep else raw
    return values


def load_settings(overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from CLI overrides (non-None values win) over the environment over defaults.

    Raises SettingsError naming the offending key.
    """
    values = _from_env(os.environ if environ is None else environ)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return Settings(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            if not err["loc"]:  # a check across settings: its message names the keys
                problems.append(str(err["msg"]).removeprefix("Value error, "))
                continue
            field = str(err["loc"][0])
            problems.append(f"{env_name(field)} ({field}): {err['msg']}")
        raise SettingsError("Invalid setting: " + "; ".join(problems)) from None
