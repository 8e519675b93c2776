"""Benchmark of context management: optimize_context, compact_context (stub LLM), token counting.

Run: .venv/bin/python -m bench.context_bench   (prints a table; offline, no LLM endpoint needed)

`make_transcript` also serves the tests: a realistic agent transcript (OpenAI or Anthropic format)
with tool chains (JSON and plain outputs), todo_write calls and user constraint sentences.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any

from bench._context_cases import FILES, tool_output

CONSTRAINTS = [
    "Always use pytest for the tests.",
    "Never push to the main branch directly.",
    "Please use type hints everywhere.",
    "Do not add new dependencies without asking.",
    "Keep functions under 30 lines.",
    "请不要修改数据库的表结构。",
    "I prefer tabs over spaces in the Makefile.",
    "Make sure the API stays backwards compatible.",
]
FILLER_USER = [
    "Now look at the parser module.",
    "What does the error in the log say?",
    "Good, continue with the next step.",
    "Can you check the config loader too?",
    "Run the tests again.",
]
def make_events(
    n_messages: int, seed: int = 7, todo_every: int = 40, constraints: list[str] | None = None
) -> list[dict[str, Any]]:
    """Abstract turns totalling about `n_messages` messages (OpenAI layout)."""
    rng = random.Random(seed)
    wanted = list(CONSTRAINTS if constraints is None else constraints)
    out: list[dict[str, Any]] = [
        {
            "kind": "user",
            "text": "Refactor the parser in src/app/parser.py and keep the tests green. "
            + (wanted[:1] or [""])[0],
        }
    ]
    count, i, todo_round = 1, 0, 0
    while count < n_messages:
        i += 1
        roll = rng.random()
        if i % todo_every == 0:
            todo_round += 1
            items = [
                {
                    "content": f"Task {k} of round {todo_round}: update {FILES[k % len(FILES)]}",
                    "status": "completed"
                    if k < todo_round % 4
                    else ("in_progress" if k == todo_round % 4 else "pending"),
                }
                for k in range(5)
            ]
            out.append({"kind": "todo", "items": items})
            count += 2
        elif roll < 0.12:
            text = rng.choice(FILLER_USER)
            if wanted and rng.random() < 0.5:
                text += " " + wanted.pop(rng.randrange(len(wanted)))
            out.append({"kind": "user", "text": text})
            count += 1
        elif roll < 0.25:
            out.append(
                {
                    "kind": "assistant",
                    "text": f"I checked {rng.choice(FILES)}; step {i} is done and the next step is clear.",
                }
            )
            count += 1
        else:
            n = 1 if rng.random() < 0.8 else 2
            out.append(
                {
                    "kind": "chain",
                    "calls": [
                        (
                            "search_files" if rng.random() < 0.5 else "read_file",
                            {"path": rng.choice(FILES), "i": i},
                        )
                        for _ in range(n)
                    ],
                    "results": [tool_output(rng, i) for _ in range(n)],
                }
            )
            count += 1 + n
    for text in wanted:  # constraints not placed yet
        out.insert(len(out) // 2, {"kind": "user", "text": "One more rule. " + text})
    return out


def to_openai(events: list[dict[str, Any]], system: str = "You are a coding agent.") -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for k, ev in enumerate(events):
        if ev["kind"] in ("user", "assistant"):
            msgs.append({"role": ev["kind"], "content": ev["text"]})
        elif ev["kind"] == "todo":
            call_id = f"call_todo_{k}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "todo_write",
                                "arguments": json.dumps({"todos": ev["items"]}),
                            },
                        }
                    ],
                }
            )
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps({"ok": True})})
        else:
            ids = [f"call_{k}_{j}" for j in range(len(ev["calls"]))]
            calls = [
                {"id": c, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for c, (name, args) in zip(ids, ev["calls"], strict=True)
            ]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            msgs.extend(
                {"role": "tool", "tool_call_id": c, "content": r}
                for c, r in zip(ids, ev["results"], strict=True)
            )
    return msgs


def to_anthropic(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for k, ev in enumerate(events):
        if ev["kind"] in ("user", "assistant"):
            msgs.append({"role": ev["kind"], "content": ev["text"]})
        elif ev["kind"] == "todo":
            call_id = f"toolu_todo_{k}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call_id,
                            "name": "todo_write",
                            "input": {"todos": ev["items"]},
                        }
                    ],
                }
            )
            msgs.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}],
                }
            )
        else:
            ids = [f"toolu_{k}_{j}" for j in range(len(ev["calls"]))]
            msgs.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": c, "name": name, "input": args}
                        for c, (name, args) in zip(ids, ev["calls"], strict=True)
                    ],
                }
            )
            msgs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": c, "content": r}
                        for c, r in zip(ids, ev["results"], strict=True)
                    ],
                }
            )
    return msgs


def make_transcript(n_messages: int, fmt: str = "openai", seed: int = 7) -> list[dict[str, Any]]:
    events = make_events(n_messages, seed)
    return to_openai(events) if fmt == "openai" else to_anthropic(events)


def open_todos_of(events: list[dict[str, Any]]) -> list[str]:
    last = [ev for ev in events if ev["kind"] == "todo"][-1:]
    return [item["content"] for item in (last[0]["items"] if last else []) if item["status"] != "completed"]


# ---------------------------------------------------------------- the benchmark


def _stub_summarizer(messages: list[dict[str, Any]], max_tokens: int) -> tuple[str, int]:
    return "## Primary request and intent\nRefactor the parser.\n## Next step\nRun the tests.", 100


def _timed(fn: Any, repeat: int, clock: Any = time.perf_counter) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = clock()
        result = fn()
        times.append((clock() - start) * 1000)
    return statistics.median(times), result


def main() -> None:
    from context.compact import CompactOptions, compact
    from context.messages import parse, render
    from context.optimize import Budget, _memo, optimize
    from context.tokens import _counts, counter_for

    counter = counter_for("gpt-4")
    window = 128_000
    rows = []
    for n in (200, 2000, 10_000):
        msgs = make_transcript(n)

        def run_optimize(msgs: list[dict[str, Any]] = msgs) -> Any:
            t = parse(msgs)
            out, report = optimize(t.messages, counter, Budget(window))
            render(t, out)
            return report

        def run_compact(msgs: list[dict[str, Any]] = msgs) -> Any:
            t = parse(msgs)
            out, report, _ = compact(
                t.messages, counter, CompactOptions("compact", window, force=True), _stub_summarizer
            )
            render(t, out)
            return report

        _counts.clear()
        _memo.clear()
        cold, report = _timed(run_optimize, 1)
        warm, report = _timed(run_optimize, 5)
        warm_cpu = _timed(run_optimize, 5, time.process_time)[0]  # CPU time: steadier on a loaded machine
        _counts.clear()
        _memo.clear()
        ccold = _timed(run_compact, 1)[0]
        cwarm, creport = _timed(run_compact, 3)
        rows.append(
            (
                len(msgs),
                report.tokens_before,
                cold,
                warm,
                warm_cpu,
                1 - report.tokens_after / report.tokens_before,
                ccold,
                cwarm,
                1 - creport.tokens_after / creport.tokens_before,
            )
        )
    print(
        "| messages | tokens | optimize cold ms | optimize warm ms | optimize warm CPU ms | optimize reduction | compact cold ms | compact warm ms | compact reduction |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]} | {r[2]:.0f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.0%} | {r[6]:.0f} | {r[7]:.1f} | {r[8]:.0%} |"
        )
    text = "\n".join(
        m.get("content") or "" for m in make_transcript(2000) if isinstance(m.get("content"), str)
    )
    _counts.clear()
    start = time.perf_counter()
    tokens = len(counter.encoding.encode_ordinary(text))
    dt = time.perf_counter() - start
    print()
    print("| token counting | value |")
    print("|---|---:|")
    print(f"| text size | {len(text) / 1e6:.1f} MB, {tokens} tokens |")
    print(f"| throughput (encode_ordinary, cl100k_base) | {tokens / dt / 1e6:.2f} M tokens/s |")
    small = [f"message number {i} with some words" for i in range(20_000)]
    start = time.perf_counter()
    for s in small:
        counter.count(s)
    dt = time.perf_counter() - start
    print(f"| short texts counted per second (cached path) | {len(small) / dt:,.0f} |")


# ---------------------------------------------------------------- fidelity (issue 12)

FIDELITY_SIZES = (200, 500, 2000)
FIDELITY_SEEDS = (1, 2, 3)
OPTIMIZE_WINDOWS = (2_000, 4_000, 8_000, 32_000, 128_000)
COMPACT_WINDOW = 32_000


def _summarizer_over(base_url: str) -> Any:
    """A Summarizer over an OpenAI-compatible endpoint (the real client, as the tool does)."""
    from context.llm import LLMConfig, chat

    config = LLMConfig(base_url, "fake-model", "bench", 10.0, 0)

    def summarize(chat_messages: list[dict[str, Any]], max_tokens: int) -> tuple[str, int]:
        reply = chat(config, chat_messages, max_tokens=max_tokens, temperature=0.2)
        return reply.content or "", reply.total_tokens

    return summarize


def _todos_of(msgs: Any) -> Any:
    from context import carryover

    return carryover.todos_from_transcript(msgs)


def run_case(case: Any, tool: str, window: int, summarizer: Any, counter: Any) -> dict[str, Any]:
    """One optimize or compact run over a case, scored by the independent checks."""
    from context.messages import parse, render
    from tests.context_checks import all_text, chat_api_problems

    start = time.perf_counter()
    transcript = parse(case.messages, case.system)
    if tool == "optimize":
        out, report = _optimize(transcript.messages, counter, window)
    else:
        out, report = _compact(transcript.messages, counter, window, summarizer)
    rendered, system_out = render(transcript, out)
    ms = (time.perf_counter() - start) * 1000
    text = all_text(rendered, system_out)
    before = report.tokens_before
    return {
        "kept": sum(c in text for c in case.constraints) / max(len(case.constraints), 1),
        "todos": sum(t in text for t in case.open_todos) / max(len(case.open_todos), 1),
        "cut": 1 - report.tokens_after / max(before, 1),
        "valid": not chat_api_problems(rendered, system_out, case.fmt),
        "ms": ms,
        "dropped": _dropped(report),
    }


def _dropped(report: Any) -> float:
    """Share of the user's sentences the tool reports as dropped (nan: it does not report them)."""
    words = getattr(report, "words", None)
    return words.dropped / max(words.sentences, 1) if words is not None else float("nan")


