"""Index runs that tell the truth, through the real SDK client (in memory): a cancelled call leaves
the folder `partial` and the next run continues; wait=false runs a background job read to its end;
one job per folder; deleted files leave search results at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]


def many_files(folder: Path, count: int, size: int = 6000) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(size // 7)]
        path = folder / f"f{i:04d}.txt"
        path.write_text(f"file{i} marker{i}\n" + " ".join(words), encoding="utf-8")
        out.append(path)
    return out


async def call(client: Any, name: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(name, args, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


async def settled_status(client: Any, path: str) -> dict[str, Any]:
    """index_status of `path` once its last run is no longer running (the wait is bounded generously)."""
    with anyio.fail_after(300):
        while True:
            status = (await call(client, "index_status", {"path": path}))["path_status"]
            if status.get("job") and status["job"]["state"] != "running":
                return status  # type: ignore[no-any-return]
            await anyio.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
async def test_cancelled_run_is_partial_and_the_next_run_continues(settings: Any, workspace: Path, mode: str) -> None:
    many_files(workspace / "big", 300)
    async with connect(settings, mode) as client:
        with anyio.move_on_after(300):
            async with anyio.create_task_group() as tg:

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    tg.cancel_scope.cancel()  # the client gives up after the first file

                tg.start_soon(lambda: client.call_tool("index_path", {"path": "big"}, progress_callback=on_progress))
        status = await settled_status(client, "big")
        job = status["job"]
        assert job["state"] == "cancelled" and 0 < job["files_done"] < job["files_total"] == 300, job
        assert status["partial"] is True and status["fresh"] is False
        assert "index_path again" in status["note"]
        assert status["files"] == job["indexed"] and status["not_indexed"] == 300 - job["indexed"]
        totals = await call(client, "index_status", {})
        assert totals["jobs"][0]["id"] == job["id"] and totals["jobs"][0]["state"] == "cancelled"

        again = await call(client, "index_path", {"path": "big"})
        assert again["state"] == "done" and again["files_done"] == again["files_total"] == 300
        assert again["unchanged"] == job["indexed"] and again["indexed"] == 300 - job["indexed"]  # continues
        final = (await call(client, "index_status", {"path": "big"}))["path_status"]
        assert final["partial"] is False and final["fresh"] is True and final["not_indexed"] == 0
        assert final["files"] == 300 and "note" not in final or final.get("note") is None


@pytest.mark.parametrize("mode", MODES)
async def test_background_job_is_read_to_its_end(settings: Any, workspace: Path, mode: str) -> None:
    many_files(workspace / "big", 120)
    async with connect(settings, mode) as client:
        started = await call(client, "index_path", {"path": "big", "wait": False})
        assert started["state"] in ("running", "done") and started["job_id"]
        joined = await call(client, "index_path", {"path": "big", "wait": False})
        if joined["job_id"] == started["job_id"]:  # one job per folder: a second request reports it
            assert "already running" in joined["note"]
        status = await settled_status(client, "big")
        job = status["job"]
        assert job["id"] == started["job_id"] and job["state"] == "done"
        assert job["files_done"] == job["files_total"] == 120 and job["indexed"] == 120
        assert status["partial"] is False and status["fresh"] is True and status["files"] == 120
        found = await call(client, "search_documents", {"query": "marker77"})
        assert found["hits"][0]["path"] == "big/f0077.txt"


async def test_background_job_survives_the_client(settings: Any, workspace: Path) -> None:
    many_files(workspace / "big", 150)
    async with connect(settings) as client:
        started = await call(client, "index_path", {"path": "big", "wait": False})
    # The client is gone; a new connection to the same data dir sees the job's outcome.
    async with connect(settings) as client:
        totals = await call(client, "index_status", {})
        assert totals["jobs"][0]["id"] == started["job_id"]
        assert totals["jobs"][0]["state"] in ("running", "done", "interrupted")


async def test_waiting_caller_joins_a_running_job(settings: Any, workspace: Path) -> None:
    many_files(workspace / "big", 150)
    async with connect(settings) as client:
        started = await call(client, "index_path", {"path": "big", "wait": False})
        waited = await call(client, "index_path", {"path": "big"})
        assert waited["state"] == "done" and waited["files_done"] == 150
        if waited["job_id"] == started["job_id"]:
            assert waited["indexed"] == 150 and "Joined" in waited["note"]
        else:  # the background job had finished already: this run found everything unchanged
            assert waited["unchanged"] == 150


@pytest.mark.parametrize("mode", MODES)
async def test_deleted_file_leaves_results_at_once(settings: Any, workspace: Path, mode: str) -> None:
    docs = workspace / "docs"
    docs.mkdir()
    for name in ("a", "b", "c"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nthe zephyr report {name}\n", encoding="utf-8")
    async with connect(settings, mode) as client:
        await call(client, "index_path", {"path": "docs"})
        (docs / "b.md").unlink()
        found = await call(client, "search_documents", {"query": "zephyr"})
        assert sorted(h["path"] for h in found["hits"]) == ["docs/a.md", "docs/c.md"]
        grouped = await call(client, "search_documents", {"query": "zephyr", "group_by_document": True})
        assert len(grouped["documents"]) == 2
        status = await call(client, "index_status", {})
        assert status["files"] == 2  # its removal was not only hidden but done
        assert "null" not in str(found["hits"]) and all(None not in h.values() for h in found["hits"])
        assert all("page" not in h and "line" not in h for h in found["hits"])  # fields that do not apply are left out


async def test_client_timeout_leaves_an_honest_state(settings: Any, workspace: Path) -> None:
    """The OpenAI Agents SDK gives up after 5 s by default; here the client gives up after 0.2 s."""
    from mcp.shared.exceptions import MCPError

    many_files(workspace / "big", 300)
    async with connect(settings) as client:
        with pytest.raises(MCPError, match="timed out"):  # the SDK abandons the call and tells the server
            await client.call_tool("index_path", {"path": "big"}, read_timeout_seconds=0.2)
        status = (await call(client, "index_status", {"path": "big"}))["path_status"]
        if status.get("job"):  # the run had started: it stops at the next file and says so
            status = await settled_status(client, "big")
            assert status["job"]["state"] in ("cancelled", "done")
        if not status.get("job") or status["job"]["state"] == "cancelled":  # whatever ran, never "fresh"
            assert status.get("fresh") is not True and status["not_indexed"] == 300 - (status.get("files") or 0)
        again = await call(client, "index_path", {"path": "big"})
        assert again["state"] == "done" and again["indexed"] + again["unchanged"] == 300
        final = (await call(client, "index_status", {"path": "big"}))["path_status"]
        assert final["fresh"] is True and final["partial"] is False


async def test_stdio_server_that_stops_records_its_run_as_interrupted(tmp_path: Path, workspace: Path) -> None:
    """Over stdio a background run ends with the server process: the client goes away mid-run, and the
    next server says the run was interrupted, with what to do. (It was left "running", shown as interrupted
    with no error and 0 seconds, or recorded as failed with "RuntimeError: cannot schedule new futures after
    shutdown" when it met the interpreter's shut-down thread pools.)"""
    import os
    import sys

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    many_files(workspace / "big", 1500, size=3000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}  # PYTHONPATH: this checkout
    env.update(GENERALAGENT_DATA_DIR=str(tmp_path / "data"), GENERALAGENT_ROOTS=str(workspace))
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("generalagent-mcp")), args=["serve"],
                                   env=env)
    with (tmp_path / "stderr.txt").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            started = await call(client, "index_path", {"path": "big", "wait": False})
            with anyio.fail_after(120):
                while (await call(client, "index_status", {}))["jobs"][0]["files_done"] < 10:
                    await anyio.sleep(0.05)
        async with Client(stdio_client(params, errlog=err)) as client:
            status = (await call(client, "index_status", {"path": "big"}))["path_status"]
    job = status["job"]
    assert job["id"] == started["job_id"] and job["state"] == "interrupted", job
    assert "server stopped" in job["error"] and "index_path again" in job["error"]
    assert 0 < job["files_done"] < job["files_total"] == 1500 and job["seconds"] > 0
    assert status["partial"] is True and status["files"] == job["indexed"]
