"""Retrieval benchmark (run by hand): BM25 throughput vs bm25s, time to first query, HTTP server overhead.

    python bench/retrieval.py                 # ~50k passages of the synthetic world, 5,000 queries
    python bench/retrieval.py --entities 30000 --keep /tmp/bench-index

Measures, on one corpus and one query set, in one run:

1. batch queries/s of searchlab's ``BM25Retriever`` vs the ``bm25s`` package at
   top-k 3 and 10, both warm (after warm-up passes), both with 2 threads, both
   returning (id, contents, score) per hit; target ratio >= 1.5; and vs Anserini's
   own ``SearchCollection`` (Java, same index, same k1/b, threads and k, writing a
   TREC run file): its warm rate is the marginal one between a run of the queries
   once and a run of them ``--anserini-passes`` times, which leaves out the JVM's
   start, opening the index and the first pass's JIT warm-up; target ratio >= 0.8;
2. seconds from process start to the first answered query in a fresh
   interpreter that imports ``searchlab.retrieval``, opens the index and asks
   one query; target <= 2 s;
3. p50/p99 latency of batch-32 requests from 32 concurrent clients through the
   HTTP server (a separate process) vs the same 32 concurrent callers
   in-process; target: the server adds <= 25%. The server is measured with a
   minimal keep-alive client (``http.client``, one connection per client
   thread, response read but not parsed), so the number is the server's; the
   same load through our ``HttpRetriever`` (httpx, parsing every hit) is
   reported too: on this machine those clients share the CPUs with the server.

Output: stdout: progress lines, then one table (measure, searchlab, reference, ratio, target, met). The
corpus and index go to a temporary folder, deleted at the end, or to ``--keep DIR``, kept (its index
reused next time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from searchlab.params import IndexParams, RetrieverParams, WorldParams  # noqa: E402
from searchlab.retrieval.indexing import build_index  # noqa: E402


# ---------------------------------------------------------------- corpus and queries
def make_corpus(workdir: Path, entities: int, seed: int) -> tuple[Path, list[str]]:
    """The synthetic world's corpus (>= 50k passages) and one query per sampled fact, as an agent would ask."""
    try:
        from searchlab.corpus.world import generate_world
    except ImportError:
        return _fallback_corpus(workdir, entities * 4, seed)
    generate_world(WorldParams(seed=seed, entities=entities), workdir)
    rng = random.Random(seed)
    queries = []
    with open(workdir / "kb.jsonl", encoding="utf-8") as f:
        for line in f:
            entity = json.loads(line)
            for fact in entity["facts"]:
                words = fact["predicate"].replace("_", " ")
                queries.append(rng.choice([f"{entity['name']} {words}", f"what is the {words} of {entity['name']}",
                                           entity["name"], f"{fact['text']} {words}"]))
    return workdir / "corpus.jsonl", queries


def _fallback_corpus(workdir: Path, passages: int, seed: int) -> tuple[Path, list[str]]:
    # Zipf-distributed pseudo-words: only used if the world generator is unavailable.
    import numpy as np

    rng = np.random.default_rng(seed)
    syllables = ["ka", "ro", "mi", "sa", "te", "lu", "vo", "ne", "di", "pa", "gor", "len", "tis", "bar", "quo", "fen"]
    vocab = sorted({"".join(rng.choice(syllables, size=rng.integers(2, 5))) for _ in range(30000)})
    rng.shuffle(vocab)
    cdf = np.cumsum(1 / np.arange(1, len(vocab) + 1) ** 1.07)
    cdf /= cdf[-1]
    docs = []
    with open(workdir / "corpus.jsonl", "w") as f:
        for i in range(passages):
            words = [vocab[j] for j in np.searchsorted(cdf, rng.random(rng.integers(20, 60)))]
            docs.append(words)
            f.write(json.dumps({"id": f"p{i}", "contents": f'"{words[0].title()}"\n' + " ".join(words)}) + "\n")
    pick = random.Random(seed)
    return workdir / "corpus.jsonl", [" ".join(pick.sample(pick.choice(docs), 4)) for _ in range(20000)]


# ---------------------------------------------------------------- measurements
def throughput(search, queries: list[str], k: int, warmup: int, repeats: int) -> float:
    """Median queries/s of ``search(queries, k)`` over ``repeats`` timed passes after ``warmup`` passes."""
    for _ in range(warmup):
        search(queries, k)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        search(queries, k)
        rates.append(len(queries) / (time.perf_counter() - start))
    return statistics.median(rates)