def _optimize(msgs: Any, counter: Any, window: int) -> Any:
    import inspect

    from context.optimize import Budget, optimize

    if "todos" in inspect.signature(optimize).parameters:
        todos = _todos_of(msgs)
        return optimize(msgs, counter, Budget(window), todos=todos)
    return optimize(msgs, counter, Budget(window))


def _compact(msgs: Any, counter: Any, window: int, summarizer: Any) -> Any:
    from context.compact import CompactOptions, Prior, compact

    out, report, _ = compact(msgs, counter, CompactOptions("compact", window, force=True), summarizer, Prior())
    return out, report


def user_words_tokens(case: Any, counter: Any) -> int:
    return sum(counter.count(t) for t in case.user_sentences)


def fidelity_rows(summarizer: Any) -> list[tuple[Any, ...]]:
    from bench._context_cases import make_case
    from context.tokens import counter_for

    counter = counter_for("gpt-4o")
    rows = []
    for n in FIDELITY_SIZES:
        for fmt in ("openai", "anthropic"):
            cases = [make_case(n, fmt, seed) for seed in FIDELITY_SEEDS]
            words = statistics.mean(user_words_tokens(c, counter) for c in cases)
            runs: list[tuple[str, int, Any]] = [("optimize", w, None) for w in OPTIMIZE_WINDOWS]
            runs += [("compact", COMPACT_WINDOW, None), ("compact", COMPACT_WINDOW, summarizer)]
            for tool, window, llm in runs:
                scores = [run_case(c, tool, window, llm, counter) for c in cases]
                label = "-" if tool == "optimize" else ("stub" if llm else "none")
                rows.append((n, fmt, tool, label, window, round(words), scores))
    return rows


