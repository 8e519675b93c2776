"""The skill registry without MCP: parsing (property-based), discovery, skills.toml, confinement, search."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from context.skills import (
    MAX_SKILL_MD_BYTES,
    SkillFormatError,
    SkillRegistry,
    parse_skill,
    scan,
    search,
    skill_file_path,
)
from foundation.errors import GeneralAgentError, PathNotAllowed

FOLDER = Path("/skills/demo")
names = st.from_regex(r"[a-z0-9]{1,10}(-[a-z0-9]{1,10}){0,3}", fullmatch=True)
texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=200).filter(str.strip)


def skill_md(front: dict[str, object], body: str = "# Body\n") -> str:
    return "---\n" + yaml.safe_dump(front, allow_unicode=True) + "---\n" + body


@given(name=names, description=texts, body=st.text(max_size=300), tools=st.lists(names, max_size=4))
@settings(max_examples=150, deadline=None)
def test_valid_front_matter_round_trips(name: str, description: str, body: str, tools: list[str]) -> None:
    front = {"name": name, "description": description, "allowed-tools": " ".join(tools), "metadata": {"v": 1}}
    skill = parse_skill(skill_md(front, body), FOLDER)
    assert skill.name == name and skill.description == " ".join(description.split())
    assert skill.allowed_tools == tuple(tools) and skill.metadata == (("v", "1"),)
    assert skill.body == body.replace("\r\n", "\n").lstrip("\n")


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_any_text_parses_or_gets_a_format_error(text: str) -> None:
    try:
        parse_skill(text, FOLDER)
    except SkillFormatError as exc:
        assert str(exc)


@pytest.mark.parametrize("text, message", [
    ("# no front matter", "does not start with a '---' line"),
    ("---\nname: x\n", "no closing '---'"),
    ("---\nname: [unclosed\n---\n", "not valid YAML"),
    ("---\n- a\n- b\n---\n", "not a YAML mapping"),
    ("---\ndescription: d\n---\n", "'name' is missing"),
    ("---\nname: Bad_Name\ndescription: d\n---\n", "lowercase letters, digits and single hyphens"),
    ("---\nname: ok\n---\n", "'description' is missing"),
    ("---\nname: ok\ndescription: ''\n---\n", "'description' must be non-empty text"),
    ("---\nname: ok\ndescription: " + "x" * 1025 + "\n---\n", "longer than 1024"),
    ("---\nname: ok\ndescription: d\nmetadata: [1]\n---\n", "'metadata' must be a mapping"),
    ("---\nname: ok\ndescription: d\nallowed-tools: 3\n---\n", "'allowed-tools' must be"),
    ("---\na: &a [x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\nname: ok\ndescription: d\nmetadata: {m: *b}\n---\n",
     "'metadata' must be a mapping"),
    ("---\nname: ok\ndescription: d\nx: " + "[" * 5000 + "\n---\n", "front matter"),
])
def test_invalid_front_matter_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(SkillFormatError, match=message):
        parse_skill(text, FOLDER)


def write(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True)
    (root / folder / "SKILL.md").write_text(text, encoding="utf-8")
    return root / folder


def test_discovery_config_duplicates_and_limits(tmp_path: Path) -> None:
    many, single = tmp_path / "many", tmp_path / "single"
    write(many, "alpha", skill_md({"name": "alpha", "description": "First."}))
    write(many, "beta", skill_md({"name": "beta", "description": "Second."}))
    write(many, ".hidden", skill_md({"name": "hidden", "description": "Skipped."}))
    write(many, "huge", "---\nname: huge\ndescription: d\n---\n" + "x" * MAX_SKILL_MD_BYTES)
    write(tmp_path, "single", skill_md({"name": "alpha", "description": "Duplicate."}))
    config = tmp_path / "skills.toml"
    config.write_text('[skills.beta]\nenabled = false\n[skills.alpha]\nauto_load_on_file_types = ["PDF", ".Xlsx"]\n')
    catalog = scan([many, single, tmp_path / "missing"], config)
    assert sorted(catalog.skills) == ["alpha"] and catalog.disabled == ["beta"]
    assert catalog.skills["alpha"].file_types == (".pdf", ".xlsx")
    assert catalog.for_file_type("Report.PDF") is catalog.skills["alpha"] and catalog.for_file_type("a.txt") is None
    problems = sorted(p.message for p in catalog.problems)
    assert any("over the" in p for p in problems) and any("found earlier" in p for p in problems)
    config.write_text('[skills.alpha]\nauto_load_on_file_types = ["no good"]\n')
    broken = scan([many], config)
    assert "alpha" in broken.skills and any("invalid file types" in p.message for p in broken.problems)


def test_registry_rescans_when_folders_change(tmp_path: Path) -> None:
    registry = SkillRegistry([tmp_path], None)
    assert registry.catalog().skills == {} and registry.version == 1
    folder = write(tmp_path, "one", skill_md({"name": "one", "description": "One."}))
    assert list(registry.catalog().skills) == ["one"] and registry.version == 2
    assert registry.catalog().version == 2  # unchanged: no new version
    (folder / "SKILL.md").write_text(skill_md({"name": "one", "description": "Changed."}))
    os.utime(folder / "SKILL.md", ns=(1, 1))
    assert registry.catalog().skills["one"].description == "Changed."
    with pytest.raises(GeneralAgentError, match="No skill 'two'. Known skills: one"):
        registry.get("two")


@given(st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_skill_files_never_leave_the_folder(tmp_path_factory: pytest.TempPathFactory, relative: str) -> None:
    root = tmp_path_factory.getbasetemp() / "confine"
    folder = root / "demo"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "a.md").write_text("a")
        (root / "outside.txt").write_text("secret")
        os.symlink(root / "outside.txt", folder / "out")
    skill = parse_skill(skill_md({"name": "demo", "description": "d"}), Path(os.path.realpath(folder)))
    try:
        real = skill_file_path(skill, relative)
    except (GeneralAgentError, OSError):
        return
    assert real.is_relative_to(skill.folder) and real != skill.folder


def test_symlink_out_and_dotdot_are_refused(tmp_path: Path) -> None:
    folder = write(tmp_path, "demo", skill_md({"name": "demo", "description": "d"}))
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", folder / "link")
    skill = parse_skill((folder / "SKILL.md").read_text(), Path(os.path.realpath(folder)))
    for relative in ("../secret", "link", "/etc/passwd", "a/../../secret", "C:/x"):
        with pytest.raises(PathNotAllowed):
            skill_file_path(skill, relative)


def test_search_uses_the_document_analyzer_in_both_languages() -> None:
    pdf = parse_skill(skill_md({"name": "pdf-forms", "description": "Fill in PDF forms and extract tables."}), FOLDER)
    zh = parse_skill(skill_md({"name": "zh-report", "description": "根据销售数据撰写季度报告。"}), FOLDER)
    notes = parse_skill(skill_md({"name": "meeting-notes", "description": "Summarise meetings."}), FOLDER)
    assert [s.name for s, _ in search([pdf, zh, notes], "filling a form in pdfs")] == ["pdf-forms"]
    assert [s.name for s, _ in search([pdf, zh, notes], "写一份季度销售报告")] == ["zh-report"]
    assert search([pdf, zh, notes], "the of and") == []


def test_the_shipped_example_skill_loads_and_is_found() -> None:
    examples = Path(__file__).resolve().parents[1] / "examples" / "skills"
    catalog = scan([examples], None)
    assert catalog.problems == [] and list(catalog.skills) == ["document-research"]
    skill = catalog.skills["document-research"]
    assert skill.allowed_tools == ("index_path", "search_documents", "search_file", "read_file")
    assert search(catalog.skills.values(), "answer a question using my PDF files")[0][0] is skill


@given(st.lists(st.text(max_size=12), max_size=5))
@settings(max_examples=200, deadline=None)
def test_file_type_mapping_normalises_or_refuses(tmp_path_factory: pytest.TempPathFactory, types: list[str]) -> None:
    import json

    from context.skills import EXT_RE, load_config

    path = tmp_path_factory.mktemp("cfg") / "skills.toml"
    path.write_text(f"[skills.demo]\nauto_load_on_file_types = {json.dumps(types)}\n", encoding="utf-8")
    try:
        config = load_config(path)
    except SkillFormatError as exc:
        assert "skills.demo" in str(exc) or "cannot be read" in str(exc)
        return
    assert all(EXT_RE.match(ext) for ext in config.file_types.get("demo", ()))
