"""Sub-agents and pictures: a model gets pictures only when its slot can see them, and the vision slot is
chosen by capability when a task carries pictures. The real SDK client, our server, the real `openai`
client and a scripted endpoint on 127.0.0.1 (tests/fake_llm.py)."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from context.llm import choose_slot, slot_sees_images
from context.pictures import carries_pictures, content_text, latest_pictures_only, picture_message
from foundation.pictures import Picture
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401  (fixture)
from tests.test_delegate import LONG, allow_tools, client_for

pytestmark = pytest.mark.anyio
SEEING = "seeing-model"


def picture_file(path: Path, size: tuple[int, int] = (2000, 1000)) -> None:
    Image.new("RGB", size, "navy").save(path, "PNG")


def parts(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    return [p for p in content if p.get("type") == kind] if isinstance(content, list) else []


def decoded_url(part: dict[str, Any]) -> Image.Image:
    url = part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


@pytest.fixture
def settings_for(make_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> Any:  # noqa: F811
    allow_tools(data_dir, "delegate_task")

    def make(**overrides: Any) -> Any:
        return make_settings(**fake_llm.settings_overrides(), **overrides)

    return make


async def test_a_task_with_pictures_runs_on_the_vision_slot(settings_for: Any, fake_llm: FakeLLM, workspace: Path) -> None:  # noqa: F811
    picture_file(workspace / "chart.png")
    fake_llm.reply_text(LONG)
    async with client_for(settings_for(llm_vision_model=SEEING)) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Describe the chart.", "images": ["chart.png"]})
        assert not result.is_error, result.content[0].text
        status = await client.call_tool("delegate_status", {"context_id": result.structured_content["context_id"]})
    request = fake_llm.requests[0]
    assert request["model"] == SEEING
    task = request["messages"][1]
    assert "Describe the chart." in parts(task, "text")[0]["text"]
    (image,) = parts(task, "image_url")
    assert decoded_url(image).size == (1568, 784)
    assert "[picture]" in status.structured_content["messages"][1]["content"]


async def test_pictures_without_a_seeing_slot_are_refused_clearly(settings_for: Any, fake_llm: FakeLLM, workspace: Path) -> None:  # noqa: F811
    picture_file(workspace / "chart.png")
    (workspace / "notes.txt").write_text("text")
    async with client_for(settings_for()) as (client, _):
        blind = await client.call_tool("delegate_task", {"task": "Describe it.", "images": ["chart.png"]})
        assert blind.is_error and "GENERALAGENT_LLM_VISION_MODEL" in blind.content[0].text
    async with client_for(settings_for(llm_vision_model=SEEING)) as (client, _):
        text = await client.call_tool("delegate_task", {"task": "Describe it.", "images": ["notes.txt"]})
        assert text.is_error and "not a PNG, JPEG, GIF or WebP picture" in text.content[0].text
    assert not fake_llm.requests


async def test_a_picture_read_by_a_blind_subagent_is_not_sent(settings_for: Any, fake_llm: FakeLLM, workspace: Path) -> None:  # noqa: F811
    picture_file(workspace / "photo.png", (300, 200))
    fake_llm.reply_tool_calls([("read_file", {"path": "photo.png"})])
    fake_llm.reply_text(LONG)
    async with client_for(settings_for()) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Look at photo.png."})
    assert not result.is_error, result.content[0].text
    second = fake_llm.requests[1]
    assert second["model"] == "fake-model" and not carries_pictures(second["messages"])
    tool_text = next(m["content"] for m in second["messages"] if m["role"] == "tool")
    assert "300x200" in tool_text and "cannot see images" in tool_text


async def test_a_picture_read_mid_task_switches_to_the_vision_slot(settings_for: Any, fake_llm: FakeLLM, workspace: Path) -> None:  # noqa: F811
    picture_file(workspace / "photo.png", (300, 200))
    fake_llm.reply_tool_calls([("read_file", {"path": "photo.png"}), ("now", {})])
    fake_llm.reply_text(LONG)
    async with client_for(settings_for(llm_vision_model=SEEING)) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Look at photo.png."})
    assert not result.is_error, result.content[0].text
    first, second = fake_llm.requests
    assert first["model"] == "fake-model" and second["model"] == SEEING
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]  # the pictures after every tool result
    (image,) = parts(second["messages"][-1], "image_url")
    assert decoded_url(image).size == (300, 200)


def test_choose_slot_by_capability(make_settings: Any) -> None:
    blind = make_settings(llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    seeing = make_settings(llm_base_url="http://127.0.0.1:9/v1", llm_model="m", llm_vision_model="v")
    assert not slot_sees_images(blind, "vision") and slot_sees_images(seeing, "vision")
    assert not slot_sees_images(seeing, "base")
    assert choose_slot(seeing, None, carries_images=True) == "vision"
    assert choose_slot(seeing, "base", carries_images=False) == "base"
    assert choose_slot(seeing, "reasoning", carries_images=True) == "reasoning"  # an explicit preference wins
    assert choose_slot(blind, None, carries_images=True) == "base"


PICTURE = Picture(b"\x89PNG", "image/png", 1, 1)


@given(st.lists(st.integers(0, 3), max_size=12), st.integers(0, 5))
def test_latest_pictures_only_keeps_the_newest(counts: list[int], keep: int) -> None:
    messages = [picture_message(f"m{i}", [PICTURE] * n) if n else {"role": "user", "content": f"m{i}"}
                for i, n in enumerate(counts)]
    kept = latest_pictures_only(messages, keep)
    shown = [sum(1 for p in m["content"] if p.get("type") == "image_url") if isinstance(m["content"], list) else 0
             for m in kept]
    assert sum(shown) == min(keep, sum(counts))
    total = 0
    for n, s in zip(reversed(counts), reversed(shown), strict=True):  # the newest are the ones kept
        assert s == max(0, min(n, keep - total))
        total += n
    assert [content_text(m["content"]).split("\n")[0] for m in kept] == [f"m{i}" for i in range(len(counts))]
