"""The one place where tools, resources and warm-up work are registered.

Each tool family lives in its own module in `tools/`; this file lists them with
their titles, honest annotations and visibility tier. Keep imports here light:
tool modules import their heavy libraries (jieba, fitz, tiktoken, openai) lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from foundation.toolspec import ToolSpec
from tools import (
    bash,
    context_assemble,
    context_common,
    context_compact,
    context_optimize,
    context_tokens,
    delegate,
    documents,
    files,
    human,
    images,
    index_services,
    index_tools,
    live_index,
    memory,
    meta,
    skills,
    tiers,
    todos,
    watch_tools,
    web,
)
from tools.runtime import Runtime


@dataclass(frozen=True)
class ResourceSpec:
    """A read-only MCP resource: `fn(rt) -> str` (JSON or text) for a fixed URI; for a URI template
    (`todo://{list_id}`) `fn(rt, **params)`, plus `origin=` (the caller's CallOrigin) when fn accepts it."""

    uri: str
    name: str
    description: str
    fn: Callable[..., str]
    mime_type: str = "application/json"


TOOLS: list[ToolSpec] = [
    # -- meta
    ToolSpec(meta.now, title="Current time", read_only=True, idempotent=False, tier="core"),
    # -- tiers and the human (enable_tools only changes the tool list; risky targets need approval)
    ToolSpec(tiers.list_available_tools, title="List more tools", read_only=True, idempotent=True, tier="core"),
    ToolSpec(tiers.enable_tools, title="Enable more tools", read_only=True, idempotent=True, tier="core",
             changes_session=True),
    ToolSpec(human.ask_human, title="Ask the user", read_only=True, idempotent=False, tier="core"),
    # -- todos
    ToolSpec(todos.todo_write, title="Write todo list", read_only=False, idempotent=False, tier="core"),
    ToolSpec(todos.todo_read, title="Read todo list", read_only=True, idempotent=True, tier="core"),
    # -- workspace files and shell (paths confined to the roots; bash disabled unless enabled)
    ToolSpec(files.read_file, title="Read a file", read_only=True, idempotent=True, tier="default"),
    ToolSpec(images.render_page, title="See a PDF page or slide as a picture", read_only=True, idempotent=True, tier="full"),
    ToolSpec(files.list_workspace_files, title="List a folder", read_only=True, idempotent=True, tier="full"),
    ToolSpec(files.find_files, title="Find files by pattern", read_only=True, idempotent=True, tier="full"),
    ToolSpec(files.write_file, title="Write a file", read_only=False, destructive=True, idempotent=True, tier="default"),
    ToolSpec(files.edit_file, title="Edit a file", read_only=False, destructive=True, idempotent=False, tier="default",
             precheck=files.edit_file_precheck),
    ToolSpec(bash.run_bash_command, title="Run a shell command", read_only=False, destructive=True, open_world=True,
             tier="full"),
    # -- the web (off until the user turns it on; sub-agents get it by default then)
    ToolSpec(web.fetch_url, title="Fetch a web page", read_only=True, open_world=True, tier="full"),
    ToolSpec(web.web_search, title="Search the web", read_only=True, open_world=True, tier="full"),
    # -- delegation (calls the user's LLM endpoint: open world)
    ToolSpec(delegate.delegate_task, title="Delegate to a sub-agent", read_only=False, open_world=True, tier="default",
             without_llm="Unavailable: no LLM endpoint is configured."),
    ToolSpec(delegate.delegate_status, title="Sub-agent thread status", read_only=True, idempotent=True, tier="full"),
    ToolSpec(delegate.list_agents, title="List agent cards", read_only=True, idempotent=True, tier="full"),
    # -- skills (SKILL.md folders; also served as MCP prompts and skill:// resources)
    ToolSpec(skills.list_skills, title="List skills", read_only=True, idempotent=True, tier="full"),
    ToolSpec(skills.load_skill, title="Load a skill", read_only=True, idempotent=True, tier="full"),
    # -- context management (compact_context calls the user's LLM endpoint: open world)
    ToolSpec(context_tokens.count_tokens, title="Count tokens", read_only=True, idempotent=True, tier="full"),
    ToolSpec(context_tokens.context_status, title="Context window status", read_only=True, idempotent=True, tier="full"),
    ToolSpec(context_optimize.optimize_context, title="Optimize context", read_only=True, idempotent=True, tier="full"),
    ToolSpec(context_compact.compact_context, title="Compact context", read_only=False, open_world=True, tier="full",
             without_llm="No LLM endpoint is configured: it truncates instead of summarising."),
    ToolSpec(context_assemble.assemble_context, title="Assemble cache-stable context", read_only=False, tier="full"),
    # -- memory
    ToolSpec(memory.remember, title="Remember a fact", read_only=False, idempotent=True, tier="core"),
    ToolSpec(memory.recall, title="Recall facts", read_only=True, idempotent=True, tier="core"),
    ToolSpec(memory.forget, title="Forget a fact", read_only=False, destructive=True, tier="full",
             check_args=memory.check_forget_args),
    ToolSpec(memory.list_memories, title="List remembered facts", read_only=True, idempotent=True, tier="full"),
    # -- document search and the index
    ToolSpec(documents.search_documents, title="Search indexed documents", read_only=True, idempotent=True,
             tier="core", quick=documents.search_is_quick),
    ToolSpec(documents.search_file, title="Search in a file", read_only=True, idempotent=True, tier="core"),
    ToolSpec(index_tools.index_path, title="Index files for search", read_only=False, idempotent=True, tier="core"),
    ToolSpec(index_tools.index_status, title="Index status", read_only=True, idempotent=True, tier="core"),
    ToolSpec(index_tools.remove_from_index, title="Remove from the index", read_only=False, destructive=True,
             idempotent=True, tier="full"),
    ToolSpec(watch_tools.unwatch_path, title="Stop watching a folder", read_only=False, idempotent=False,
             tier="full"),
    ToolSpec(index_tools.cleanup_index, title="Clean up the index", read_only=False, destructive=True,
             idempotent=True, tier="full"),
]

RESOURCES: list[ResourceSpec] = [
    ResourceSpec(
        "todo://{list_id}", "todo-list", "A todo list as JSON; todo://default is this workspace's list.",
        todos.todo_resource,
    ),
    ResourceSpec(
        "subagent://{context_id}", "subagent-thread", "A delegate_task thread as JSON: status, result, transcript.",
        delegate.thread_resource,
    ),
]

WARMUPS: list[Callable[[Runtime], None]] = [live_index.warm_up_watcher, index_services.warm_up_search,
                                            context_common.warm_up_tokens,
                                            bash.warm_up_workspace_scan, index_services.warm_up_meaning]
"""Run once in a background thread after start-up (e.g. load jieba's dictionary)."""
