"""A :class:`~searchlab.retrieval.base.Retriever` that asks a Search-R1 ``/retrieve`` server.

Works with searchlab's own server and with Search-R1's (or any compatible one):
hits are read from ``{"document": {"id", "contents"}, "score"}`` entries; a
server whose documents carry ``title``/``text`` instead of ``contents`` gets
them joined as ``"title"\\ntext``.
"""

from __future__ import annotations

import httpx
import orjson

from searchlab.retrieval.base import Hit, RetrieverBase, RetrieverError, check_request


class RetrieverUnavailableError(RetrieverError, ConnectionError):
    """The server could not be reached (not started, wrong URL, network down)."""


class HttpRetriever(RetrieverBase):
    """Batch search through HTTP; one keep-alive connection pool, safe to share between threads.

    ``url`` is the server's base URL (``http://127.0.0.1:8000``) or its
    ``/retrieve`` endpoint (Search-R1 configs give the latter). Batches larger
    than ``batch_size`` are sent as several requests, so a server's
    ``max_queries`` limit never rejects a large caller batch.
    """

    def __init__(self, url: str, timeout: float = 60.0, batch_size: int = 256):
        url = url.rstrip("/")
        self.endpoint = url if url.endswith("/retrieve") else url + "/retrieve"
        self.batch_size = batch_size
        self._client = httpx.Client(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=64))

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Up to ``k`` hits per query, best first, as the server ranked them."""
        check_request(queries, k)
        results: list[list[Hit]] = []
        for start in range(0, len(queries), self.batch_size):
            results.extend(self._request(list(queries[start : start + self.batch_size]), k))
        return results

    def _request(self, queries: list[str], k: int) -> list[list[Hit]]:
        body = orjson.dumps({"queries": queries, "topk": k, "return_scores": True})
        try:
            response = self._client.post(self.endpoint, content=body, headers={"content-type": "application/json"})
        except httpx.TransportError as err:
            raise RetrieverUnavailableError(
                f"cannot reach the retrieval server at {self.endpoint} ({type(err).__name__}: {err}); "
                "start it with `searchlab serve-retriever` or fix retriever.url"
            ) from err
        if response.status_code != 200:
            raise RetrieverError(f"retrieval server at {self.endpoint} answered {response.status_code}: {_detail(response)}")
        try:
            lists = orjson.loads(response.content)["result"]
            if len(lists) != len(queries):
                raise ValueError(f"{len(lists)} result lists for {len(queries)} queries")
            return [[_hit(entry) for entry in hits] for hits in lists]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise RetrieverError(f"retrieval server at {self.endpoint} sent an answer that is not Search-R1's format: {err}") from err

    def health(self) -> dict:
        """The server's ``/health`` answer (raises :class:`RetrieverUnavailableError` if it is down)."""
        url = self.endpoint.removesuffix("/retrieve") + "/health"
        try:
            return self._client.get(url).raise_for_status().json()
        except httpx.HTTPError as err:
            raise RetrieverUnavailableError(f"retrieval server health check at {url} failed: {err}") from err

    def close(self) -> None:
        self._client.close()


def _hit(entry: dict) -> Hit:
    document = entry["document"]
    contents = document.get("contents")
    if contents is None:
        contents = f'"{document.get("title", "")}"\n{document.get("text", "")}'
    return Hit(str(document.get("id", "")), contents, float(entry["score"]))


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", response.text))
    except ValueError:
        return response.text[:500]