class Bm25sBaseline:
    """The ``bm25s`` package over the same passages, answering with (id, contents, score) like our retriever."""

    def __init__(self, corpus: Path, k1: float, b: float, threads: int):
        import bm25s

        self.bm25s, self.threads = bm25s, threads
        records = [json.loads(line) for line in open(corpus, encoding="utf-8")]
        self.ids = [r["id"] for r in records]
        self.contents = [r["contents"] for r in records]
        self.model = bm25s.BM25(k1=k1, b=b)
        self.model.index(bm25s.tokenize(self.contents, stopwords="en", show_progress=False), show_progress=False)

    def search(self, queries: list[str], k: int):
        tokens = self.bm25s.tokenize(queries, stopwords="en", show_progress=False)
        docs, scores = self.model.retrieve(tokens, k=k, n_threads=self.threads, show_progress=False)
        return [[(self.ids[d], self.contents[d], float(s)) for d, s in zip(row, row_scores) if s > 0]
                for row, row_scores in zip(docs.tolist(), scores.tolist())]


def anserini_rate(lucene_dir: Path, queries: list[str], k: int, threads: int, k1: float, b: float,
                  workdir: Path, passes: int) -> float:
    """Warm queries/s of Anserini's ``SearchCollection`` over ``queries``: the marginal rate between one pass and
    ``passes`` passes of them (each a separate ``java`` run on the same index)."""
    from searchlab.retrieval.jvm import anserini_jar, java_home

    def timed(times: int) -> float:
        topics = workdir / f"topics-{times}.tsv"
        topics.write_text("".join(f"{n}-{i}\t{q}\n" for n in range(times) for i, q in enumerate(queries)))
        command = [str(Path(java_home()) / "bin" / "java"), "--sun-misc-unsafe-memory-access=allow", "-cp",
                   str(anserini_jar()), "io.anserini.search.SearchCollection", "-index", str(lucene_dir),
                   "-topics", str(topics), "-topicReader", "TsvString", "-output", str(workdir / "run.txt"),
                   "-bm25", "-bm25.k1", str(k1), "-bm25.b", str(b), "-hits", str(k), "-threads", str(threads)]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start

    once, many = timed(1), timed(passes)
    return (passes - 1) * len(queries) / (many - once)


FIRST_QUERY = """
import time
from pathlib import Path
from searchlab.params import RetrieverParams
from searchlab.retrieval import open_retriever
r = open_retriever(RetrieverParams(), Path({index!r}))
hits = r.search([{query!r}], 3)
print("answered", len(hits[0]), flush=True)
"""


