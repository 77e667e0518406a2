"""The Search-R1 HTTP API: every 4xx case, and the real client against a real uvicorn server."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from searchlab.retrieval.client import HttpRetriever, RetrieverUnavailableError
from searchlab.retrieval.base import RetrieverError
from searchlab.retrieval.server import create_app
from tests.conftest import BIN, make_project

from .conftest import contents

pytestmark = pytest.mark.slow  # a real JVM and index (built once per session)


@pytest.fixture(scope="module")
def app(bm25):
    return create_app(bm25, max_queries=4, max_topk=5, default_topk=2, max_body_bytes=2000, max_query_chars=100)


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def run_server(app):
    """Serve ``app`` with a real uvicorn server on 127.0.0.1 in a thread; yield its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def server_url(app):
    yield from run_server(app)


class Picky:
    """A Retriever (BM25 underneath) that refuses queries containing "forbidden" and has no raw-document path."""

    def __init__(self, bm25):
        self.bm25 = bm25

    def search(self, queries, k):
        if any("forbidden" in q for q in queries):
            raise RetrieverError("forbidden query")
        return self.bm25.search(queries, k)

    def close(self):
        pass


def test_retrieve_with_scores_is_search_r1_format(client, bm25):
    response = client.post("/retrieve", json={"queries": ["capital of Japan", "waggle dance"], "topk": 2, "return_scores": True})
    assert response.status_code == 200
    result = response.json()["result"]
    assert len(result) == 2 and all(len(r) <= 2 for r in result)
    first = result[0][0]
    assert set(first) == {"document", "score"} and set(first["document"]) == {"id", "contents"}
    assert first["document"] == {"id": "tokyo", "contents": contents("tokyo")}
    expected = bm25.search(["capital of Japan", "waggle dance"], 2)
    assert [[(e["document"]["id"], e["score"]) for e in r] for r in result] == [[(h.id, h.score) for h in hits] for hits in expected]


def test_retrieve_without_scores_lists_documents(client):
    # Search-R1's defaults: return_scores false, topk from the server (2 here)
    response = client.post("/retrieve", json={"queries": ["Guido van Rossum"]})
    assert response.status_code == 200
    [[doc, *_]] = response.json()["result"]
    assert doc == {"id": "python", "contents": contents("python")}


def test_health(client):
    assert client.get("/health").json() == {"status": "ok"}


