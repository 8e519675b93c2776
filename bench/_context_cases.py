"""Generated transcripts for the context-fidelity benchmark and tests.

A case is an agent conversation (OpenAI or Anthropic format) with tool chains, todo_write calls,
pasted blobs, user small talk and *constraint sentences*: things the user said that must keep
holding (a language, a version, a quota, a person's role, a format...). They are filled from many
templates in English and Chinese, most without any trigger word ("must", "always", "请"...), and
placed in user messages next to small talk. The checker only asks: is each sentence still in the
output, verbatim? and is each open todo still there?
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

NAMES = ["Ana", "Bram", "Chen", "Dario", "Elif", "Femi", "Greta", "Hiro", "Ines", "Jonas"]
ZH_NAMES = ["王磊", "李娜", "张伟", "刘洋", "陈静", "杨帆", "赵敏", "黄涛"]
LANGS = ["Spanish", "German", "Portuguese", "Dutch", "Italian", "French"]
TOOLS = [("Node", "20"), ("Python", "3.11"), ("Go", "1.22"), ("Java", "21"), ("Ruby", "3.3"), ("Rust", "1.79")]
DBS = [("PostgreSQL", "15"), ("MySQL", "8.0"), ("MariaDB", "10.11"), ("SQLite", "3.45")]
THINGS = ["uploads", "exports", "API calls", "emails", "webhooks", "reports"]
CURRENCIES = ["euros", "Swiss francs", "yen", "Canadian dollars"]
DIRS = ["docs", "scripts", "tools", "deploy", "examples"]

EN_TEMPLATES = [
    "Reply in {lang} from here on.",
    "Stick to {tool} {ver}.",
    "Our quota is {n} {thing} an hour, so queue them.",
    "{name} reviews every migration before it ships.",
    "The staging box has only {n} GB of RAM.",
    "Dates go in ISO format, like 2024-0{d}-1{d}.",
    "No emojis in commit messages.",
    "We deploy on Fridays only before {n} am.",
    "Money amounts are in {cur}, two decimals.",
    "Logs stay in English even in the {lang} build.",
    "The customer can't see our internal ticket numbers.",
    "Let's leave the public API of {dir}/ exactly as it is.",
    "Anything touching billing goes past {name} first.",
    "Tests run against {db} {dbver}, not an in-memory fake.",
    "Variable names are snake_case in the {dir} folder.",
    "Prices shown to users include VAT of {n} percent.",
    "Ask me before deleting anything under {dir}/.",
    "Functions stay below {n}0 lines.",
    "The nightly build has a {n}0-minute limit.",
    "{name} is the only one who can approve releases.",
    "Put new scripts in {dir}/ rather than the repo root.",
    "The client's legal team wants every file to carry the {lic} header.",
    "Use tabs in the Makefile and four spaces elsewhere.",
    "Error messages are shown to end users, so no stack traces in them.",
    "We're on a {n}-person team, so keep the setup simple.",
    "Timestamps are UTC everywhere, including the {dir} output.",
    "The mobile app still talks to v{n} of the API.",
    "Keep the answer short, bullet points are fine.",
]
ZH_TEMPLATES = [
    "请用繁体中文回答。",
    "以后都用{lang_zh}回复我。",
    "数据库用 {db} {dbver}。",
    "每小时最多上传 {n} 个文件，多了就排队。",
    "提交信息写英文。",
    "周五下午不发版。",
    "金额单位是{cur_zh}，保留两位小数。",
    "接口返回的字段名一律小写加下划线。",
    "日志里不能出现用户的手机号。",
    "{zname}负责审核所有数据库变更。",
    "测试环境只有 {n} GB 内存。",
    "先别动前端代码。",
    "新文档放在 {dir} 目录下。",
    "{zname}是这个项目的产品负责人，需求以她为准。",
    "代码注释用中文写。",
    "每个函数不超过 {n}0 行。",
]
LANGS_ZH = ["英文", "日文", "简体中文", "德文"]
CURRENCIES_ZH = ["人民币", "港币", "新台币"]
LICENSES = ["MIT", "Apache-2.0", "BSD-3-Clause", "MPL-2.0"]

SMALL_TALK = [
    "Thanks!",
    "Looks good so far.",
    "Hmm, interesting.",
    "OK, go on.",
    "never mind, that was fine.",
    "Sorry, I was in a meeting.",
    "Nice work on that one.",
    "Let me think about it.",
    "好的，谢谢。",
    "嗯，继续吧。",
    "辛苦了！",
]
ASKS = [
    "Now look at {f}.",
    "What does the error in the log say?",
    "Can you check {f} too?",
    "Run the tests again.",
    "Why did the build fail?",
    "帮我看一下 {f}。",
    "继续下一步。",
]
FILES = ["src/app/parser.py", "src/app/config.py", "tests/test_parser.py", "docs/guide.md", "src/app/db/models.py"]


@dataclass
class Case:
    messages: list[dict[str, Any]]
    system: Any
    fmt: str
    constraints: list[str]
    open_todos: list[str]
    user_sentences: list[str] = field(default_factory=list)


def constraint_pool(rng: random.Random, k: int) -> list[str]:
    """`k` distinct constraint sentences, about a third Chinese, filled from the templates."""
    out: dict[str, None] = {}
    while len(out) < k:
        zh = rng.random() < 0.33
        template = rng.choice(ZH_TEMPLATES if zh else EN_TEMPLATES)
        tool, ver = rng.choice(TOOLS)
        db, dbver = rng.choice(DBS)
        text = template.format(
            lang=rng.choice(LANGS),
            tool=tool,
            ver=ver,
            db=db,
            dbver=dbver,
            n=rng.randint(2, 9),
            d=rng.randint(1, 9),
            thing=rng.choice(THINGS),
            name=rng.choice(NAMES),
            zname=rng.choice(ZH_NAMES),
            cur=rng.choice(CURRENCIES),
            cur_zh=rng.choice(CURRENCIES_ZH),
            lang_zh=rng.choice(LANGS_ZH),
            dir=rng.choice(DIRS),
            lic=rng.choice(LICENSES),
        )
        out.setdefault(text, None)
    return list(out)


def _blob(rng: random.Random) -> str:
    if rng.random() < 0.5:
        lines = [f"2024-05-0{rng.randint(1, 9)} 12:{k:02d}:01 ERROR worker-{k % 4} job {rng.randint(1000, 9999)} failed: timeout" for k in range(rng.randint(40, 120))]
        return "Here is the log:\n```\n" + "\n".join(lines) + "\n```"
    lines = [f"    value_{k} = compute(row[{k}]) * {rng.random():.3f}" for k in range(rng.randint(40, 120))]
    return "This is the current file:\n```python\ndef build(row):\n" + "\n".join(lines) + "\n```"


def tool_output(rng: random.Random, i: int) -> str:
    if rng.random() < 0.5:
        rows = [
            {"id": k, "path": rng.choice(FILES), "line": rng.randint(1, 900), "text": "def f(x): return x"}
            for k in range(rng.randint(5, 40))
        ]
        return json.dumps({"success": True, "count": len(rows), "matches": rows})
    lines = [
        f"{rng.choice(FILES)}:{rng.randint(1, 500)}: step {i} output line {k} value={rng.random():.4f}"
        for k in range(rng.randint(3, 40))
    ]
    return "\n".join(lines)


def _user_text(rng: random.Random, pending: list[str], share: float) -> str:
    parts = []
    if rng.random() < 0.5:
        parts.append(rng.choice(SMALL_TALK))
    if pending and rng.random() < share:
        parts.append(pending.pop(0))
    parts.append(rng.choice(ASKS).format(f=rng.choice(FILES)))
    if rng.random() < 0.06:
        parts.append(_blob(rng))
    rng.shuffle(parts[:-1])
    sep = "" if all(ord(p[-1]) > 0x3000 for p in parts[:-1]) else " "
    return sep.join(parts)


def make_events(n_messages: int, seed: int, n_constraints: int = 12) -> tuple[list[dict[str, Any]], list[str]]:
    """Abstract turns (about `n_messages` messages) and the constraint sentences placed in them."""
    rng = random.Random(seed)
    constraints = constraint_pool(rng, n_constraints)
    pending = list(constraints)
    users_expected = max(n_messages * 0.12, 1)
    share = min(1.0, 2 * n_constraints / users_expected)
    events: list[dict[str, Any]] = [{"kind": "user", "text": "Please refactor the parser in src/app/parser.py and keep the tests green."}]
    count, i, todo_round = 1, 0, 0
    while count < n_messages:
        i += 1
        roll = rng.random()
        if i % 37 == 0 and count < n_messages * 0.6:  # the list stops changing: the last write ages
            todo_round += 1
            done = todo_round % 4
            items = [
                {"content": f"Round {todo_round} task {k}: update {FILES[k % len(FILES)]}", "status": "completed" if k < done else ("in_progress" if k == done else "pending")}
                for k in range(5)
            ]
            events.append({"kind": "todo", "items": items})
            count += 2
        elif roll < 0.12:
            events.append({"kind": "user", "text": _user_text(rng, pending, share)})
            count += 1
        elif roll < 0.25:
            events.append({"kind": "assistant", "text": f"I checked {rng.choice(FILES)}; step {i} is done. " * rng.randint(1, 4)})
            count += 1
        else:
            n = 1 if rng.random() < 0.8 else 2
            calls = [("search_files" if rng.random() < 0.5 else "read_file", {"path": rng.choice(FILES), "i": i}) for _ in range(n)]
            events.append({"kind": "chain", "calls": calls, "results": [tool_output(rng, i) for _ in range(n)]})
            count += 1 + n
    for text in pending:
        events.insert(len(events) // 2, {"kind": "user", "text": text})
    return events, constraints


def open_todos_of(events: list[dict[str, Any]]) -> list[str]:
    last = [ev for ev in events if ev["kind"] == "todo"][-1:]
    return [item["content"] for item in (last[0]["items"] if last else []) if item["status"] != "completed"]


def make_case(n_messages: int, fmt: str, seed: int, n_constraints: int = 12) -> Case:
    from bench.context_bench import to_anthropic, to_openai

    events, constraints = make_events(n_messages, seed, n_constraints)
    system = "You are a coding agent."
    if fmt == "openai":
        messages = to_openai(events, system)
        system_arg: Any = None
    else:
        messages, system_arg = to_anthropic(events), system
    users = [ev["text"].split("```")[0] for ev in events if ev["kind"] == "user"]  # pasted blobs excluded
    return Case(messages, system_arg, fmt, constraints, open_todos_of(events), users)