def time_to_first_query(index_dir: Path, query: str, runs: int) -> list[float]:
    """Wall seconds from spawning a fresh interpreter to its printed answer, per run."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", FIRST_QUERY.format(index=str(index_dir), query=query)],
                                 stdout=subprocess.PIPE, text=True, cwd=REPO)
        line = child.stdout.readline()
        elapsed = time.perf_counter() - start
        child.wait()
        if not line.startswith("answered"):
            raise RuntimeError("first-query child failed")
        times.append(elapsed)
    return times


def concurrent_latencies(call, batches: list[list[str]], clients: int, per_client: int) -> list[float]:
    """Latency (s) of every call when ``clients`` threads each make ``per_client`` calls back to back."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(index: int) -> None:
        mine = []
        barrier.wait()
        for j in range(per_client):
            batch = batches[(index * per_client + j) % len(batches)]
            start = time.perf_counter()
            call(batch)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def raw_poster(url: str):
    """A minimal HTTP client: one keep-alive ``http.client`` connection per thread, body sent, answer read unparsed."""
    import http.client
    from urllib.parse import urlsplit

    host, local = urlsplit(url).netloc, threading.local()

    def post(body: bytes) -> bytes:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(host)
        connection.request("POST", "/retrieve", body=body, headers={"content-type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"server answered {response.status}: {data[:200]!r}")
        return data

    return post


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def start_server(index_dir: Path, threads: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "searchlab.retrieval.server", str(index_dir), "--port", str(port),
                             "--threads", str(threads)], cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.time() + 60
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError("retrieval server did not start")
        time.sleep(0.2)


# ---------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=16000, help="world size (16000 entities ≈ 52k passages)")
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=20, help="requests per client per round in the latency test")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved in-process/HTTP rounds in the latency test")
    parser.add_argument("--anserini-passes", type=int, default=6, help="passes of the queries in Anserini's long run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    args = parser.parse_args()

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="searchlab-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        run(args, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args: argparse.Namespace, workdir: Path) -> None:
    """All measurements on the corpus in ``workdir``; prints the table."""
    corpus, all_queries = make_corpus(workdir, args.entities, args.seed)
    passages = sum(1 for _ in open(corpus, encoding="utf-8"))
    queries = random.Random(args.seed).sample(all_queries, min(args.queries, len(all_queries)))
    print(f"corpus: {passages} passages, {len(queries)} queries, machine: {os.cpu_count()} cores", flush=True)
    if passages < 50000:
        print("warning: fewer than 50k passages; raise --entities", flush=True)

    index_dir = workdir / "index"
    if not (index_dir / "index_info.json").exists():
        index_dir.mkdir(exist_ok=True)
        start = time.perf_counter()
        summary = build_index(IndexParams(threads=args.threads), corpus, index_dir)
        print(f"index built in {time.perf_counter() - start:.1f} s: {summary['documents']} documents, "
              f"{summary['bytes']}", flush=True)

    from searchlab.retrieval.lucene import BM25Retriever

    params = RetrieverParams()
    ours = BM25Retriever(index_dir, k1=params.k1, b=params.b, threads=args.threads)
    baseline = Bm25sBaseline(corpus, params.k1, params.b, args.threads)
    rows = []
    for k in (3, 10):
        q_ours = throughput(ours.search, queries, k, warmup=3, repeats=args.repeats)
        q_base = throughput(baseline.search, queries, k, warmup=1, repeats=args.repeats)
        rows.append((f"BM25 q/s, top-{k}", f"{q_ours:,.0f}", f"bm25s {q_base:,.0f}", q_ours / q_base, ">= 1.5", q_ours / q_base >= 1.5))
        q_anserini = anserini_rate(index_dir / "bm25", queries, k, args.threads, params.k1, params.b, workdir,
                                   args.anserini_passes)
        rows.append((f"BM25 q/s, top-{k}, against Anserini", f"{q_ours:,.0f}", f"SearchCollection {q_anserini:,.0f}",
                     q_ours / q_anserini, ">= 0.8", q_ours / q_anserini >= 0.8))
        print(f"top-{k}: searchlab {q_ours:,.0f} q/s, bm25s {q_base:,.0f} q/s, Anserini's SearchCollection "
              f"{q_anserini:,.0f} q/s", flush=True)

    firsts = time_to_first_query(index_dir, queries[0], runs=5)
    first = statistics.median(firsts)
    rows.append(("first query after start (s)", f"{first:.2f}", f"min {min(firsts):.2f} max {max(firsts):.2f}", first, "<= 2.0", first <= 2.0))

    batch_rng = random.Random(args.seed + 1)
    batches = [batch_rng.sample(queries, 32) for _ in range(args.clients * args.requests)]
    bodies = [orjson.dumps({"queries": b, "topk": 3, "return_scores": True}) for b in batches]
    in_process = lambda b: ours.search(b, 3)  # noqa: E731
    for _ in range(3):  # warm-up at this concurrency (the JIT recompiles for the larger merged batches)
        concurrent_latencies(in_process, batches, args.clients, args.requests)

    from searchlab.retrieval.client import HttpRetriever

    server, url = start_server(index_dir, args.threads)
    local: list[float] = []
    http: list[float] = []
    client: list[float] = []
    try:
        with HttpRetriever(url) as remote:
            post = raw_poster(url)
            through_client = lambda b: remote.search(b, 3)  # noqa: E731
            for _ in range(3):  # warm the server as much as the in-process retriever
                concurrent_latencies(post, bodies, args.clients, args.requests)
            concurrent_latencies(through_client, batches, args.clients, args.requests)
            # interleaved rounds: drift in the machine's speed hits both sides alike
            for _ in range(args.rounds):
                local += concurrent_latencies(in_process, batches, args.clients, args.requests)
                http += concurrent_latencies(post, bodies, args.clients, args.requests)
                client += concurrent_latencies(through_client, batches, args.clients, args.requests)
    finally:
        server.terminate()
        server.wait()
        ours.close()
    for p in (50, 99):
        lp, hp, cp = percentile(local, p), percentile(http, p), percentile(client, p)
        rows.append((f"batch-32 p{p} ms, 32 clients, server", f"HTTP {hp * 1000:.1f}", f"in-process {lp * 1000:.1f}",
                     hp / lp, "<= 1.25", hp / lp <= 1.25))
        rows.append(("  same through HttpRetriever (info)", f"HTTP {cp * 1000:.1f}", f"in-process {lp * 1000:.1f}",
                     cp / lp, "", None))

    print()
    print(f"{'measure':40} {'searchlab':>14} {'reference':>26} {'ratio':>7} {'target':>8}  met")
    for name, value, reference, ratio, target, met in rows:
        verdict = "" if met is None else ("yes" if met else "NO")
        print(f"{name:40} {value:>14} {reference:>26} {ratio:7.2f} {target:>8}  {verdict}")


if __name__ == "__main__":
    main()
