"""A small client for the user's OpenAI-compatible chat endpoint.

Every LLM call the server makes itself (compaction summaries, delegated sub-agents) goes
through `chat()`. It is built from plain values (`LLMConfig`), imports `openai` lazily,
keeps one client per config, and turns every failure into `LLMError` with a message that
says what went wrong. Without a configured endpoint it raises `LLMNotConfigured`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from foundation.errors import InvalidInput, LLMError, LLMNotConfigured

_PLACEHOLDER_KEY = "not-needed"  # local endpoints (Ollama, vLLM) accept any key; the SDK wants one
Slot = Literal["base", "reasoning", "vision", "code", "chat"]
SLOTS: tuple[str, ...] = get_args(Slot)


@dataclass(frozen=True)
class SlotValues:
    """One model slot's endpoint as configured: `inherits` names what came from the base slot."""

    slot: str
    base_url: str | None
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    inherits: tuple[str, ...] = ()


def slot_values(settings: Any, slot: str = "base") -> SlotValues:
    """A slot's endpoint, model and key; unset parts fall back to the base slot (GENERALAGENT_LLM_*).

    The base API key is only inherited together with the base URL, never sent to another endpoint."""
    if slot not in SLOTS:
        raise InvalidInput(f"Unknown model slot {slot!r}. Slots: {', '.join(SLOTS)}.")
    base = (getattr(settings, "llm_base_url", None), getattr(settings, "llm_model", None),
            getattr(settings, "llm_api_key", None))
    if slot == "base":
        return SlotValues("base", *base)
    own_url, own_model, own_key = (getattr(settings, f"llm_{slot}_{part}", None)
                                   for part in ("base_url", "model", "api_key"))
    inherits = tuple(name for name, own in (("base_url", own_url), ("model", own_model)) if not own)
    key = own_key if own_url else (own_key or base[2])
    return SlotValues(slot, own_url or base[0], own_model or base[1], key, inherits)


def slot_sees_images(settings: Any, slot: str) -> bool:
    """Whether a slot's model takes pictures: the vision slot, once a model or endpoint of its own is set
    (GENERALAGENT_LLM_VISION_MODEL / _BASE_URL); every other slot is taken as text-only."""
    if slot != "vision":
        return False
    values = slot_values(settings, "vision")
    return bool(values.base_url and values.model) and len(values.inherits) < 2


def choose_slot(settings: Any, preferred: str | None, carries_images: bool) -> str:
    """The model slot for a sub-agent, by capability: an explicit preference (a card's slot other than
    base) > vision (when the task carries pictures and the vision slot can see them) > base."""
    if preferred and preferred != "base":
        return preferred
    if carries_images and slot_sees_images(settings, "vision"):
        return "vision"
    return "base"


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the endpoint. Hashable: one cached client per distinct config."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_seconds: float = 120.0
    max_retries: int = 1

    @classmethod
    def from_settings(cls, settings: Any, feature: str = "This tool", slot: str = "base") -> LLMConfig:
        """The config of a model slot (base, reasoning, vision, code, chat) from Settings, falling back to
        the base slot; raises LLMNotConfigured naming the env variables to set."""
        values = slot_values(settings, slot)
        if not values.base_url or not values.model:
            raise LLMNotConfigured(feature)
        return cls(
            base_url=str(values.base_url),
            model=str(values.model),
            api_key=values.api_key,
            timeout_seconds=float(getattr(settings, "llm_timeout_seconds", 120.0)),
        )


@dataclass(frozen=True)
class ToolCall:
    """One function call requested by the model; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises LLMError when the model wrote invalid JSON."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise LLMError(f"The model called {self.name} with invalid JSON arguments: {exc}.") from None
        if not isinstance(value, dict):
            raise LLMError(f"The model called {self.name} with arguments that are not a JSON object.")
        return value


@dataclass(frozen=True)
class ChatReply:
    """The model's answer: text and/or tool calls, plus token usage (0 when not reported)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_message(self) -> dict[str, Any]:
        """The reply as an OpenAI-format assistant message, ready to append to the transcript."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


_clients: dict[LLMConfig, Any] = {}
_clients_lock = threading.Lock()


def client_for(config: LLMConfig) -> Any:
    """The cached `openai.OpenAI` client for this config (created on first use)."""
    with _clients_lock:
        client = _clients.get(config)
        if client is None:
            import openai

            client = openai.OpenAI(
                base_url=config.base_url,
                api_key=config.api_key or _PLACEHOLDER_KEY,
                timeout=config.timeout_seconds,
                max_retries=config.max_retries,
            )
            _clients[config] = client
        return client


def chat(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> ChatReply:
    """One chat completion (OpenAI message format). Raises LLMError on any failure."""
    kwargs: dict[str, Any] = {"model": config.model, "messages": messages}
    if tools:
        kwargs["tools"] = tools
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    if temperature is not None:
        kwargs["temperature"] = temperature
    client = client_for(config)
    try:
        response = client.chat.completions.create(**kwargs)
    except Exception as exc:
        raise _as_llm_error(exc, config) from exc
    return _parse_reply(response, config)


def _as_llm_error(exc: Exception, config: LLMConfig) -> LLMError:
    import openai

    where = f"LLM endpoint {config.base_url} (model {config.model})"
    if isinstance(exc, openai.APITimeoutError):
        return LLMError(
            f"{where} did not answer within {config.timeout_seconds:g} s. "
            "Retry later, or raise GENERALAGENT_LLM_TIMEOUT_SECONDS."
        )
    if isinstance(exc, openai.APIConnectionError):
        return LLMError(
            f"Cannot connect to {where}: {exc}. Check GENERALAGENT_LLM_BASE_URL and that it is running."
        )
    if isinstance(exc, openai.APIStatusError):
        detail = _short(_error_detail(exc), 300)
        hint = {
            401: " Check GENERALAGENT_LLM_API_KEY.",
            403: " Check GENERALAGENT_LLM_API_KEY.",
            404: " Check GENERALAGENT_LLM_BASE_URL (usually ends in /v1) and GENERALAGENT_LLM_MODEL.",
            429: " The endpoint is rate limiting; retry later.",
        }.get(exc.status_code, "")
        return LLMError(f"{where} answered HTTP {exc.status_code}: {detail}.{hint}")
    return LLMError(f"{where} failed: {type(exc).__name__}: {_short(str(exc), 300)}")


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return json.dumps(body)[:300]
    return str(getattr(exc, "message", None) or exc)


def _parse_reply(response: Any, config: LLMConfig) -> ChatReply:
    choices = getattr(response, "choices", None)
    if not choices:
        raise LLMError(
            f"LLM endpoint {config.base_url} returned no choices; check the model name and endpoint."
        )
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise LLMError(f"LLM endpoint {config.base_url} returned a choice without a message.")
    calls = tuple(
        ToolCall(
            id=str(c.id or f"call_{i}"), name=str(c.function.name), arguments=str(c.function.arguments or "")
        )
        for i, c in enumerate(getattr(message, "tool_calls", None) or [])
        if getattr(c, "function", None) is not None
    )
    content = message.content if isinstance(message.content, str) else None
    if content is None and not calls:
        raise LLMError(f"LLM endpoint {config.base_url} returned an empty answer (no text, no tool calls).")
    usage = getattr(response, "usage", None)
    return ChatReply(
        content=content,
        tool_calls=calls,
        finish_reason=getattr(choice, "finish_reason", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        model=getattr(response, "model", None),
    )


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
