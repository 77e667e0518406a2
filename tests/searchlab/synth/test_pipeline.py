"""Synthesis end to end on a real world and a real Lucene index: outputs, filters, demonstrations, resume."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from searchlab.agent import Rollout
from searchlab.agent.protocol import (
    cited_passages,
    environment_spans,
    information_block,
    instruction,
    parse_trajectory,
    proposer_instruction,
)
from searchlab.corpus.records import import_records
from searchlab.jsonl import read_jsonl
from searchlab.params import IndexParams, RecordsParams
from searchlab.retrieval import build_index, open_retriever
from searchlab.rl.rubric import rubric_score
from searchlab.scoring import cover_exact_match, normalize_answer
from searchlab.synth.benchmarks import write_suites
from searchlab.synth.config import BenchmarksParams, QAParams
from searchlab.synth.demos import DemoWriter
from searchlab.synth.generate import Builder
from searchlab.synth.pipeline import synthesize
from tests.searchlab.synth.conftest import RETRIEVER

OUTPUTS = ("train.jsonl", "dev.jsonl", "heldout.jsonl", "demos.jsonl", "stats.json", "datasheet.md")


def test_outputs_cover_every_type_and_held_out_answers_never_train(synthesized):
    out, counts = synthesized
    assert all((out / name).is_file() for name in OUTPUTS)
    train, dev, heldout = (read_jsonl(out / f) for f in ("train.jsonl", "dev.jsonl", "heldout.jsonl"))
    assert counts["kept"] == len(train) + len(dev) + len(heldout) and counts["heldout"] == len(heldout) > 0
    assert {r["type"] for r in train} == {r["type"] for r in heldout} == {"single", "bridge", "compare", "compose",
                                                                          "oblique"}
    trained = {normalize_answer(a) for r in train + dev for a in r["answers"]}
    assert not [r for r in heldout if normalize_answer(r["answers"][0]) in trained]
    assert counts["heldout_answer_overlap"] == 0
    for r in train + heldout:
        assert r["features"]["bucket"] in ("easy", "medium", "hard")
        assert {"hops", "cues", "answer_rank", "pass_rates"} <= set(r["features"])
    datasheet = (out / "datasheet.md").read_text()
    assert "Rejections by reason" in datasheet and "| oblique |" in datasheet


def test_kept_questions_pass_the_consensus_thresholds(synthesized):
    out, _ = synthesized
    for r in read_jsonl(out / "train.jsonl") + read_jsonl(out / "heldout.jsonl"):
        rates = r["features"]["pass_rates"]
        assert rates["role:gold"] == 1.0
        if r["type"] != "compare":
            assert rates["role:closed_book"] == 0.0
        if r["type"] in ("bridge", "compose", "oblique"):
            assert rates["role:one_shot"] == 0.0


def test_harder_types_resist_one_shot_retrieval(synthesized):
    _, counts = synthesized
    single = counts["answer_in_top3.single"]
    assert single >= 0.6
    for kind in ("bridge", "compose", "oblique"):
        assert counts[f"answer_in_top3.{kind}"] <= single / 2, kind


def test_demonstrations_parse_and_show_the_real_retrievers_results(synthesized, world):
    out, _ = synthesized
    demos = [d for d in read_jsonl(out / "demos.jsonl") if d["role"] == "solver"]
    train_ids = {r["id"] for r in read_jsonl(out / "train.jsonl") + read_jsonl(out / "dev.jsonl")}
    assert {d["id"] for d in demos} == train_ids and len(demos) == len(train_ids)
    with open_retriever(RETRIEVER, world[1]) as retriever:
        for d in demos[:150]:
            assert d["prompt"] == instruction(d["question"])
            trajectory = parse_trajectory(d["completion"])
            assert trajectory.problems() == [], d["completion"]
            assert trajectory.answer == d["answers"][0] and trajectory.searches
            blocks = [s for s in trajectory.segments if s.kind == "information"]
            assert len(blocks) == len(trajectory.searches)
            fresh = retriever.search(trajectory.searches, 3)
            for block, hits in zip(blocks, fresh):
                assert information_block(hits).strip() == d["completion"][block.start:block.end].strip()
            if d["type"] != "compare":
                assert not any(cover_exact_match(q, d["answers"]) for q in trajectory.searches), d["completion"]


def test_proposer_demonstrations_walk_back_from_the_answer_to_the_question(synthesized, world):
    """The self-play proposer's demonstrations: the answer in the prompt, searches that retrieve the question's
    evidence passages (last hop first, the first query naming the answer), and the question at the end."""
    out, counts = synthesized
    questions = {r["id"]: r for r in read_jsonl(out / "train.jsonl") + read_jsonl(out / "dev.jsonl")}
    proposals = [d for d in read_jsonl(out / "demos.jsonl") if d["role"] == "proposer"]
    chains = [q for q in questions.values() if q["type"] in ("single", "bridge", "compose")]
    assert counts["proposer_demos"] == len(proposals) >= 0.5 * len(chains)
    assert {questions[d["id"]]["type"] for d in proposals} == {"single", "bridge", "compose"}
    with open_retriever(RETRIEVER, world[1]) as retriever:
        for d in proposals[:100]:
            q = questions[d["id"]]
            assert d["prompt"] == proposer_instruction(q["answers"][0])
            trajectory = parse_trajectory(d["completion"])
            assert trajectory.problems() == [], d["completion"]
            assert trajectory.question == q["question"] and trajectory.answer is None
            assert cover_exact_match(trajectory.searches[0], q["answers"][:1])
            found = {hit.id for hits in retriever.search(trajectory.searches, 3) for hit in hits}
            assert set(q["evidence"]) <= found, d["completion"]


def test_comparisons_name_and_search_their_two_candidates_in_the_questions_order(synthesized, kb):
    out, _ = synthesized
    comparisons = [r for r in read_jsonl(out / "train.jsonl") if r["type"] == "compare"]
    demos = {d["id"]: d for d in read_jsonl(out / "demos.jsonl")}
    assert comparisons
    for r in comparisons:
        first, second = sorted((kb[c["subject"]].name for c in r["constraints"]), key=r["question"].find)
        trajectory = parse_trajectory(demos[r["id"]]["completion"])
        assert trajectory.searches[0].startswith(first) and trajectory.searches[1].startswith(second)
        # the first thought copies both names as the question words them, one span
        first_think = next(s.content for s in trajectory.segments if s.kind == "think")
        span = r["question"][r["question"].find(first):r["question"].find(second) + len(second)]
        assert f"Two candidates: {span}." in first_think, first_think


def test_benchmark_suites_are_flashrag_jsonl_with_no_training_answers(synthesized, tmp_path):
    out, _ = synthesized
    counts = write_suites(BenchmarksParams(size=15), out, tmp_path)
    assert counts["train_answer_overlap"] == 0
    for kind in ("single", "bridge", "compare", "compose", "oblique"):
        rows = read_jsonl(tmp_path / f"world-{kind}.jsonl")
        assert 0 < len(rows) <= 15 and counts[f"world-{kind}"] == len(rows)
        assert all(set(r) == {"id", "question", "golden_answers", "metadata"} for r in rows)


def _synthesize_cmd(world, out: Path, work: Path) -> list[str]:
    code = ("import sys; from pathlib import Path; from searchlab.params import RetrieverParams; "
            "from searchlab.synth.config import QAParams; "
            "from searchlab.synth.pipeline import synthesize; "
            "synthesize(QAParams(shard_size=10), RetrieverParams(threads=1), Path(sys.argv[1]), Path(sys.argv[2]), "
            "Path(sys.argv[3]), Path(sys.argv[4]))")
    return [sys.executable, "-c", code, str(world[0]), str(world[1]), str(out), str(work)]


def test_kill_9_mid_synthesis_resumes_from_its_shards_and_matches_an_uninterrupted_run(world, tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()
    synthesize(QAParams(shard_size=10), RETRIEVER, world[0], world[1], reference, tmp_path / "reference-work")

    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    proc = subprocess.Popen(_synthesize_cmd(world, out, work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(work.glob("shard-*.json"))) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p.name: p.stat().st_mtime_ns for p in work.glob("shard-*.json")}
    assert 3 <= len(done) < 40, "the run was not interrupted mid-way"
    assert not (out / "train.jsonl").exists()

    synthesize(QAParams(shard_size=10), RETRIEVER, world[0], world[1], out, work)
    assert all((work / name).stat().st_mtime_ns == mtime for name, mtime in done.items())  # not redone
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


def test_synthesis_runs_on_users_semi_structured_records(tmp_path):
    corpus, index, out = tmp_path / "corpus", tmp_path / "index", tmp_path / "qa"
    for folder in (corpus, index, out):
        folder.mkdir()
    example = Path(__file__).resolve().parents[3] / "examples/records/films.jsonl"
    mapping = RecordsParams(type_field="type", references=["director", "studio", "based_in", "born_in"])
    import_records(example, corpus, mapping, "fail")
    build_index(IndexParams(threads=1), corpus / "corpus.jsonl", index)
    counts = synthesize(QAParams(shard_size=5, attempts_per_target=4, heldout_share=0.0), RETRIEVER, corpus, index,
                        out, tmp_path / "work")
    train = read_jsonl(out / "train.jsonl") + read_jsonl(out / "dev.jsonl")
    assert counts["kept"] == len(train) > 0
    names = {r["name"] for r in read_jsonl(corpus / "kb.jsonl")}
    assert any(r["answers"][0] in names for r in train)  # questions about the user's records, answered by them


def test_heldout_attempts_grow_the_benchmark_suites_and_leave_the_training_questions_as_they_were(
        synthesized, world, tmp_path):
    reference, _ = synthesized
    (tmp_path / "qa").mkdir()
    counts = synthesize(QAParams(shard_size=100, heldout_attempts_per_target=3), RETRIEVER, world[0], world[1],
                        tmp_path / "qa", tmp_path / "work")
    for name in ("train.jsonl", "dev.jsonl", "demos.jsonl"):
        assert (tmp_path / "qa" / name).read_bytes() == (reference / name).read_bytes(), name
    before, after = read_jsonl(reference / "heldout.jsonl"), read_jsonl(tmp_path / "qa/heldout.jsonl")
    assert len(after) > 1.5 * len(before) and counts["heldout"] == len(after)
    trained = {normalize_answer(r["answers"][0]) for r in read_jsonl(reference / "train.jsonl")}
    assert not any(normalize_answer(r["answers"][0]) in trained for r in after)
    assert len({normalize_answer(r["question"]) for r in after}) == len(after)


def test_citing_demonstrations_cite_each_needed_passage_and_mask_only_information(world, kb):
    """qa.demos.cite: each search's fact is cited in the next turn; the citations parse back to the gold passage ids,
    only the information blocks are masked, and without the citations the text is the plain demonstration."""
    builder = Builder(kb, random.Random(0))
    questions = [q for kind in ("single", "bridge", "compose", "compare", "oblique")
                 for target in list(kb.entities)[:30] if (q := builder.build(kind, target, f"{kind}-{target}"))]
    with open_retriever(RETRIEVER, world[1]) as retriever:
        plain = DemoWriter(kb, retriever, 3, 2, random.Random(1)).write(questions)
        cited = DemoWriter(kb, retriever, 3, 2, random.Random(1), cite=True).write(questions)
        written = [(q, text, uncited) for q, text, uncited in zip(questions, cited, plain) if text is not None]
        assert {q.type for q, _, _ in written} == {"single", "bridge", "compose", "compare", "oblique"}
        for q, text, uncited in written:
            trajectory = parse_trajectory(text)
            assert trajectory.problems() == [], text
            assert re.sub(r"<cite> Doc \d+ </cite>\n", "", text) == uncited
            retrieved = [[hit.id for hit in hits] for hits in retriever.search(trajectory.searches, 3)]
            ids = cited_passages(text, retrieved)
            assert len(ids) == len(trajectory.searches) == text.count("<cite>")
            gold = [c.passage for c in q.constraints]
            if q.type in ("single", "bridge", "compose"):
                assert ids == gold
            else:  # comparisons search in the question's order, oblique cues most selective first (some skipped)
                assert set(ids) <= set(gold) and len(set(ids)) == len(ids)
            blocks = [text[s.start:s.end] for s in trajectory.segments if s.kind == "information"]
            assert [text[s:e].strip() for s, e in environment_spans(text)] == blocks
            if q.type != "oblique":  # every hop is searched, stated and cited: the whole rubric reward
                episode = Rollout(question=q.question, prompt="p", completion=text, answer=trajectory.answer,
                                  searches=trajectory.searches, retrieved=retrieved, finished=True)
                assert rubric_score(episode, [asdict(c) for c in q.constraints], q.answers) == 1.0, text
