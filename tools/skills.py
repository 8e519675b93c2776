"""Skill tools for clients without MCP prompts/resources: list_skills (search the catalogue) and
load_skill (a skill's instructions or one of its files, paged); plus the texts the MCP layer serves
as prompts and resources, and the file-type hint other tools add to their results."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from context.skills import MAX_LISTED_FILES, SKILL_FILE, Skill, SkillCatalog, SkillRegistry, read_skill_file
from context.skills import search as search_skills
from context.skills import skill_files as list_files
from foundation.bounding import next_offset, page_of, text_page_end
from foundation.errors import InvalidInput
from foundation.settings import Settings
from tools.runtime import Runtime, Service

log = logging.getLogger("generalagent.skills")

PAGE_CHARS = 40_000
RESULT_SHARE = 0.8
PROMPT_FILES = 50  # files named in a prompt / resource listing per skill


BUILTIN_SKILLS = Path(__file__).parent / "builtin" / "skills"


def skill_roots(settings: Settings) -> list[Path]:
    """Where skills are found: GENERALAGENT_SKILLS_DIRS, then <data dir>/skills (then the built-in ones,
    which yield to a skill of the same name: `builtin_skill_roots`)."""
    return [*settings.skills_dirs, settings.data_dir / "skills"]


def builtin_skill_roots(settings: Settings) -> list[Path]:
    return [BUILTIN_SKILLS] if settings.builtins_enabled else []


def skills_config_path(settings: Settings) -> Path:
    return settings.skills_file or settings.data_dir / "skills.toml"


SKILLS: Service[SkillRegistry] = Service(lambda rt: SkillRegistry(
    skill_roots(rt.settings), skills_config_path(rt.settings), builtin_skill_roots(rt.settings)))


def skill_catalog(rt: Runtime, refresh: bool = False) -> SkillCatalog:
    return SKILLS.of(rt).catalog(refresh)


class SkillInfo(BaseModel):
    name: str = Field(description="Pass to load_skill.")
    description: str
    score: float | None = Field(default=None, description="Match score for the query.")


class SkillList(BaseModel):
    skills: list[SkillInfo]
    total: int = Field(description="Matching skills in all.")
    next_offset: int | None = Field(description="Pass as offset for more (null: no more).")
    problems: int = Field(description="Skill folders that could not be loaded (the hint says how to see why).")
    hint: str


def list_skills(
    query: Annotated[str | None, Field(max_length=500, description="Words describing the task (English or "
                                       "Chinese); omit to list every skill.")] = None,
    refresh: Annotated[bool, Field(description="Re-scan the skill folders first.")] = False,
    offset: Annotated[int, Field(ge=0, description="First skill to return.")] = 0,
    limit: Annotated[int, Field(ge=1, le=100, description="Most skills to return.")] = 30,
    *,
    rt: Runtime,
) -> SkillList:
    """Skills (instructions for specialised tasks) with one-line descriptions; search them with query.
    Read one with load_skill before doing its kind of task."""
    catalog = skill_catalog(rt, refresh)
    if query and query.strip():
        found = [SkillInfo(name=s.name, description=s.description, score=score)
                 for s, score in search_skills(catalog.skills.values(), query)]
    else:
        found = [SkillInfo(name=s.name, description=s.description) for s in sorted(catalog.skills.values(),
                                                                                     key=lambda s: s.name)]
    page, more = page_of(found, offset, limit)
    if found:
        hint = "Call load_skill(name) for a skill's instructions."
    else:
        hint = "No skill matches; try other words or omit query." if catalog.skills else (
            "No skills are installed. Set GENERALAGENT_SKILLS_DIRS (e.g. ~/.claude/skills) or add skill "
            "folders to <data dir>/skills.")
    if catalog.problems:
        from foundation.command import run_hint

        hint += (f" {len(catalog.problems)} skill folder(s) could not be loaded; the user sees why with "
                 f"{run_hint(rt.settings, 'doctor')}.")
    return SkillList(skills=page, total=len(found), next_offset=more,
                     problems=len(catalog.problems), hint=hint)


class SkillContent(BaseModel):
    name: str
    description: str
    path: str = Field(description="SKILL.md or the file shown.")
    content: str = Field(description="The instructions (SKILL.md body) or the file's text.")
    next_offset: int | None = Field(description="Pass as offset for the next page (null: the end).")
    total_chars: int
    files: list[str] = Field(description="The skill's other files: pass one as path to read it.")
    allowed_tools: list[str] = Field(default_factory=list, description="Tools the skill expects to use.")


def load_skill(
    name: Annotated[str, Field(min_length=1, max_length=64, description="A skill name from list_skills.")],
    path: Annotated[str | None, Field(max_length=1000, description="A file of the skill (from `files`); "
                                      "omit for its instructions.")] = None,
    offset: Annotated[int, Field(ge=0, description="Character offset (a next_offset).")] = 0,
    *,
    rt: Runtime,
) -> SkillContent:
    """A skill's instructions (or one of its files) and its file list. Follow the instructions for the task."""
    skill = SKILLS.of(rt).get(name.strip())
    if path and path.strip() and path.strip() != SKILL_FILE:
        data = read_skill_file(skill, path.strip())
        if isinstance(data, bytes):
            raise InvalidInput(f"{path!r} in skill {skill.name!r} is a binary file ({len(data)} bytes); "
                               f"read it as the resource skill://{skill.name}/{path.strip()} instead.")
        text, shown = data, path.strip()
    else:
        text, shown = skill.body, SKILL_FILE
    if offset > len(text):
        raise InvalidInput(f"offset {offset} is past the end of {shown} ({len(text)} characters). Use 0.")
    end = text_page_end(text, offset, PAGE_CHARS, int(rt.settings.max_result_tokens * RESULT_SHARE))
    files, _ = list_files(skill)
    return SkillContent(name=skill.name, description=skill.description, path=shown, content=text[offset:end],
                        next_offset=next_offset(end, len(text)), total_chars=len(text), files=files,
                        allowed_tools=list(skill.allowed_tools))


