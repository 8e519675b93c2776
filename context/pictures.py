"""Pictures in a sub-agent's conversation (OpenAI message format): pure functions over message lists.

A picture reaches the model as an `image_url` part (a data URL) of a user message, and only when its
model slot can see (context/llm.py `slot_sees_images`). Requests keep the newest MAX_PICTURES_SHOWN
pictures; older ones become a short text part, so a long run does not grow without bound.
"""

from __future__ import annotations

from typing import Any

from foundation.pictures import Picture

MAX_PICTURES_SHOWN = 4
GONE = "[an earlier picture, no longer shown]"
NOT_SEEN = ("[{count} picture(s) not shown: this model slot cannot see images. Configure the vision slot "
            "(GENERALAGENT_LLM_VISION_MODEL) to let sub-agents see them.]")


def picture_message(text: str, pictures: list[Picture]) -> dict[str, Any]:
    """A user message with `text` and the pictures as image parts."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": p.data_url()}} for p in pictures]
    return {"role": "user", "content": parts}


def carries_pictures(messages: list[dict[str, Any]]) -> bool:
    return any(_is_picture(part) for message in messages for part in _parts(message))


def latest_pictures_only(messages: list[dict[str, Any]], keep: int = MAX_PICTURES_SHOWN) -> list[dict[str, Any]]:
    """The messages with all but the newest `keep` pictures replaced by a text part (new dicts where changed)."""
    seen = 0
    out: list[dict[str, Any]] = []
    for message in reversed(messages):
        parts = _parts(message)
        if not any(_is_picture(part) for part in parts):
            out.append(message)
            continue
        kept: list[dict[str, Any]] = []
        for part in reversed(parts):
            if _is_picture(part):
                seen += 1
                part = part if seen <= keep else {"type": "text", "text": GONE}
            kept.append(part)
        out.append({**message, "content": list(reversed(kept))})
    return list(reversed(out))


def content_text(content: Any) -> str | None:
    """A message's content as text: its text parts joined, '[picture]' for each picture."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join("[picture]" if _is_picture(p) else str(p.get("text", "")) for p in content
                         if isinstance(p, dict))
    return str(content)


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [part for part in content if isinstance(part, dict)] if isinstance(content, list) else []


def _is_picture(part: dict[str, Any]) -> bool:
    return part.get("type") == "image_url"