@pytest.mark.parametrize("body, status, detail", [
    (b"{not json", 400, "not valid JSON"),
    (b"", 400, "not valid JSON"),
    (b"[1, 2]", 422, "must be a JSON object"),
    (b'{"topk": 3}', 422, "'queries' is required"),
    (b'{"queries": "one string"}', 422, "'queries' must be a list of strings, got str"),
    (b'{"queries": []}', 422, "'queries' must not be empty"),
    (b'{"queries": ["ok", 5]}', 422, "queries[1] must be a string, got int"),
    (b'{"queries": ["ok", null]}', 422, "queries[1] must be a string, got NoneType"),
    (b'{"queries": ["ok"], "topk": "3"}', 422, "'topk' must be an integer"),
    (b'{"queries": ["ok"], "topk": 2.5}', 422, "'topk' must be an integer"),
    (b'{"queries": ["ok"], "topk": true}', 422, "'topk' must be an integer"),
    (b'{"queries": ["ok"], "topk": 0}', 422, "'topk' must be between 1 and 5, got 0"),
    (b'{"queries": ["ok"], "topk": 6}', 422, "'topk' must be between 1 and 5, got 6"),
    (b'{"queries": ["ok"], "return_scores": "yes"}', 422, "'return_scores' must be true or false"),
    (b'{"queries": ["a", "b", "c", "d", "e"]}', 413, "too many queries: 5 in one request, at most 4"),
    (b'{"queries": ["' + b"x" * 3000 + b'"]}', 413, "over the limit of 2000 bytes"),
    (b'{"queries": ["ok", "' + b"y" * 150 + b'"]}', 413, "queries[1] has 150 characters, at most 100"),
])
def test_bad_requests_get_a_4xx_that_names_the_problem(client, body, status, detail):
    response = client.post("/retrieve", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert detail in response.json()["detail"]


def test_chunked_oversized_body_is_refused(server_url):
    def chunks():
        for _ in range(10):
            yield b"x" * 500

    response = httpx.post(server_url + "/retrieve", content=chunks())  # no content-length: streamed
    assert response.status_code == 413 and "over the limit" in response.json()["detail"]


def test_wrong_method_and_path_are_json_errors(client):
    assert client.get("/retrieve").status_code == 405
    assert client.post("/nope", json={}).status_code == 404


def test_http_client_matches_in_process_search(server_url, bm25):
    queries = ["capital of Japan", "coral reef", "nothing matches zzqqxx", "Nobel radioactivity", "sand desert", "chess"]
    with HttpRetriever(server_url, batch_size=4) as remote:  # 6 queries: two requests under max_queries=4
        assert remote.search(queries, 3) == bm25.search(queries, 3)
        assert remote.health() == {"status": "ok"}
    with HttpRetriever(server_url + "/retrieve/") as remote:  # Search-R1 style URL
        assert remote.search(["chess"], 1) == bm25.search(["chess"], 1)


QUERIES = ["capital of Japan", "coral reef", "Nobel radioactivity", "sand desert", "chess", "waggle dance",
           "Guido van Rossum", "symphonies", "Amazon river", "volcano Tanzania", "penicillin", "glucose"]


def test_concurrent_clients_each_get_their_own_answers(server_url, bm25):
    calls = [(QUERIES[i % 12 : i % 12 + 1 + i % 3], 1 + i % 3) for i in range(24)]  # mixed sizes and topk
    with HttpRetriever(server_url) as remote, ThreadPoolExecutor(12) as pool:
        got = list(pool.map(lambda c: remote.search(*c), calls))
    assert got == [bm25.search(*c) for c in calls]


def test_hit_based_retrievers_and_failures_stay_per_request(bm25):
    # Picky has no search_documents, so the server encodes Hits; a failing query fails its own request only
    app = create_app(Picky(bm25), max_queries=8, max_topk=5)
    for url in run_server(app):
        bodies = [{"queries": [q], "topk": 2, "return_scores": i % 2 == 0} for i, q in enumerate(QUERIES)]
        bodies[5] = {"queries": ["a forbidden query", "chess"], "topk": 2}
        with httpx.Client() as http, ThreadPoolExecutor(12) as pool:
            responses = list(pool.map(lambda b: http.post(url + "/retrieve", json=b), bodies))
        for i, (body, response) in enumerate(zip(bodies, responses)):
            if i == 5:
                assert response.status_code == 500
                assert response.json() == {"detail": "retrieval failed: RetrieverError: forbidden query"}
                continue
            assert response.status_code == 200
            [hits] = bm25.search(body["queries"], 2)
            docs = [{"id": h.id, "contents": h.contents} for h in hits]
            expected = [{"document": d, "score": h.score} for d, h in zip(docs, hits)] if body["return_scores"] else docs
            assert response.json() == {"result": [expected]}


def test_http_client_reports_server_errors(server_url):
    with HttpRetriever(server_url) as remote:
        with pytest.raises(RetrieverError, match="answered 422: 'topk' must be between 1 and 5, got 9"):
            remote.search(["x"], 9)


def test_http_client_unreachable_server_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    with HttpRetriever(f"http://127.0.0.1:{port}", timeout=2) as remote:
        with pytest.raises(RetrieverUnavailableError, match=f"cannot reach the retrieval server at http://127.0.0.1:{port}/retrieve"):
            remote.search(["x"], 3)


WIDE = "the largest and highest in Africa, the world and the capital"  # words of more than four passages


def test_serve_retriever_answers_a_request_without_topk_with_retriever_topk(index_dir, tmp_path):
    # The real command, as a user starts it: the project's data/index is the session's built index.
    project = make_project(tmp_path / "project")
    (project / "data").mkdir()
    (project / "data" / "index").symlink_to(index_dir)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(BIN / "searchlab"), "serve-retriever", "--params", "params/smoke.yaml",
                             "--set", "retriever.topk=2", "--port", str(port)],
                            cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.TransportError:
                assert time.time() < deadline, "serve-retriever did not start"
                time.sleep(0.2)
        untold = httpx.post(url + "/retrieve", json={"queries": [WIDE]}).json()
        assert len(untold["result"][0]) == 2  # retriever.topk, not the server's built-in 3
        told = httpx.post(url + "/retrieve", json={"queries": [WIDE], "topk": 4}).json()
        assert len(told["result"][0]) == 4
    finally:
        proc.terminate()
        proc.wait(timeout=30)
