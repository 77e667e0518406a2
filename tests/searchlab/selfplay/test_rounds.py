"""Self-play rounds on a real tiny model and a real BM25 index: verification, rewards, files, exact resume.

The policy is a real tiny Qwen2 network whose *generation* is steered to a script (its logits are forced, as in
the rollout tests), so that proposals pass or fail verification for known reasons; its training forward and
backward passes are the network's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from transformers import Qwen2ForCausalLM, TrainerCallback

from searchlab.agent.text import encode_completion
from searchlab.jsonl import read_jsonl
from searchlab.params import ModelParams, RetrieverParams, RolloutParams
from searchlab.retrieval.base import Hit
from searchlab.selfplay.config import SelfPlayParams
from searchlab.selfplay.rounds import SelfPlayRounds, SelfPlayWorld, proposer_reward
from searchlab.selfplay.seeds import draw_seeds, seed_answers
from searchlab.selfplay.train import SelfPlayJob, train_selfplay
from searchlab.selfplay.verify import Proposal, names_in, screen
from searchlab.synth.config import QAParams
from tests.toyworld import DOCS, ForceTokens, make_model, make_tokenizer, write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/searchlab/conftest.py's

# what the scripted proposer asks for each seed answer, and what the scripted solver answers
PROPOSALS = {"Tokyo": "What is the capital of Japan?", "Oslo": "What is the capital of Norway?",
             "Nile": "Which river is the Nile?"}
ANSWERS = {"What is the capital of Japan?": "Tokyo", "What is the capital of Norway?": "Oslo"}
CLOSED_BOOK = {"What is the capital of Norway?"}  # the solver knows this one without searching
STUCK: set[str] = set()  # questions the solver's searched episodes answer wrong (its one-turn checks still right)
ROLLOUT = RolloutParams(max_new_tokens=40, max_turns=3, topk=2, max_information_tokens=64, batch_size=8)
QA = QAParams(heldout_share=0.0)


def script(text: str) -> str:
    """The turn the scripted policy writes after the visible context ``text``."""
    if "\nAnswer: " in text:  # the proposer's prompt (the instructions mention the tags: look after them)
        answer, done = text.split("\nAnswer: ", 1)[1].split("\n", 1)
        if "<information>" not in done:
            return f"<think>About {answer}.</think>\n<search> {answer} </search>"
        return f"<think>Enough.</think>\n<question> {PROPOSALS.get(answer, 'What is this?')} </question>"
    question, done = text.split("Question: ", 1)[1].split("\n", 1)
    known = ANSWERS.get(question, "unknown")
    if text.endswith("<answer>"):  # a forced one-turn answer: the verifier's checks
        return f" {known if '<information>' in done or question in CLOSED_BOOK else 'unknown'} </answer>"
    if "<information>" not in done:
        return f"<search> {question} </search>"
    return f"<answer> {'unknown' if question in STUCK else known} </answer>"


class ScriptedPolicy(Qwen2ForCausalLM):
    """A real tiny network whose generate() writes :func:`script`'s turns."""

    tokenizer = None

    def generate(self, input_ids=None, attention_mask=None, **kwargs):
        tok = type(self).tokenizer
        rows = [encode_completion(tok, script(tok.decode([i for i, m in zip(ids, mask) if m],
                                                         skip_special_tokens=False)))
                for ids, mask in zip(input_ids.tolist(), attention_mask.tolist())]
        kwargs["logits_processor"] = transformers.LogitsProcessorList(
            [ForceTokens(rows, input_ids.shape[1], tok.eos_token_id)])
        return super().generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


@pytest.fixture(scope="module")
def tokenizer():
    tok = make_tokenizer(tags_special=True)
    ScriptedPolicy.tokenizer = tok
    return tok


def policy(tokenizer) -> ScriptedPolicy:
    base = make_model(tokenizer)
    model = ScriptedPolicy(base.config)
    model.load_state_dict(base.state_dict())
    return model.train()


@pytest.fixture(scope="module")
def world(tmp_path_factory, bm25):
    """A corpus folder whose titles (the seeds) are the three scripted answers, a qa folder, and BM25 over DOCS
    (the session's index of it, tests/searchlab/conftest.py's bm25)."""
    corpus = tmp_path_factory.mktemp("selfplay-corpus")
    write_corpus(corpus / "corpus.jsonl", DOCS, ("tokyo", "oslo", "nile"))
    qa = tmp_path_factory.mktemp("selfplay-qa")
    (qa / "train.jsonl").write_text(json.dumps({"id": "q2", "question": "What is the capital of Japan?",
                                                "answers": ["Tokyo"]}) + "\n")
    return corpus, qa, bm25


