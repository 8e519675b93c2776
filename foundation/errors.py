"""The one exception tree of generalagent-mcp.

Every message is shown to the model or the user as it is: it says what went wrong
and what to do next ("No index for X. Call index_path first."). Tools raise these;
the dispatch point turns them into MCP error results. This module imports nothing
heavy so that every layer (tools/, indexing/, context/) can use it.
"""

from __future__ import annotations

import errno


class GeneralAgentError(Exception):
    """Base class: an anticipated failure whose message names the fix."""


class InvalidInput(GeneralAgentError):
    """The caller's arguments are wrong (bad value, malformed messages, bad query)."""


class NotFound(GeneralAgentError):
    """A named thing (file, index entry, list, memory, thread) does not exist."""


class PathNotAllowed(GeneralAgentError):
    """A path resolves outside the configured workspace roots, or is unsafe."""


class NotConfigured(GeneralAgentError):
    """A feature needs configuration that is missing (LLM endpoint, a disabled tool)."""


class LLMNotConfigured(NotConfigured):
    """No OpenAI-compatible endpoint is configured."""

    def __init__(self, feature: str = "This tool") -> None:
        super().__init__(
            f"{feature} needs an LLM endpoint. Set GENERALAGENT_LLM_BASE_URL (any OpenAI-compatible "
            "API, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1 for Ollama), "
            "GENERALAGENT_LLM_MODEL and, if the endpoint needs one, GENERALAGENT_LLM_API_KEY in the "
            "server's environment, then restart the server."
        )


class LLMError(GeneralAgentError):
    """The configured LLM endpoint failed (HTTP error, timeout, malformed answer)."""


class SettingsError(GeneralAgentError):
    """A setting is malformed; the message names the key."""


class LimitExceeded(GeneralAgentError):
    """An input or an operation exceeds a configured bound (size, time, count)."""


class ExtractionError(GeneralAgentError):
    """A document cannot be read (corrupt, encrypted, hostile, unsupported)."""


class QuerySyntaxError(InvalidInput):
    """A raw FTS query or a regex is invalid; the message shows a corrected example."""


class PatternTooSlow(LimitExceeded):
    """A regular expression ran past its time bound."""


class Conflict(GeneralAgentError):
    """The operation conflicts with stored state (e.g. a concurrent change)."""


class PolicyDenied(GeneralAgentError):
    """The approval policy denies this call."""


class ApprovalRequired(GeneralAgentError):
    """The call needs a human's approval that has not been given yet."""


class WebError(GeneralAgentError):
    """A web request failed or was refused (address not allowed, HTTP error, timeout, redirects)."""


class Cancelled(GeneralAgentError):
    """The caller cancelled the operation."""


class DiskFull(GeneralAgentError):
    """The disk (or the user's quota) is full."""

    def __init__(self, message: str = "The disk is full: free space and retry.") -> None:
        super().__init__(message)


_SQLITE_FULL = 13
_PG_DISK_FULL = "53100"
_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def plain_error(exc: BaseException) -> GeneralAgentError | None:
    """A plain-words error for failures of the machine rather than of our code (a full disk or
    quota, from the OS, SQLite or the PostgreSQL server), or None when `exc` is not one of them."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return DiskFull()
    if type(exc).__module__ == "sqlite3" and (
        getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or "disk is full" in str(exc)
    ):
        return DiskFull()
    if type(exc).__module__.startswith("psycopg") and getattr(exc, "sqlstate", None) == _PG_DISK_FULL:
        return DiskFull("The database server's disk is full: free space there and retry.")
    return None