# -- texts for the MCP layer (prompts and resources) and for other tools -----------------------------


def files_note(skill: Skill) -> str:
    files, cut = list_files(skill, PROMPT_FILES)
    if not files:
        return ""
    more = f"\n(and more: load_skill('{skill.name}') lists up to {MAX_LISTED_FILES})" if cut else ""
    lines = "\n".join(f"- {f}" for f in files)
    return (f"\n\nFiles of the {skill.name} skill (read them as resources skill://{skill.name}/<path>, or with "
            f"load_skill('{skill.name}', path=...)):\n{lines}{more}")


def skill_prompt(skill: Skill, request: str | None = None) -> str:
    """The text of the skill's MCP prompt: its instructions, its files, and the user's request."""
    text = f"Use the {skill.name} skill for this task. Its instructions:\n\n{skill.body.strip()}{files_note(skill)}"
    if request and request.strip():
        text += f"\n\nRequest:\n{request.strip()}"
    return text


CATALOG_SKILLS = 60  # skills named in a system prompt's catalog
CATALOG_LINE_CHARS = 160


def catalog_text(catalog: SkillCatalog) -> str:
    """The skill catalog for a system prompt: one line per skill (name: the description's first line)."""
    if not catalog.skills:
        return ""
    skills = sorted(catalog.skills.values(), key=lambda s: s.name)
    lines = [f"- {s.name}: {_one_line(s.description)}" for s in skills[:CATALOG_SKILLS]]
    more = len(skills) - len(lines)
    if more > 0:
        lines.append(f"- ... and {more} more (list_skills finds them)")
    return ("Skills (read a skill's instructions before its task: the prompt of the same name, or "
            "load_skill(name)):\n" + "\n".join(lines))


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= CATALOG_LINE_CHARS else line[: CATALOG_LINE_CHARS - 1] + "…"


def skill_for_file(rt: Runtime, path: str) -> Skill | None:
    """The skill mapped to this file's type (skills.toml, or its SKILL.md's file-types), or None."""
    try:
        return skill_catalog(rt).for_file_type(path)
    except Exception:
        log.warning("skill lookup for %s failed", path, exc_info=True)
        return None


HINT_INSTRUCTION_CHARS = 6_000
_TOLD: Service[set[tuple[str, str]]] = Service(lambda rt: set())  # (session, skill) whose instructions were given


def skill_hint(rt: Runtime, path: str | Path, session: str | None = None) -> str | None:
    """When a skill is mapped to the file's type: the first time in this session, the skill's instructions
    (auto-loaded, so the model sees them with the file); later, a one-line pointer to load_skill. Never fails
    the calling tool."""
    try:
        skill = skill_catalog(rt).for_file_type(path) if Path(path).suffix else None
    except Exception:
        log.warning("skill hint for %s failed", path, exc_info=True)
        return None
    if skill is None:
        return None
    told, key = _TOLD.of(rt), (session or "", skill.name)
    if key not in told and len(told) < 100_000:
        told.add(key)
        body = skill.body.strip()
        cut = f"\n(cut here: load_skill('{skill.name}') has the rest)" if len(body) > HINT_INSTRUCTION_CHARS else ""
        return (f"The {skill.name} skill has instructions for this file type; follow them:\n\n"
                f"{body[:HINT_INSTRUCTION_CHARS]}{cut}")
    return (f"The {skill.name} skill has instructions for this file type: load_skill('{skill.name}') "
            '(enable_tools(["load_skill"]) first if it is not listed)')