def _job(params: SelfPlayParams, corpus: Path, qa: Path, work_dir: Path, out_dir: Path) -> SelfPlayJob:
    """The :class:`SelfPlayJob` of the tests' folders (``start`` and ``index`` are the worker's to load: the tests
    pass a live policy and retriever to ``train_selfplay``)."""
    return SelfPlayJob(model=ModelParams(), rollout=ROLLOUT, selfplay=params, qa=QA, retriever=RetrieverParams(),
                       start=work_dir, corpus=corpus, qa_dir=qa, index=work_dir, out_dir=out_dir, work_dir=work_dir)


def _params(**kw) -> SelfPlayParams:
    return SelfPlayParams(**{"rounds": 3, "proposals_per_round": 3, "solver_questions": 2, "num_generations": 2,
                             "learning_rate": 5e-3, "samples": 0, **kw})


def test_seeds_are_titles_without_a_kb_and_never_held_out(world, tmp_path):
    corpus, _, _ = world
    assert seed_answers(corpus, QA) == ["Nile", "Oslo", "Tokyo"]
    assert draw_seeds(["a", "b", "c", "d"], 5, 2, 0) == draw_seeds(["a", "b", "c", "d"], 5, 2, 0)
    everything_held_out = QAParams(heldout_share=0.999999)
    with pytest.raises(ValueError, match="no seed answers"):
        seed_answers(corpus, everything_held_out)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "kb.jsonl").write_text(json.dumps({"id": "e1", "name": "Ato Company", "facts": [
        {"predicate": "founded_by", "value": "e2", "kind": "relation", "text": "Rasen Sanbin"},
        {"predicate": "founded_year", "value": 1908, "kind": "attribute", "text": "1908"}]}) + "\n" + json.dumps(
        {"id": "e2", "name": "Rasen Sanbin", "facts": [
            {"predicate": "motto", "value": "x", "kind": "attribute", "text": "a sentence far too long to be a seed"}]})
        + "\n")
    # only names another entity's fact points to: nothing points to Ato Company
    assert seed_answers(kb, QA) == ["Rasen Sanbin"]
    assert seed_answers(kb, QA, "values") == ["1908", "Rasen Sanbin"]
    no_relations = tmp_path / "flat"
    no_relations.mkdir()
    (no_relations / "kb.jsonl").write_text(json.dumps({"id": "e1", "name": "Ato Company", "facts": [
        {"predicate": "founded_year", "value": 1908, "kind": "attribute", "text": "1908"}]}) + "\n")
    assert seed_answers(no_relations, QA) == ["Ato Company"]


def test_text_checks_and_proposer_rewards():
    def proposal(question, searches=(("q", []),)):
        return Proposal(0, "Tokyo", question, list(searches), "")

    assert screen(proposal(None), 10) == "no_question"
    assert screen(proposal("  "), 10) == "no_question"
    assert screen(proposal("one two three four"), 3) == "too_long"
    assert screen(proposal("Which city?", ()), 10) == "no_search"
    assert screen(proposal("Is tokyo the capital?"), 10) == "names_answer"
    read = [("japan capital", [Hit("tokyo", '"Tokyo"\nTokyo is the capital of Japan.', 1.0)])]
    assert screen(proposal("What is the capital of Japan?", read), 10) is None
    # a name the passages never mention: a blend of two names, or an entity the proposer never read about
    assert screen(proposal("What is the capital of Japan Republic?", read), 10) == "ungrounded"
    assert screen(proposal("What is the capital of Norway?", read), 10) == "ungrounded"
    assert screen(proposal("What is the capital of Norway?", read), 10, grounded=False) is None
    assert screen(proposal("How many people live there?", read), 10) == "ungrounded"  # of nobody
    assert names_in("Where did Maette Bromrul die?") == ["Maette Bromrul"]
    assert names_in("In which river is The Golden Kingdom of Rotoult in Vifesvik?") == [
        "The Golden Kingdom of Rotoult", "Vifesvik"]
    assert names_in("Which company did Eisard & Co. merge with?") == ["Eisard & Co"]
    params = _params()
    hard = Proposal(0, "a", "q", [], "", verified=True, solver_success=0.25)
    assert proposer_reward(hard, params) == 0.75
    assert proposer_reward(hard, _params(proposer_reward="4s(1-s)")) == pytest.approx(0.75)
    assert proposer_reward(Proposal(0, "a", "q", [], "", reason="rag_failed"), params) == -1.0
    graded = _params(graded=True)
    ladder = [proposer_reward(Proposal(0, "a", "q", [], "", reason=reason), graded) for reason in
              ("no_question", "no_search", "names_answer", "ungrounded", "rag_failed", "duplicate")]
    assert ladder[0] == -1.0 and ladder == sorted(ladder) and len(set(ladder)) == len(ladder) and ladder[-1] < 0
    assert proposer_reward(hard, graded) == 0.75  # a verified question still beats every failure


