"""Ask the human a question: through the client's form (MCP elicitation) when it has one,
else the result tells the assistant to ask the user in the chat."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, create_model

from foundation.calls import CallOrigin
from foundation.errors import InvalidInput
from tools.runtime import CallContext


class HumanAnswer(BaseModel):
    answered: bool
    answer: str | None = Field(description="The answer (or the default).")
    status: str = Field(description="answered, default_used, declined, cancelled or ask_in_chat.")
    instruction: str | None = Field(default=None, description="What to do next.")


def question_form(question: str, context: str | None = None, default: str | None = None,
                  required: bool = True) -> tuple[str, type[BaseModel]]:
    """The elicitation message and form for a question (deterministic: it may be re-rendered)."""
    message = question if not context else f"{question}\n\n{context}"
    field: Any = Field(default=default, title="Answer", description=question[:200]) if default is not None \
        else Field(title="Answer", description=question[:200])
    form = create_model("HumanQuestion", answer=(str, field))
    return message, form


async def ask_human(
    question: Annotated[str, Field(min_length=1, max_length=2000, description="The question for the user.")],
    call: CallContext,
    context: Annotated[str | None, Field(max_length=4000, description="Background the user needs to answer.")] = None,
    default: Annotated[str | None, Field(max_length=500, description="Answer to use if the user skips it.")] = None,
    required: Annotated[bool, Field(description="If false, a skipped question returns the default.")] = True,
) -> HumanAnswer:
    """Ask the user a question and wait for the answer (falls back to asking in chat)."""
    if not question.strip():
        raise InvalidInput("question is empty. Write the question for the user.")
    origin = call.origin
    reply = origin.human_answer
    if reply is None and origin.kind == "subagent":
        reply = await _ask_through_parent(origin, question, context, default, required)
    if reply is None and origin.kind == "subagent":
        return HumanAnswer(answered=False, answer=None, status="ask_in_chat",
                           instruction="The user cannot be asked from inside this sub-agent now (the client cannot "
                                       "show a form mid-call). Do not guess: end with what you found and put this "
                                       f"question in your final answer for the parent agent: {question}")
    if reply is None:
        return HumanAnswer(answered=False, answer=None, status="ask_in_chat",
                           instruction=f"This client cannot show questions. Ask the user in the chat: {question}")
    return _interpret(reply, default, required)


ask_human.human_question = question_form  # type: ignore[attr-defined]  # the entry elicits with this


def _interpret(reply: dict[str, Any], default: str | None, required: bool) -> HumanAnswer:
    action = reply.get("action")
    if action == "accept":
        answer = str((reply.get("content") or {}).get("answer") or "").strip()
        if answer:
            return HumanAnswer(answered=True, answer=answer, status="answered")
        if default is not None:
            return HumanAnswer(answered=True, answer=default, status="default_used")
    status = "cancelled" if action == "cancel" else "declined"
    if not required and default is not None:
        return HumanAnswer(answered=True, answer=default, status="default_used")
    return HumanAnswer(answered=False, answer=None, status=status,
                       instruction="The user chose not to answer. Do not guess; continue without it or "
                                   "ask in the chat if it is essential.")


async def _ask_through_parent(origin: CallOrigin, question: str, context: str | None, default: str | None,
                              required: bool) -> dict[str, Any] | None:
    """A sub-agent's question, asked through the parent call's client (when it can ask mid-call)."""
    channel = origin.channel
    if channel is None or not channel.can_ask_now():
        return None
    message, form = question_form(question, context, default, required)
    return await channel.ask(message, form)
