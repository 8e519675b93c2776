"""A small table of abbreviations and synonyms for memory recall, and word-form folding.

Each group lists words (English and Chinese) that mean the same thing in the situations a memory
fact is about: software work (repo/repository, db/database, k8s/kubernetes...) and everyday facts
about people (pay/salary/payroll, diet/allergy, boss/manager...). Terms are compared after the
search analyzer (stemming, jieba), so one entry covers the word's forms. `expand` adds a concept
term `≈<group>` for every term of a group and `~<prefix>` for long Latin words (so intolerant,
intolerance, and allergic, allergy meet); both count less than the words themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

GROUPS: dict[str, tuple[str, ...]] = {
    "repo": ("repo", "repos", "repository", "repositories", "git", "gitlab", "github", "source code", "代码库", "仓库"),
    "db": ("db", "database", "databases", "postgres", "postgresql", "mysql", "sqlite", "数据库"),
    "k8s": ("k8s", "kubernetes", "cluster", "orchestration", "container", "containers", "集群"),
    "ci": ("ci", "continuous integration", "jenkins", "pipeline", "build", "builds", "构建"),
    "pr": ("pr", "prs", "pull request", "merge request", "mr", "code review", "review"),
    "env": ("env", "environment", "environments", "staging", "环境"),
    "prod": ("prod", "production", "live", "release", "releases", "ship", "deploy", "deployment", "deployments", "发版", "上线", "发布"),
    "config": ("config", "configuration", "配置"),
    "docs": ("docs", "doc", "documentation", "manual", "guide", "说明书", "文档"),
    "auth": ("auth", "authentication", "login", "sign in", "登录"),
    "email": ("email", "mail", "e-mail", "inbox", "邮件", "邮箱"),
    "phone": ("phone", "call", "calls", "telephone", "电话"),
    "pay": ("pay", "paid", "pays", "salary", "salaries", "wage", "wages", "payroll", "paycheck", "工资", "薪水", "发薪水", "薪资", "发工资"),
    "bill": ("bill", "billed", "bills", "billing", "invoice", "invoices", "charge", "账单", "发票"),
    "money": ("budget", "spend", "spending", "cost", "costs", "limit", "预算", "花费"),
    "diet": ("diet", "dietary", "food", "eat", "eats", "cheese", "milk", "dairy", "lactose", "vegan", "vegetarian", "gluten", "饮食", "忌口", "吃"),
    "allergy": ("allergy", "allergic", "allergies", "intolerant", "intolerance", "peanut", "satay", "seafood", "shrimp", "过敏", "海鲜", "虾"),
    "drink": ("drink", "drinks", "coffee", "espresso", "latte", "decaf", "caffeine", "tea", "咖啡", "拿铁", "茶", "饮料", "喝"),
    "boss": ("boss", "manager", "manages", "lead", "leads", "head", "owner", "responsible", "负责人", "负责", "领导", "管"),
    "leave": ("leave", "vacation", "holiday", "away", "available", "back", "休假", "请假"),
    "meeting": ("meeting", "meetings", "session", "standup", "sync", "planning", "会议", "例会"),
    "editor": ("editor", "ide", "vim", "neovim", "vscode", "emacs", "编辑器"),
    "password": ("password", "passwords", "credentials", "secret", "secrets", "vault", "1password", "密码"),
    "time": ("timezone", "time zone", "cet", "utc", "located", "location", "city", "office", "时区", "城市", "办公室", "办公", "地点"),
    "commute": ("commute", "commutes", "bicycle", "bike", "car", "parking", "train", "subway", "metro", "地铁", "上班", "通勤"),
    "report": ("report", "reports", "weekly report", "status update", "周报", "汇报"),
    "lang": ("language", "written", "english", "chinese", "spelling", "繁体", "简体", "繁体中文"),
    "license": ("license", "licence", "licensed", "apache", "mit", "gpl", "oss", "open source", "open-source", "许可证"),
    "birthday": ("birthday", "born", "生日", "出生"),
    "pet": ("pet", "pets", "cat", "dog", "宠物", "猫", "狗"),
    "oncall": ("on-call", "oncall", "pager", "rotation", "值班"),
    "restart": ("restart", "reboot", "restarts", "重启"),
}
PREFIX_CHARS = 5
_LATIN_WORD = re.compile(r"^[a-z]{6,}$")

Analyzer = Callable[[str], list[str]]


def fold(text: str) -> str:
    """Spelling variants folded before analysis: e-mail -> email, on-call -> oncall."""
    return re.sub(r"(?<=\b[A-Za-z])-(?=[A-Za-z])|(?<=\bon)-(?=call)", "", text)


@lru_cache(maxsize=8)
def _table(analyzer: Analyzer) -> dict[str, str]:
    """Analyzed term -> group, for single-term entries (multi-word entries match as phrases)."""
    out: dict[str, str] = {}
    for group, words in GROUPS.items():
        for word in words:
            terms = analyzer(fold(word))
            if len(terms) == 1:
                out.setdefault(terms[0], group)
    return out


def _phrases() -> list[tuple[str, str]]:
    return [(w, g) for g, words in GROUPS.items() for w in words if " " in w]


def expand(text: str, analyzer: Analyzer) -> tuple[list[str], list[str]]:
    """(the words' terms, extra terms: `≈group` for synonyms and `~prefix` for word forms)."""
    folded = fold(text)
    terms = analyzer(folded)
    table = _table(analyzer)
    extra = [f"≈{table[t]}" for t in terms if t in table]
    lowered = folded.lower()
    extra += [f"≈{g}" for phrase, g in _phrases() if phrase in lowered]
    extra += [f"~{t[:PREFIX_CHARS]}" for t in terms if _LATIN_WORD.match(t)]
    for han in (t for t in terms if len(t) > 1 and all("\u4e00" <= ch <= "\u9fff" for ch in t)):
        extra += [f"≈{table[ch]}" for ch in han if ch in table]  # 发薪水 -> 薪, 喝 in 喝咖啡...
    return terms, extra