class _Interrupt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 2:  # round 2 (index 1) is played and written, its checkpoint not yet
            raise KeyboardInterrupt("killed before round 2's checkpoint")


def test_rounds_verify_reward_record_and_resume_exactly(world, tokenizer, tmp_path):
    corpus, qa, retriever = world
    params = _params()
    straight = train_selfplay(_job(params, corpus, qa, tmp_path / "a-work", tmp_path / "a"),
                              policy(tokenizer), tokenizer, retriever)
    assert straight["steps"] == 3 and straight["proposals"] == 18 and straight["verified"] == 1

    records = read_jsonl(tmp_path / "a/questions.jsonl")
    first = [r for r in records if r["round"] == 0]
    reasons = {(r["answer"], r["reason"]) for r in first}
    # Tokyo's question passes once (its twin is a duplicate); Oslo's the solver knows closed-book; Nile's names it
    assert reasons == {("Tokyo", None), ("Tokyo", "duplicate"), ("Oslo", "closed_book"), ("Nile", "names_answer")}
    kept = next(r for r in first if r["verified"])
    assert kept["question"] == "What is the capital of Japan?" and kept["rag_answer"] == "Tokyo"
    assert kept["closed_book_answer"] == "unknown" and kept["solver_success"] == 1.0
    assert kept["searches"] == [{"query": "Tokyo", "passages": kept["searches"][0]["passages"]}]
    assert "tokyo" in kept["searches"][0]["passages"]
    # later rounds: the same question is a duplicate of a kept one, and the solver replays it
    assert all(r["reason"] == "duplicate" for r in records if r["round"] > 0 and r["answer"] == "Tokyo")

    rounds = read_jsonl(tmp_path / "a/rounds.jsonl")
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert rounds[0]["verified_share"] == pytest.approx(1 / 6) and rounds[1]["verified_share"] == 0.0
    assert rounds[0]["novelty"] == 0.0  # the qa stage already asked it
    assert rounds[0]["proposer_reward"] == pytest.approx((0.0 - 5) / 6)  # one verified (1 - s = 0), five failed
    log = read_jsonl(tmp_path / "a/train_log.jsonl")
    assert [row["selfplay/solver_reward"] for row in log if "selfplay/solver_reward" in row][0] == 1.0
    assert "round" in (tmp_path / "a/datasheet.md").read_text()

    with pytest.raises(KeyboardInterrupt):
        train_selfplay(_job(params, corpus, qa, tmp_path / "b-work", tmp_path / "b"),
                       policy(tokenizer), tokenizer, retriever, callbacks=[_Interrupt()])
    assert (tmp_path / "b-work/rounds/round-0001.jsonl").is_file()
    assert not (tmp_path / "b-work/checkpoints/checkpoint-2").exists()
    resumed = train_selfplay(_job(params, corpus, qa, tmp_path / "b-work", tmp_path / "b"),
                             policy(tokenizer), tokenizer, retriever)
    assert resumed["resumed_from_step"] == 1 and resumed["steps"] == 3  # round 2 is played again
    assert read_jsonl(tmp_path / "b/questions.jsonl") == records

    from searchlab.model import load_model

    a, _ = load_model(str(tmp_path / "a"))
    b, _ = load_model(str(tmp_path / "b"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.allclose(x, y, atol=1e-6), name


def test_a_round_s_batch_has_both_roles_and_fills_missing_solver_groups(world, tokenizer, tmp_path):
    corpus, qa, retriever = world
    params = _params(rounds=1)
    rounds = SelfPlayRounds(tokenizer, retriever, SelfPlayWorld(seed_answers(corpus, QA)), ROLLOUT, params, tmp_path)
    from searchlab.rl.trainer import make_search_trainer

    trainer = make_search_trainer(params, policy(tokenizer), tokenizer, rounds, tmp_path / "checkpoints")
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(10)])
    roles = [q["role"] for q in rounds.last.questions]
    assert roles == ["proposer"] * 6 + ["solver"] * 2 + ["filler"] * 2
    assert rounds.last.rewards[-2:] == [None, None]
    assert batch["advantages"][-2:].tolist() == [0.0, 0.0]  # a filler moves nothing
    loss_mask = (batch["completion_mask"] * batch["tool_mask"]).tolist()
    for episode, row in zip(rounds.last.episodes, loss_mask):
        n = len(episode.completion_ids)
        assert row[:n] == [1 - m for m in episode.env_mask]  # the passages the proposer read are not trained on


