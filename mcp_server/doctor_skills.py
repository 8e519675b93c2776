"""`doctor` checks for skills (every broken SKILL.md named with its problem) and the model slots."""

from __future__ import annotations

from context.llm import SLOTS, slot_values
from context.skills import scan
from foundation.settings import Settings
from mcp_server.cmd_doctor import Check
from tools.skills import skill_roots, skills_config_path

MAX_SHOWN = 20


def check_skills(settings: Settings) -> Check:
    catalog = scan(skill_roots(settings), skills_config_path(settings))
    names = sorted(catalog.skills)
    lines = [f"{len(names)} loaded" + (f" ({', '.join(names[:MAX_SHOWN])}{', …' if len(names) > MAX_SHOWN else ''})"
                                       if names else " (set GENERALAGENT_SKILLS_DIRS, e.g. ~/.claude/skills)")]
    if catalog.disabled:
        lines.append(f"disabled: {', '.join(sorted(catalog.disabled))}")
    lines += [f"{skill.name}: {warning}" for skill in catalog.skills.values() for warning in skill.warnings]
    lines += [f"BROKEN {p.path}: {p.message}" for p in catalog.problems[:MAX_SHOWN]]
    return Check("skills", not catalog.problems, "\n    ".join(lines), required=False)


def check_model_slots(settings: Settings) -> Check:
    lines = []
    for slot in SLOTS:
        values = slot_values(settings, slot)
        where = f"{values.base_url or '(no endpoint)'} model {values.model or '(none)'}"
        inherited = f" (from base: {', '.join(values.inherits)})" if values.inherits else ""
        lines.append(f"{slot}: {where}{inherited}")
    ok = all(slot_values(settings, slot).model or not settings.llm_configured for slot in SLOTS)
    return Check("model slots", ok, "\n    ".join(lines), required=False)
