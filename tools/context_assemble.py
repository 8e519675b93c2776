"""assemble_context: a cache-stable layout of the next request (context.layout)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field

from context import carryover
from context.layout import (
    Reminder as Due,
)
from context.layout import (
    attach,
    conversation_start,
    emit,
    observe,
    reminder_block,
    system_text,
    tell_once,
    text_hash,
    time_reminder,
)
from context.messages import Msg, render
from context.status import context_level
from context.todos import reminder_of
from context.tokens import counter_for
from foundation.errors import InvalidInput
from tools.context_common import (
    FormatParam,
    MessagesPage,
    MessagesParam,
    ModelParam,
    PageParam,
    context_store,
    page_of,
    parse_transcript,
    stored_todos,
    total_tokens,
)
from tools.memory import ScoredFact, recall
from tools.runtime import CallContext, Runtime
from tools.skills import catalog_text, skill_catalog, skill_for_file, skill_prompt

SKILL_REMINDER_CHARS = 12_000


class Reminder(BaseModel):
    kind: str = Field(description="time, tools, skills, skill (instructions for a file type), files, memory, todos "
                                  "or tokens.")
    text: str = Field(description="The reminder text.")


class AssembleResult(MessagesPage):
    system_hash: str = Field(description="Hash of the system text: the same for the whole conversation.")
    reminders: list[Reminder] = Field(description="Reminders emitted this turn (each only once).")
    tokens: int = Field(description="Tokens of the assembled context.")
    level: str = Field(description="Context level: info, warning or critical.")


def assemble_context(
    system_prompt: Annotated[str, Field(max_length=200_000, description="Your static system prompt.")],
    messages: MessagesParam,
    conversation_id: Annotated[
        str,
        Field(
            min_length=1,
            max_length=200,
            description="Your conversation's id (reminder state is kept per id).",
        ),
    ] = "default",
    tools: Annotated[
        list[str] | None, Field(description="Names of the tools available now; new ones are announced once.")
    ] = None,
    skills: Annotated[
        list[str] | None, Field(description="Skills available now; new ones are announced once.")
    ] = None,
    files: Annotated[
        list[str] | None, Field(description="Files uploaded so far; new ones are announced once.")
    ] = None,
    todo_list_id: Annotated[
        str | None,
        Field(description="Todo list whose open items are reminded when they change (default list)."),
    ] = None,
    context_window: Annotated[
        int | None, Field(ge=1000, description="Window size: a token warning is added when the level rises.")
    ] = None,
    model: ModelParam = None,
    format: FormatParam = "auto",
    page_offset: PageParam = 0,
    recall_memory: Annotated[
        bool, Field(description="Add stored facts relevant to the last turns (each once per conversation).")
    ] = True,
    *,
    rt: Runtime,
    call: CallContext,
) -> AssembleResult:
    """Build what to send next with a cache-stable layout: a system message byte-identical for the whole
    conversation (your prompt, the skill catalog, the start time) and this turn's reminders (the current
    time, new tools/skills/files, a skill's instructions for a file's type, recalled facts, todo changes,
    token warnings) appended to the newest user message, each only once."""
    return assemble(
        rt,
        call,
        system_prompt,
        messages,
        conversation_id,
        tools,
        skills,
        files,
        todo_list_id,
        context_window,
        model,
        format,
        page_offset,
        None,
        recall_memory,
    )


def assemble(
    rt: Runtime,
    call: CallContext,
    system_prompt: str,
    messages: list[dict[str, Any]],
    conversation_id: str,
    tools: list[str] | None,
    skills: list[str] | None,
    files: list[str] | None,
    todo_list_id: str | None,
    context_window: int | None,
    model: str | None,
    fmt: str,
    page_offset: int,
    now: datetime | None,
    recall_memory: bool = True,
) -> AssembleResult:
    """assemble_context with an injectable clock (tests)."""
    transcript = parse_transcript(messages, None, fmt)
    if any(m.role == "system" for m in transcript.messages):
        raise InvalidInput("messages contain a system message; pass it as system_prompt instead.")
    counter = counter_for(model)
    now = now or datetime.now(UTC)
    store = context_store(rt)
    state = store.get_state(conversation_id)
    catalog = skill_catalog(rt)
    started, catalog_said = conversation_start(state, system_prompt, now, catalog_text(catalog))
    sys_text = system_text(system_prompt, started, catalog_said)
    if "known_skills" not in state and catalog_said:  # the catalog in the system message names them
        observe(state, "skills", catalog.skills)
        state["new_skills"] = []
    for kind, items in (("tools", tools), ("skills", [*(skills or []), *catalog.skills]), ("files", files)):
        if items is not None:
            observe(state, kind, items)
    told_time = time_reminder(state, now)
    early = _early_reminders(rt, state, messages if recall_memory else None)
    todo_text = _todo_reminder(rt, todo_list_id, call.client_id, transcript.messages)
    tokens = counter.count(sys_text) + total_tokens(counter, transcript.messages)
    level, level_text = "info", None
    if context_window:
        status = context_level(
            tokens, context_window, rt.settings.context_warning_ratio, rt.settings.context_critical_ratio
        )
        level = status.level
        level_text = f"Context is {status.ratio:.0%} full ({tokens} of {context_window} tokens). {status.recommendation}"
    due = [*([told_time] if told_time else []), *emit(state, todo_text, level if context_window else None, level_text),
           *early]
    store.put_state(conversation_id, state)
    msgs = transcript.messages
    if due:
        msgs = attach(msgs, reminder_block(due), transcript.format)
    if transcript.format == "openai":
        msgs = [Msg("system", sys_text, changed=True), *msgs]
        rendered, system_out = render(transcript, msgs)
    else:
        rendered, _ = render(transcript, msgs)
        system_out = sys_text
    page = page_of(rt, transcript.format, rendered, system_out, page_offset)
    return AssembleResult(
        **page.model_dump(),
        system_hash=text_hash(sys_text),
        reminders=[Reminder(kind=r.kind, text=r.text) for r in due],
        tokens=tokens + sum(counter.count(r.text) for r in due),
        level=level,
    )


def _early_reminders(rt: Runtime, state: dict[str, Any], messages: list[dict[str, Any]] | None) -> list[Due]:
    """A skill's instructions for each new file whose type a skill is mapped to, then the facts recalled for
    the last turns: each told once per conversation (read before `emit` clears the new files)."""
    out: list[Due] = []
    found = [s for s in (skill_for_file(rt, f) for f in state.get("new_files") or []) if s is not None]
    for name in tell_once(state, "loaded_skills", [s.name for s in found]):
        skill = next(s for s in found if s.name == name)
        out.append(Due("skill", skill_prompt(skill)[:SKILL_REMINDER_CHARS]))
    if messages:
        facts = [f for f in recall(messages=messages[-6:], max_tokens=800, top_k=8, rt=rt).facts]
        new = set(tell_once(state, "told_facts", [str(f.id) for f in facts]))
        lines = [fact_line(f) for f in facts if str(f.id) in new]
        if lines:
            out.append(Due("memory", "Remembered facts that may matter now (from memory):\n" + "\n".join(lines)))
    return out


def fact_line(fact: ScoredFact) -> str:
    label = f"[{fact.category}] " if fact.category else ""
    return f"- {label}{fact.content}"


def _todo_reminder(rt: Runtime, list_id: str | None, client_id: str, msgs: list[Msg]) -> str | None:
    stored = stored_todos(rt, list_id, client_id)
    if stored is not None:
        return reminder_of(stored)
    found = carryover.todos_from_transcript(msgs)
    open_items = carryover.open_todos(found or [])
    if not open_items:
        return None
    lines = [f"- [{t.status}] {t.content}" for t in open_items[:20]]
    return "Unfinished todo items:\n" + "\n".join(lines)