def _capital_kb(capital: str):
    """A real KB in which Japan's capital is ``capital``."""
    from searchlab.corpus.kb import KB, Entity, Fact

    fact = Fact("japan", "capital", capital, False, "japan-0", capital)
    japan = Entity("japan", "country", "", "Japan", ["japan-0"], {"capital": [fact]})
    return KB({"japan": japan}, {"japan-0": f"The capital of Japan is {capital}."})


def test_the_kb_filter_rejects_what_the_kb_does_not_confirm_and_only_when_asked(world, tokenizer):
    from searchlab.selfplay.verify import KBCheck, verify

    corpus, _, retriever = world
    question = PROPOSALS["Tokyo"]

    def verified(kb_capital: str, kb_filter: bool) -> Proposal:
        p = Proposal(0, "Tokyo", question, [("Tokyo", retriever.search(["Tokyo"], 2)[0])], "")
        verify([p], policy(tokenizer).eval(), tokenizer, retriever, ROLLOUT, set(), SelfPlayParams(kb_filter=kb_filter),
               KBCheck(_capital_kb(kb_capital)))
        return p

    right = verified("Tokyo", kb_filter=True)
    assert right.verified and right.kb_correct and right.reason is None
    reported = verified("Kyoto", kb_filter=False)  # the RAG check passes it; the KB only reports
    assert reported.verified and reported.kb_correct is False
    filtered = verified("Kyoto", kb_filter=True)
    assert not filtered.verified and filtered.reason == "kb_wrong" and filtered.rag_answer == "Tokyo"


class Unstick(TrainerCallback):
    """Empties :data:`STUCK` after the first round (before that round's dev scoring): the solver then answers."""

    def on_step_end(self, args, state, control, **kwargs):
        STUCK.clear()


@pytest.mark.parametrize("stuck_at_start", [False, True])
def test_the_solver_s_dev_em_is_scored_every_round_and_the_best_round_kept(world, tokenizer, tmp_path, monkeypatch,
                                                                           stuck_at_start):
    from searchlab.model import load_model

    corpus, qa, retriever = world
    own_qa = tmp_path / "qa"
    own_qa.mkdir()
    (own_qa / "train.jsonl").write_text((qa / "train.jsonl").read_text())
    dev = "What is the capital of Norway?"
    (own_qa / "dev.jsonl").write_text(json.dumps({"id": "d1", "question": dev, "answers": ["Oslo"]}) + "\n")
    monkeypatch.setattr(f"{__name__}.STUCK", {dev} if stuck_at_start else set())
    params = _params(rounds=2, dev={"questions": 1, "samples": 1}, keep="best")
    start = policy(tokenizer)
    figures = train_selfplay(_job(params, corpus, own_qa, tmp_path / "work", tmp_path / "out"),
                             start, tokenizer, retriever, callbacks=[Unstick()])
    log = read_jsonl(tmp_path / "out/train_log.jsonl")
    dev_em = {row["step"]: row["dev/em"] for row in log if "dev/em" in row}
    assert dev_em == {0: 0.0 if stuck_at_start else 1.0, 1: 1.0, 2: 1.0}
    # equal rounds keep the first, the starting policy included; a round that beats the start is kept over it
    assert figures["kept_step"] == (1 if stuck_at_start else 0)
    kept = tmp_path / ("work/checkpoints/checkpoint-1" if stuck_at_start else "work/step-0")
    saved, _ = load_model(str(tmp_path / "out"))
    expected, _ = load_model(str(kept))
    assert all(torch.equal(x, y) for x, y in zip(saved.state_dict().values(), expected.state_dict().values()))
    if not stuck_at_start:  # the start's weights, not a trained round's
        assert not all(torch.equal(x, y) for x, y in zip(
            saved.state_dict().values(), load_model(str(tmp_path / "work/checkpoints/checkpoint-2"))[0]
            .state_dict().values()))


