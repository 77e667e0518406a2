"""The Search-R1 text protocol: parsing turns and trajectories, information blocks, masks, and a real BM25 environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from searchlab.agent import (
    INVALID_ACTION_FEEDBACK,
    INVALID_ACTION_MESSAGE,
    SPECIAL_TOKENS,
    Action,
    DemoStep,
    environment_spans,
    format_passages,
    information_block,
    instruction,
    parse_action,
    parse_trajectory,
    proposer_instruction,
    render_demonstration,
    step,
)
from searchlab.agent.protocol import CITE_CLOSE, CITE_OPEN, citations, cite_tag, cited_passages, copies_the_prompt
from searchlab.retrieval.base import Hit
from tests.toyworld import counting_bm25

TOKYO = Hit("tokyo", '"Tokyo"\nTokyo is the capital of Japan.', 12.5)
KYOTO = Hit("kyoto", '"Kyoto"\nKyoto was the old capital.', 9.0)
FLEMING = Hit("fleming", '"Alexander Fleming"\nFleming discovered penicillin.', 7.0)


# ---------------------------------------------------------------- tags and prompt


def test_special_tokens_are_the_ten_tags():
    assert SPECIAL_TOKENS == (
        "<think>", "</think>", "<search>", "</search>",
        "<information>", "</information>", "<answer>", "</answer>", "<question>", "</question>",
    )


SOLVER_TAGS = SPECIAL_TOKENS[:8]  # the proposer's <question> is not the solver's business


def test_instruction_explains_the_protocol_and_ends_with_the_question():
    prompt = instruction("  Who wrote Hamlet? ")
    assert prompt.endswith("\nQuestion: Who wrote Hamlet?\n")
    for tag in SOLVER_TAGS:
        assert tag in prompt
    assert "<question>" not in prompt
    assert "<search> query </search>" in prompt and "<answer> Beijing </answer>" in prompt
    assert copies_the_prompt(" Query") and not copies_the_prompt("Hamlet") and not copies_the_prompt("")
    assert len(prompt.split()) < 100  # tiny models read it on every example


def test_proposer_instruction_asks_for_a_question_about_the_answer():
    prompt = proposer_instruction("  Alexander Fleming ")
    assert prompt.endswith("\nAnswer: Alexander Fleming\n")
    for tag in ("<think>", "</think>", "<search>", "</search>", "<information>", "</information>", "<question>",
                "</question>"):
        assert tag in prompt
    assert "never write the answer" in prompt
    assert len(prompt.split()) < 100


def test_invalid_action_message_says_how_to_act():
    assert "<search> query </search>" in INVALID_ACTION_MESSAGE
    assert "<answer>" in INVALID_ACTION_MESSAGE and "</answer>" in INVALID_ACTION_MESSAGE
    assert "<think>" in INVALID_ACTION_MESSAGE and "invalid" in INVALID_ACTION_MESSAGE
    assert INVALID_ACTION_FEEDBACK == "\n" + INVALID_ACTION_MESSAGE + "\n"


# ---------------------------------------------------------------- parse_action


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        ("<think>hm</think>\n<search> capital of Japan </search>", Action("search", "capital of Japan")),
        ("<search>first</search> no, better: <search>second</search>", Action("search", "second")),
        ("<search>a <search>b</search>", Action("search", "b")),  # unclosed first opening: the inner pair counts
        ("<think>x</think><search>   </search>", Action("invalid")),
        ("<search>q</search> oops <search>\n</search>", Action("invalid")),  # the last search is empty
        ("<think>x</think><search>capital of", Action("invalid")),  # cut off mid-query
        ("I think it is Paris.", Action("invalid")),
        ("", Action("invalid")),
        ("<search>q</search><answer> Paris </answer>", Action("answer", "Paris")),
        ("<answer>Paris</answer><search>q</search>", Action("answer", "Paris")),
        ("<answer>Lyon</answer> wait, no: <answer>Paris</answer>", Action("answer", "Paris")),
        ("<answer>Paris</answer> and some babble <think>", Action("answer", "Paris")),
        ("<think>done</think>\n<answer> Paris", Action("answer", "Paris")),  # EOS inside the answer
        ("<answer> Paris </ans", Action("answer", "Paris")),  # token limit inside the closing tag
        ("<search>q</search>\n<answer>Paris", Action("answer", "Paris")),  # unclosed answer after the search
        ("<answer> maybe <search>q</search>", Action("search", "q")),  # a complete search after it
        ("<answer></answer>", Action("answer", "")),
        ("<think>t</think>\n<question> Who found it? </question>", Action("question", "Who found it?")),
        ("<search>q</search><question>Who?</question>", Action("question", "Who?")),
        ("<question>Who?</question><answer>Paris</answer>", Action("question", "Who?")),  # the first to close
        ("<answer>Paris</answer> <question>Who?</question>", Action("answer", "Paris")),
        ("<question>Who found", Action("invalid")),  # a question cut off is not a proposal
    ],
)
def test_parse_action(turn, expected):
    assert parse_action(turn) == expected


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        (" Paris </answer> and babble", Action("answer", "Paris")),
        (" Paris </search>", Action("answer", "Paris")),  # closed with the tag a searching model is used to
        ("<think>hm</think>\n<search> capital of France </search>",
         Action("answer", "<think>hm</think>\n<search> capital of France")),  # what it wrote, never run
        ("<think>It is Paris.</think>\n<answer> Paris </answer>", Action("answer", "Paris")),  # opened again itself
        (" Paris </ans", Action("answer", "Paris")),  # token limit inside a closing tag
        (" Paris </sea", Action("answer", "Paris")),
        (" Paris", Action("answer", "Paris")),  # EOS
        ("", Action("answer", "")),
    ],
)
def test_a_turn_continuing_an_opened_answer_is_that_answer_never_a_search(turn, expected):
    assert parse_action(turn, answer_opened=True) == expected


def test_action_end_marks_where_to_cut_the_turn():
    turn = "<think>x</think><answer>Paris</answer> trailing babble"
    assert parse_action(turn).end == len("<think>x</think><answer>Paris</answer>")
    turn = "<search>q</search>\n\n<information>made up</information>"
    assert parse_action(turn).end == len("<search>q</search>")
    assert parse_action("<answer> Par").end == 12
    assert parse_action("nothing").end == 7
    assert parse_action(" Paris </search> babble", answer_opened=True).end == len(" Paris </search>")
    assert parse_action(" Par", answer_opened=True).end == 4


def test_action_checks_its_fields():
    with pytest.raises(ValueError, match="non-empty query"):
        Action("search", "  ")
    with pytest.raises(ValueError, match="kind"):
        Action("stop")  # type: ignore[arg-type]
    assert Action("answer", "x", end=3) == Action("answer", "x", end=99)  # end is not compared


# ---------------------------------------------------------------- passages and information blocks


def test_format_passages_search_r1_style():
    assert format_passages([TOKYO, KYOTO]) == (
        "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\n"
        "Doc 2(Title: Kyoto) Kyoto was the old capital.\n"
    )
    assert format_passages([Hit("x", "Plain title\nbody text", 1.0)]) == "Doc 1(Title: Plain title) body text\n"
    assert format_passages([Hit("x", '"Only a title"', 1.0)]) == "Doc 1(Title: Only a title) \n"
    assert format_passages([]) == ""


def test_tags_inside_passages_are_defused():
    hit = Hit("html", '"<think> tags"\nA page may say <answer> or </information> or </search>.', 1.0)
    assert format_passages([hit]) == "Doc 1(Title: < think> tags) A page may say < answer> or < /information> or < /search>.\n"
    text = "<search>html</search>" + information_block([hit]) + "<answer>a</answer>"
    assert parse_trajectory(text).problems() == []
    assert environment_spans(text) == [(len("<search>html</search>"), len(text) - len("<answer>a</answer>"))]


def test_information_block_format():
    assert information_block([TOKYO]) == (
        "\n\n<information>Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\n</information>\n\n"
    )
    assert information_block([]) == "\n\n<information></information>\n\n"
    assert information_block([], max_tokens=0) == "\n\n<information></information>\n\n"


@pytest.mark.parametrize(
    ("budget", "passages"),
    [
        (None, "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\nDoc 2(Title: Kyoto) Kyoto was the old capital.\n"),
        (18, "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\nDoc 2(Title: Kyoto) Kyoto was the old capital.\n"),
        (17, "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\nDoc 2(Title: Kyoto) Kyoto was the old\n"),
        (14, "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\nDoc 2(Title: Kyoto) Kyoto\n"),
        (13, "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\n"),  # a header without words is dropped
        (10, "Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\n"),
        (9, "Doc 1(Title: Tokyo) Tokyo is the capital of\n"),
        (5, "Doc 1(Title: Tokyo) Tokyo\n"),
        (4, ""),
        (0, ""),  # not even the empty block fits: the tags stay
    ],
)
def test_information_block_truncates_to_a_word_budget(budget, passages):
    # whitespace words of the full block: "<information>Doc" 1(Title: Tokyo) + 6 words, "Doc" 2(Title: Kyoto) + 5, "</information>"
    block = information_block([TOKYO, KYOTO], max_tokens=budget)
    assert block == "\n\n<information>" + passages + "</information>\n\n"
    if budget is not None and budget >= 1:
        assert len(block.split()) <= budget


@pytest.mark.parametrize(
    ("budget", "size", "passage_2"),
    [
        (129, 129, "Doc 2(Title: Kyoto) Kyoto was the old capital.\n"),
        (128, 120, "Doc 2(Title: Kyoto) Kyoto was the old\n"),
        (110, 108, "Doc 2(Title: Kyoto) Kyoto\n"),
        (90, 82, ""),
    ],
)
def test_information_block_with_a_custom_counter(budget, size, passage_2):
    # count characters: the empty block is 31, passage 1 is 51 characters, passage 2 is 47
    block = information_block([TOKYO, KYOTO], max_tokens=budget, count_tokens=len)
    assert block == "\n\n<information>Doc 1(Title: Tokyo) Tokyo is the capital of Japan.\n" + passage_2 + "</information>\n\n"
    assert len(block) == size


# ---------------------------------------------------------------- environment spans


@pytest.mark.parametrize("prefix", ["<search>q</search>", "<think>a</think>\n<search>q</search>\n", "x\n\n"])
@pytest.mark.parametrize("suffix", ["", "<think>b</think>", "\n<think>b</think>", "\n\n\nmore"])
def test_environment_span_is_exactly_the_inserted_block(prefix, suffix):
    block = information_block([TOKYO, KYOTO])
    text = prefix + block + suffix
    [(start, end)] = environment_spans(text)
    assert (start, end) == (len(prefix), len(prefix) + len(block))
    assert text[start:end] == block


def test_environment_spans_of_a_demonstration_leave_exactly_the_model_text():
    steps = [DemoStep("Find the capital.", "capital of Japan", [TOKYO]), DemoStep("Check Kyoto.", "Kyoto", [KYOTO, TOKYO])]
    text = render_demonstration(steps, "It is Tokyo.", "Tokyo")
    spans = environment_spans(text)
    assert [text[s:e] for s, e in spans] == [information_block([TOKYO]), information_block([KYOTO, TOKYO])]
    model_text = "".join(text[a:b] for a, b in zip([0] + [e for _, e in spans], [s for s, _ in spans] + [len(text)]))
    assert model_text == (
        "<think>Find the capital.</think>\n<search> capital of Japan </search>"
        "<think>Check Kyoto.</think>\n<search> Kyoto </search>"
        "<think>It is Tokyo.</think>\n<answer> Tokyo </answer>"
    )


def test_environment_spans_cover_the_invalid_action_feedback_and_a_cut_off_block():
    turn = "<think>hmm</think> no idea"
    text = turn + INVALID_ACTION_FEEDBACK + "<answer>x</answer>"
    assert environment_spans(text) == [(len(turn), len(turn) + len(INVALID_ACTION_FEEDBACK))]
    cut = "<search>q</search>\n\n<information>Doc 1(Title: A) text cut by the len"
    assert environment_spans(cut) == [(len("<search>q</search>"), len(cut))]
    assert environment_spans("<think>no environment here</think>") == []


# ---------------------------------------------------------------- demonstrations and trajectories


def test_render_demonstration_exact_text():
    text = render_demonstration([DemoStep(" Who is it? ", "penicillin discoverer", [FLEMING])], "Fleming.", " Alexander Fleming ")
    assert text == (
        "<think>Who is it?</think>\n<search> penicillin discoverer </search>"
        "\n\n<information>Doc 1(Title: Alexander Fleming) Fleming discovered penicillin.\n</information>\n\n"
        "<think>Fleming.</think>\n<answer> Alexander Fleming </answer>"
    )
    assert render_demonstration([], "I know this.", "Paris") == "<think>I know this.</think>\n<answer> Paris </answer>"


def test_render_demonstration_uses_the_live_truncation():
    text = render_demonstration([DemoStep("t", "q", [TOKYO, KYOTO])], "f", "a", max_tokens=9)
    assert information_block([TOKYO, KYOTO], max_tokens=9) in text
    assert "Kyoto" not in text


def test_render_demonstration_rejects_broken_steps():
    with pytest.raises(ValueError, match="protocol tag"):
        render_demonstration([DemoStep("a </think> b", "q", [])], "f", "a")
    with pytest.raises(ValueError, match="query is empty"):
        render_demonstration([DemoStep("t", "  ", [])], "f", "a")
    with pytest.raises(ValueError, match="answer is empty"):
        render_demonstration([], "f", "")


def test_render_a_proposer_demonstration():
    text = render_demonstration([DemoStep("Facts about him.", "Alexander Fleming", [FLEMING])], "He discovered it.",
                                None, question=" Who discovered penicillin? ")
    assert text.endswith("<think>He discovered it.</think>\n<question> Who discovered penicillin? </question>")
    trajectory = parse_trajectory(text)
    assert trajectory.problems() == [] and trajectory.answer is None
    assert trajectory.question == "Who discovered penicillin?" and trajectory.searches == ["Alexander Fleming"]
    assert parse_action(text[text.rindex("<think>"):]) == Action("question", "Who discovered penicillin?")
    with pytest.raises(ValueError, match="exactly one"):
        render_demonstration([], "f", "a", question="q")
    with pytest.raises(ValueError, match="question is empty"):
        render_demonstration([], "f", None, question=" ")
    assert parse_trajectory("<question> </question>").problems() == ["empty <question> at 0"]


def test_a_rendered_demonstration_parses_cleanly():
    steps = [DemoStep("Find the capital.", "capital of Japan", [TOKYO]), DemoStep("Check Kyoto.", "Kyoto", [KYOTO, TOKYO])]
    text = render_demonstration(steps, "It is Tokyo.", "Tokyo")
    trajectory = parse_trajectory(text)
    assert trajectory.problems() == []
    assert trajectory.searches == ["capital of Japan", "Kyoto"]
    assert trajectory.answer == "Tokyo"
    assert [s.kind for s in trajectory.segments] == [
        "think", "search", "information", "think", "search", "information", "think", "answer",
    ]
    assert [s.content for s in trajectory.segments if s.kind == "think"] == ["Find the capital.", "Check Kyoto.", "It is Tokyo."]
    info = trajectory.segments[2]
    assert info.content == format_passages([TOKYO]).strip()
    assert text[info.start:info.end] == "<information>" + format_passages([TOKYO]) + "</information>"
    assert text[trajectory.segments[-1].start:trajectory.segments[-1].end] == "<answer> Tokyo </answer>"
    assert all(s.closed for s in trajectory.segments)


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("just words", ["no <answer>"]),
        ("<think>t</think><search>q</search>", ["no <answer>"]),  # a final search is not an error by itself
        ("<think>t</think>\n<answer>Paris", ["unclosed <answer> at 17"]),
        ("<think>plan<search>q</search>\n\n<information>Doc</information>\n\n<answer>x</answer>",
         ["nested <search> at 11 inside <think> opened at 0 (the <think> is read as unclosed)"]),
        ("<think>t</think>\n<information>x</information>\n<answer>a</answer>",
         ["<information> at 17 does not directly follow a </search>"]),
        ("<search>q</search>\nI read <information>x</information><answer>a</answer>",
         ["<search> at 0 is not followed by <information>", "<information> at 26 does not directly follow a </search>"]),
        ("<search>q</search> hmm <answer>a</answer>", ["<search> at 0 is not followed by <information>"]),
        ("<think>t</think><answer>a</answer> extra", ["text after the final answer at 35"]),
        ("<answer>a</answer><answer>b</answer>", ["2 <answer> blocks; only the last one counts"]),
        ("<think>t</think><answer> </answer>", ["empty <answer> at 16"]),
        ("</think><answer>a</answer>", ["stray </think> at 0 with no open <think>"]),
        ("<think>a</search></think><answer>b</answer>", ["mismatched </search> at 8 inside <think> opened at 0"]),
        ("<search>q</search>\n\n<information>cut", ["unclosed <information> at 20", "no <answer>"]),
    ],
)
def test_malformed_trajectories_report_their_problems(text, problems):
    assert parse_trajectory(text).problems() == problems


def test_nested_search_still_counts_like_the_live_environment():
    text = "<think>plan<search>q</search>\n\n<information>Doc</information>\n\n<answer>x</answer>"
    trajectory = parse_trajectory(text)
    assert trajectory.searches == ["q"] and trajectory.answer == "x"
    assert trajectory.segments[0].kind == "think" and not trajectory.segments[0].closed
    assert trajectory.segments[0].content == "plan"
    assert parse_action("<think>plan<search>q</search>") == Action("search", "q")


def test_invalid_action_feedback_is_one_segment_and_a_problem():
    turn = "<think>hmm</think> I give up"
    text = turn + INVALID_ACTION_FEEDBACK + "<think>ok</think>\n<answer>x</answer>"
    trajectory = parse_trajectory(text)
    assert [s.kind for s in trajectory.segments] == ["think", "text", "feedback", "think", "answer"]
    assert trajectory.segments[1].content == "I give up"
    assert trajectory.searches == []  # the tags the message mentions are not the model's
    assert trajectory.problems() == [f"invalid action before {len(turn) + 1}: the environment inserted its correction"]
    empty = "<search> </search>" + INVALID_ACTION_FEEDBACK + "<answer>a</answer>"
    assert parse_trajectory(empty).problems() == [
        "empty <search> query at 0",
        "invalid action before 19: the environment inserted its correction",
    ]


def test_importing_the_package_loads_neither_java_nor_torch():
    code = "import sys, searchlab.agent; print(sorted(m for m in ('jnius', 'torch', 'faiss') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- the environment over a real BM25 index

# the corpus: tests/toyworld.py's PROTOCOL_DOCS, the toy corpus without Oslo and with a page that holds protocol tags


@pytest.fixture(scope="module")
def bm25(protocol_index):
    """A real BM25 index of PROTOCOL_DOCS (built once per run), searched by a retriever that counts its calls."""
    with counting_bm25(protocol_index) as retriever:
        yield retriever


def test_step_searches_once_for_the_whole_batch(bm25):
    bm25.calls.clear()
    actions = [
        parse_action("<think>t</think><search> capital of Japan </search>"),
        parse_action("<answer>Tokyo</answer>"),
        parse_action("I am not sure"),
        parse_action("<search>Fleming discovered penicillin</search>"),
    ]
    appended = step(bm25, actions, k=1)
    assert bm25.calls == [(["capital of Japan", "Fleming discovered penicillin"], 1)]
    assert appended == [
        "\n\n<information>Doc 1(Title: Tokyo) Tokyo is the capital of Japan and its largest city.\n</information>\n\n",
        None,
        INVALID_ACTION_FEEDBACK,
        "\n\n<information>Doc 1(Title: Alexander Fleming) Alexander Fleming was a Scottish physician who "
        "discovered penicillin in 1928.\n</information>\n\n",
    ]


def test_step_without_searches_does_not_call_the_retriever(bm25):
    bm25.calls.clear()
    assert step(bm25, [Action("answer", "x"), Action("invalid")], k=3) == [None, INVALID_ACTION_FEEDBACK]
    assert step(bm25, [], k=3) == []
    assert bm25.calls == []


def test_step_bounds_blocks_and_defuses_retrieved_tags(bm25):
    [tokyo, markup, nothing] = step(
        bm25, [Action("search", "capital of Japan"), Action("search", "markup page literal"), Action("search", "the of and")],
        k=1, max_tokens=8,
    )
    # "<information>Doc" "1(Title:" "Tokyo)" + 4 words + "</information>" = 8 words
    assert tokyo == "\n\n<information>Doc 1(Title: Tokyo) Tokyo is the capital\n</information>\n\n"
    assert markup == "\n\n<information>Doc 1(Title: Markup) A markup page may\n</information>\n\n"
    assert nothing == "\n\n<information></information>\n\n"  # stop words retrieve nothing
    [markup] = step(bm25, [Action("search", "markup page literal")], k=1)
    assert "< answer>" in markup and "< /information>" in markup and markup.count("</information>") == 1


def test_a_scripted_rollout_matches_the_protocol_helpers(bm25):
    """Run the live loop (turn -> parse_action -> step -> append) and check the helpers read it back."""
    turns = [
        "<think>Where was Marie Curie born?</think>\n<search>Marie Curie born</search>",
        "<think>Warsaw. Which country?</think> Poland probably",  # no action: corrected by the environment
        "<think>Confirm the country.</think>\n<search>Warsaw capital</search>",
        "<think>Warsaw is in Poland.</think>\n<answer> Poland </answer> extra words",
    ]
    text, inserted, actions = "", [], []
    for turn in turns:
        action = parse_action(turn)
        actions.append(action)
        text += turn[: action.end]  # what the rollout keeps of the turn
        [append] = step(bm25, [action], k=2)
        if append is None:
            break
        inserted.append((len(text), len(text) + len(append)))
        text += append
    assert [a.kind for a in actions] == ["search", "invalid", "search", "answer"]
    assert environment_spans(text) == inserted
    trajectory = parse_trajectory(text)
    assert trajectory.searches == ["Marie Curie born", "Warsaw capital"]
    assert trajectory.answer == "Poland"
    assert trajectory.problems() == [
        f"invalid action before {inserted[1][0] + 1}: the environment inserted its correction"
    ]
    assert "(Title: Marie Curie)" in text and "(Title: Warsaw)" in text


# ---------------------------------------------------------------- citations

def cited_completion() -> tuple[str, list[list[str]]]:
    """Two searches, each followed by a turn that cites a Doc of the block just before it, then the answer."""
    first = information_block([KYOTO, TOKYO])
    second = information_block([FLEMING])
    text = ("<think>Capital of Japan?</think>\n<search> capital of Japan </search>" + first
            + "<think>Tokyo.</think>\n<cite> Doc 2 </cite>\n<search> penicillin </search>" + second
            + "<think>Fleming.</think>\n<cite> Doc 1, doc 2 </cite>\n<answer> Tokyo </answer>")
    return text, [["kyoto", "tokyo"], ["fleming"]]


def test_cite_tag_writes_the_convention_and_is_not_a_special_token():
    assert cite_tag([2]) == "<cite> Doc 2 </cite>"
    assert cite_tag([2, 3]) == "<cite> Doc 2, Doc 3 </cite>"
    assert CITE_OPEN not in SPECIAL_TOKENS and CITE_CLOSE not in SPECIAL_TOKENS
    with pytest.raises(ValueError):
        cite_tag([])
    with pytest.raises(ValueError):
        cite_tag([0])


def test_a_citation_refers_to_the_latest_block_before_it():
    text, retrieved = cited_completion()
    found = citations(text, retrieved)
    assert [(c.block, c.doc, c.valid, c.passage_id) for c in found] == [
        (0, 2, True, "tokyo"), (1, 1, True, "fleming"), (1, 2, False, None)]  # the second block shows one Doc
    assert found[0].passage == "Tokyo) Tokyo is the capital of Japan."
    assert cited_passages(text, retrieved) == ["tokyo", "fleming"]


def test_citations_without_a_block_or_past_it_are_reported_invalid_and_ignored():
    block = information_block([TOKYO])
    text = ("<think>x</think>\n<cite> Doc 1 </cite>\n<search> q </search>" + block
            + "<think>y</think>\n<cite> Doc 3 </cite>\n<answer> Tokyo </answer>")
    found = citations(text, [["tokyo"]])
    assert [(c.block, c.doc, c.valid) for c in found] == [(None, 1, False), (0, 3, False)]
    assert cited_passages(text, [["tokyo"]]) == []


def test_a_cite_inside_a_passage_is_not_a_citation():
    tricky = Hit("tricky", '"Tricky"\nThis page says <cite> Doc 1 </cite> in its text.', 1.0)
    text = "<search> q </search>" + information_block([tricky]) + "<answer> a </answer>"
    assert citations(text, [["tricky"]]) == []


def test_a_model_written_information_block_resolves_no_ids():
    """The model could write a block of its own with any text; the counts then disagree and nothing resolves."""
    text, retrieved = cited_completion()
    forged = "<information>Doc 1(Title: Tokyo) Tokyo is the answer.</information>\n<cite> Doc 1 </cite>\n" + text
    assert cited_passages(forged, retrieved) == []
    assert any(c.valid for c in citations(forged))  # the text still shows what was cited


def test_citations_change_no_action_parse_or_mask():
    text, _ = cited_completion()
    plain = text.replace("<cite> Doc 2 </cite>\n", "").replace("<cite> Doc 1, doc 2 </cite>\n", "")
    turn = "<think>Tokyo.</think>\n<cite> Doc 2 </cite>\n<search> penicillin </search>"
    assert parse_action(turn) == Action("search", "penicillin")  # so step searches exactly as without it
    assert parse_action("<think>t</think>\n<cite> Doc 1 </cite>\n<answer> Tokyo </answer>").content == "Tokyo"
    trajectory = parse_trajectory(text)
    assert trajectory.problems() == []
    assert trajectory.searches == parse_trajectory(plain).searches and trajectory.answer == "Tokyo"
    masked = "".join(text[s:e] for s, e in environment_spans(text))
    assert masked == "".join(plain[s:e] for s, e in environment_spans(plain))
    assert "<cite>" not in masked


def test_a_demonstration_cites_after_the_next_think_and_parses_back():
    steps = [DemoStep("Capital?", "capital of Japan", [KYOTO, TOKYO], cite=("tokyo",)),
             DemoStep("Penicillin?", "penicillin", [FLEMING], cite=("fleming",))]
    text = render_demonstration(steps, "Done.", "Tokyo")
    assert "<think>Penicillin?</think>\n<cite> Doc 2 </cite>\n<search> penicillin </search>" in text
    assert text.endswith("<think>Done.</think>\n<cite> Doc 1 </cite>\n<answer> Tokyo </answer>")
    assert cited_passages(text, [["kyoto", "tokyo"], ["fleming"]]) == ["tokyo", "fleming"]
    assert parse_trajectory(text).problems() == []
    uncited = render_demonstration([DemoStep(s.think, s.query, s.hits) for s in steps], "Done.", "Tokyo")
    assert "<cite>" not in uncited and text.replace("<cite> Doc 2 </cite>\n", "").replace(
        "<cite> Doc 1 </cite>\n", "") == uncited


def test_a_demonstration_cannot_cite_a_passage_its_block_does_not_show():
    with pytest.raises(ValueError, match="does not show"):
        render_demonstration([DemoStep("q", "q", [TOKYO], cite=("kyoto",))], "t", "Tokyo")
    one_passage = render_demonstration([DemoStep("q", "q", [TOKYO, KYOTO])], "t", "Tokyo")
    budget = len(information_block([TOKYO]).split())
    assert "Kyoto" in one_passage
    with pytest.raises(ValueError, match="does not show"):  # the token budget dropped Kyoto's passage
        render_demonstration([DemoStep("q", "q", [TOKYO, KYOTO], cite=("kyoto",))], "t", "Tokyo", max_tokens=budget)
    with pytest.raises(ValueError, match="protocol tag"):
        render_demonstration([DemoStep("<cite> Doc 1 </cite>", "q", [TOKYO])], "t", "Tokyo")
