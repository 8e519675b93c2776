"""The default profile's tools/list stays small (target <= 5,000 cl100k tokens); prints the figure."""

from __future__ import annotations

from bench.tools_list_tokens import TARGET_DEFAULT, measure


def test_default_tools_list_is_within_the_token_budget(capsys: object) -> None:
    total, count, per_tool = measure("default")
    print(f"tools/list default profile: {count} tools, {total} tokens (cl100k_base)")
    assert total <= TARGET_DEFAULT, f"tools/list is {total} tokens; largest: {per_tool[:5]}"