def test_a_frozen_proposer_writes_the_questions_and_only_the_solver_is_trained(world, tokenizer, tmp_path):
    corpus, qa, retriever = world
    params = _params(rounds=2, proposer="sft")  # the model folder the task resolves "sft" to is passed below
    assert params.plan.groups_per_step == params.solver_questions
    frozen, learner = policy(tokenizer).eval(), policy(tokenizer)
    before = {name: x.clone() for name, x in frozen.state_dict().items()}
    start = {name: x.clone() for name, x in learner.state_dict().items()}
    figures = train_selfplay(_job(params, corpus, qa, tmp_path / "work", tmp_path / "out"),
                             learner, tokenizer, retriever, proposer=(frozen, tokenizer))
    records = read_jsonl(tmp_path / "out/questions.jsonl")
    assert len(records) == 2 * 3 * 2 and figures["verified"] == 1  # the frozen model's proposals, verified as before
    log = read_jsonl(tmp_path / "out/train_log.jsonl")
    assert [row["selfplay/solver_reward"] for row in log if "selfplay/solver_reward" in row] == [1.0, 1.0]
    assert all(torch.equal(before[name], x) for name, x in frozen.state_dict().items())
    from searchlab.model import load_model

    # the solver's groups all succeeded (no advantage) and the proposals are not in the batch: nothing moves ...
    trained, _ = load_model(str(tmp_path / "out"))
    assert all(torch.allclose(start[name], x) for name, x in trained.state_dict().items())
    # ... where the same rounds with the policy as proposer train on its proposals' spread of rewards
    train_selfplay(_job(params.model_copy(update={"proposer": "policy"}), corpus, qa, tmp_path / "own-work",
                        tmp_path / "own"),
                   policy(tokenizer), tokenizer, retriever)
    trained, _ = load_model(str(tmp_path / "own"))
    assert any(not torch.allclose(start[name], x) for name, x in trained.state_dict().items())


def test_guidance_plays_the_proposer_s_path_in_a_solver_group_with_no_right_episode(world, tokenizer, tmp_path,
                                                                                    monkeypatch):
    from searchlab.agent.replay import replay
    from searchlab.rl.trainer import make_search_trainer
    from searchlab.selfplay.rounds import known_path

    corpus, qa, retriever = world
    question = PROPOSALS["Tokyo"]
    monkeypatch.setattr(f"{__name__}.STUCK", {question})  # verified, but every solver episode answers "unknown"
    params = _params(rounds=1, guidance={"enabled": True})
    rounds = SelfPlayRounds(tokenizer, retriever, SelfPlayWorld(seed_answers(corpus, QA)), ROLLOUT, params, tmp_path)
    trainer = make_search_trainer(params, policy(tokenizer), tokenizer, rounds, tmp_path / "checkpoints")
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(10)])
    last = rounds.last
    solver = [i for i, q in enumerate(last.questions) if q["role"] == "solver"]
    assert [last.questions[i]["question"] for i in solver] == [question, question]
    assert trainer._metrics["train"]["selfplay/guided"] == [1]
    # the proposer searched "Tokyo" and was verified on those passages: that path, then the answer, played now
    assert last.episodes[solver[-1]] == replay(tokenizer, retriever, question, known_path(["Tokyo"], "Tokyo"), ROLLOUT)
    assert last.episodes[solver[0]].answer == "unknown"
    assert last.rewards[solver[-1]] == 1.0 and last.rewards[solver[0]] < 1.0
    assert batch["advantages"][solver[-1]] > 0 > batch["advantages"][solver[0]]
    # the question's success rate is the policy's own: the proposer is not paid for the guide's answer
    record = next(r for r in read_jsonl(tmp_path / "round-0000.jsonl") if r["verified"])
    assert record["solver_success"] == 0.0


def test_a_round_with_a_frozen_proposer_trains_solver_groups_and_fillers_only(world, tokenizer, tmp_path):
    corpus, qa, retriever = world
    params = _params(rounds=1, proposer="sft")
    rounds = SelfPlayRounds(tokenizer, retriever, SelfPlayWorld(seed_answers(corpus, QA)), ROLLOUT, params, tmp_path,
                            proposer=(policy(tokenizer).eval(), tokenizer))
    from searchlab.rl.trainer import make_search_trainer

    trainer = make_search_trainer(params, policy(tokenizer), tokenizer, rounds, tmp_path / "checkpoints")
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(4)])
    assert [q["role"] for q in rounds.last.questions] == ["solver"] * 2 + ["filler"] * 2
    assert batch["advantages"][-2:].tolist() == [0.0, 0.0]
