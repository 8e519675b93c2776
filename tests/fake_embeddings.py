"""A small OpenAI-compatible /v1/embeddings endpoint for tests, on 127.0.0.1 (never the internet).

Its "model" embeds meaning crudely but deterministically: every word of a small concept table
counts for its concept (synonyms share one: automobile = car; so do translations: 招聘 = hiring),
other words are ignored; the vector is the concept counts. So a paraphrase, or a translation, is
close although its words differ. Chinese words count wherever they occur (no spaces between them).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

MODEL = "fake-embed"
CONCEPTS = {
    "car": 0, "cars": 0, "automobile": 0, "automobiles": 0,
    "brake": 1, "brakes": 1,
    "repair": 2, "repaired": 2, "fix": 2, "fixed": 2, "mend": 2,
    "bicycle": 3, "bicycles": 3, "bike": 3,
    "chain": 4, "chains": 4,
    "tea": 5, "绿茶": 5,
    "advertising": 6, "marketing": 6, "广告": 6, "营销": 6,
    "money": 7, "budget": 7, "预算": 7, "经费": 7,
    "hiring": 8, "hire": 8, "recruiting": 8, "招聘": 8, "招募": 8,
    "engineers": 9, "developers": 9, "工程师": 9, "开发人员": 9,
}
DIM = 12
_CHINESE = {word: concept for word, concept in CONCEPTS.items() if not word.isascii()}


def embed(text: str) -> list[float]:
    vec = [0.0] * DIM
    for word in re.findall(r"[A-Za-z0-9_]+", text.lower()):
        if word in CONCEPTS:
            vec[CONCEPTS[word]] += 1.0
    for word, concept in _CHINESE.items():
        vec[concept] += text.count(word)
    vec[DIM - 1] += 0.01  # never the zero vector
    return vec


@dataclass
class FakeEmbeddings:
    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[int] = field(default_factory=list)  # statuses (429...) answered to the next requests, in order
    hold: threading.Event | None = None  # when given, requests are answered once it is set (at most 30 s)

    def settings_overrides(self) -> dict[str, Any]:
        return {"embedding_provider": "openai", "embedding_base_url": self.base_url, "embedding_model": MODEL}


def _handler_for(state: FakeEmbeddings) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            state.requests.append(body)
            if state.hold is not None:
                state.hold.wait(30)
            if state.refusals:
                self._send(state.refusals.pop(0), {"error": {"message": "slow down"}}, {"Retry-After-Ms": "20"})
                return
            if self.path.rstrip("/") != "/v1/embeddings":
                self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": embed(t)} for i, t in enumerate(texts)]
            self._send(200, {"object": "list", "data": data, "model": body.get("model", MODEL),
                             "usage": {"prompt_tokens": 1, "total_tokens": 1}})

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def fake_embeddings() -> Iterator[FakeEmbeddings]:
    state = FakeEmbeddings()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
