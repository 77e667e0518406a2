"""Search-R1's ``/retrieve`` wire format: check a request body, encode an answer.

Request: ``{"queries": ["..."], "topk": 3, "return_scores": true}`` (``topk``
optional, ``return_scores`` false by default). Answer: ``{"result": [...]}``
with one list per query, best first, of ``{"document": {"id", "contents"},
"score": s}`` entries, or of bare ``{"id", "contents"}`` documents when
``return_scores`` is false.
"""

from __future__ import annotations

import orjson

from searchlab.retrieval.base import Hit

# Agents' queries are a few words; a 10k-character one is a runaway generation, and bounding
# it keeps every query far below Lucene's clause limit (so it is a 413, never a 500).
DEFAULT_MAX_QUERY_CHARS = 10_000


class RequestProblem(Exception):
    """A client error: HTTP status and a message naming the problem."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def parse_request(
    body: bytes, max_queries: int, max_topk: int, default_topk: int, max_query_chars: int = DEFAULT_MAX_QUERY_CHARS
) -> tuple[list[str], int, bool]:
    """Check a ``/retrieve`` body; return ``(queries, topk, return_scores)`` or raise :class:`RequestProblem`.

    400: not JSON. 422: wrong shape or types, empty ``queries``, ``topk`` outside
    ``1..max_topk``. 413: more than ``max_queries`` queries or a query over
    ``max_query_chars`` characters.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise RequestProblem(400, f"request body is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise RequestProblem(422, f"request body must be a JSON object with 'queries', got {type(data).__name__}")
    if "queries" not in data:
        raise RequestProblem(422, "'queries' is required: a list of query strings")
    queries = data["queries"]
    if not isinstance(queries, list):
        raise RequestProblem(422, f"'queries' must be a list of strings, got {type(queries).__name__}")
    if not queries:
        raise RequestProblem(422, "'queries' must not be empty")
    if len(queries) > max_queries:
        raise RequestProblem(413, f"too many queries: {len(queries)} in one request, at most {max_queries}")
    for i, query in enumerate(queries):
        if not isinstance(query, str):
            raise RequestProblem(422, f"queries[{i}] must be a string, got {type(query).__name__}")
        if len(query) > max_query_chars:
            raise RequestProblem(413, f"queries[{i}] has {len(query)} characters, at most {max_query_chars}")
    topk = data.get("topk")
    if topk is None:
        topk = default_topk
    elif isinstance(topk, bool) or not isinstance(topk, int):
        raise RequestProblem(422, f"'topk' must be an integer, got {topk!r}")
    elif not 1 <= topk <= max_topk:
        raise RequestProblem(422, f"'topk' must be between 1 and {max_topk}, got {topk}")
    return_scores = data.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise RequestProblem(422, f"'return_scores' must be true or false, got {return_scores!r}")
    return queries, topk, return_scores


def encode_documents(lists: list[list[tuple[bytes, float]]], return_scores: bool) -> bytes:
    """The answer body for hits given as ``(document JSON bytes, score)``: the documents are copied in as is."""
    if return_scores:
        encoded = [
            b",".join([b'{"document":' + doc + b',"score":' + orjson.dumps(score) + b"}" for doc, score in hits])
            for hits in lists
        ]
    else:
        encoded = [b",".join([doc for doc, _ in hits]) for hits in lists]
    return b'{"result":[[' + b"],[".join(encoded) + b"]]}"


def encode_hits(results: list[list[Hit]], return_scores: bool) -> bytes:
    """The answer body for :class:`~searchlab.retrieval.base.Hit` lists."""
    if return_scores:
        payload = [[{"document": {"id": h.id, "contents": h.contents}, "score": h.score} for h in hits] for hits in results]
    else:
        payload = [[{"id": h.id, "contents": h.contents} for h in hits] for hits in results]
    return orjson.dumps({"result": payload})