def print_fidelity() -> None:
    from tests.fake_llm import Reply, completion, start_fake_llm

    stub, stop = start_fake_llm()
    stub.set_default(Reply(200, completion("## Summary\nThe work went on.")))  # omits everything
    try:
        rows = fidelity_rows(_summarizer_over(stub.base_url))
    finally:
        stop()
    print()
    print("Fidelity (mean of 3 seeds; 12 constraint sentences each, about 1/3 Chinese; user words = tokens of")
    print("what the user typed, pasted blobs excluded; optimize target = 0.6 x window)")
    print("| messages | format | tool | LLM | window | user words | constraints kept | user sentences dropped | open todos kept | token cut | API-valid | ms |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for n, fmt, tool, llm, window, words, scores in rows:
        mean = {k: statistics.mean(float(s[k]) for s in scores) for k in ("kept", "todos", "cut", "ms", "dropped")}
        valid = sum(s["valid"] for s in scores)
        dropped = "n/a" if mean["dropped"] != mean["dropped"] else f"{mean['dropped']:.0%}"
        print(
            f"| {n} | {fmt} | {tool} | {llm} | {window // 1000}k | {words} | {mean['kept']:.0%} | {dropped} | "
            f"{mean['todos']:.0%} | {mean['cut']:.0%} | {valid}/{len(scores)} | {mean['ms']:.0f} |"
        )


# ---------------------------------------------------------------- recall (issue 12)


def print_recall() -> None:
    from bench._recall_eval import evaluate

    print()
    print("Memory recall (tests/data/memory_paraphrases*.json: paraphrased questions, EN + ZH)")
    print("| set | method | questions | Hit@1 | Hit@3 | ms per question |")
    print("|---|---|---:|---:|---:|---:|")
    for set_name in ("paraphrases", "held-out"):
        for name, n, hit1, hit3, ms in evaluate(set_name):
            print(f"| {set_name} | {name} | {n} | {hit1:.2f} | {hit3:.2f} | {ms:.1f} |")


if __name__ == "__main__":
    import sys

    parts = set(sys.argv[1:]) or {"speed", "fidelity", "recall"}
    if "speed" in parts:
        main()
    if "fidelity" in parts:
        print_fidelity()
    if "recall" in parts:
        print_recall()
