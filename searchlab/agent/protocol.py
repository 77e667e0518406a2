"""The agent's text protocol (Search-R1's): the one place that writes and reads it.

The model reasons inside ``<think>…</think>``, asks the search engine with
``<search>query</search>``, and finishes with ``<answer>…</answer>``. After each
search the *environment* (not the model) appends the retrieved passages inside
``<information>…</information>``; those characters are never trained on, so
every loss masks them (:func:`environment_spans`). A completion looks like::

    <think>I need to know who discovered penicillin.</think>
    <search>penicillin discovered by</search>

    <information>Doc 1(Title: Penicillin) Alexander Fleming discovered penicillin in 1928 ...
    Doc 2(Title: Antibiotic) ...
    </information>

    <think>Fleming discovered it.</think>
    <answer>Alexander Fleming</answer>

Who uses what:

* prompts: :func:`instruction` (the user message; a chat template wraps it);
* live rollouts (RL, evaluation): generate one model *turn* (stopping after
  ``</search>`` or ``</answer>``, keeping the stop string in the text), read it
  with :func:`parse_action`, then :func:`step` a whole batch: it searches once
  and says what to append (an information block, the invalid-action feedback,
  or ``None`` when the episode is over);
* demonstrations (QA synthesis, SFT): :func:`render_demonstration` writes a
  completion with the very formatting :func:`step` produces live;
* training: :func:`environment_spans` gives the character spans to mask;
* search self-play: the same policy also plays a *proposer*, prompted with
  :func:`proposer_instruction` to search around a given answer and end with
  ``<question>…</question>`` instead of an answer (:func:`parse_action` reads
  it as a ``"question"`` action; :func:`render_demonstration` writes one with
  ``question=``);
* analysis and data checks: :func:`parse_trajectory` splits a whole completion
  into segments and lists its protocol violations;
* citation-aware rewards (CaRR/C-GRPO, :mod:`searchlab.rl.rubric`) and citing
  demonstrations: :func:`citations` / :func:`cited_passages` read the model's
  citations, :func:`cite_tag` writes one.

Citations. The model may back what it says with ``<cite> Doc 2 </cite>``: one
or several ``Doc N`` in one tag (``<cite> Doc 2, Doc 3 </cite>``; "doc"/"Doc",
spaces optional). A citation refers to Doc N of the *most recent information
block before the tag*; it may stand anywhere in the model's own text (after its
``<think>``, inside it, before a search or the answer); tags inside information
blocks are the passages' words, never citations. A citation with no block
before it, or whose N is past the passages that block shows (the token budget
may have cut some), is *invalid*: :func:`citations` reports it (``valid`` is
false) and :func:`cited_passages` ignores it. ``<cite>`` is not a special token
and not a segment of :func:`parse_trajectory` (it is free text there, so it
changes no parse, no action and no mask)::

    <think>Fleming discovered penicillin.</think>
    <cite> Doc 1 </cite>
    <answer> Alexander Fleming </answer>

>>> parse_action("<think>Japan's capital?</think>\\n<search> capital of Japan </search>")
Action(kind='search', content='capital of Japan', end=67)
>>> parse_action("<think>It is Tokyo.</think>\\n<answer> Tokyo </answer>").content
'Tokyo'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from searchlab.corpus.importers import split_contents
from searchlab.retrieval.base import Hit, Retriever
from searchlab.scoring import normalize_answer

# ---------------------------------------------------------------- tags

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SEARCH_OPEN, SEARCH_CLOSE = "<search>", "</search>"
INFORMATION_OPEN, INFORMATION_CLOSE = "<information>", "</information>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
QUESTION_OPEN, QUESTION_CLOSE = "<question>", "</question>"  # the self-play proposer's final action
CITE_OPEN, CITE_CLOSE = "<cite>", "</cite>"  # citations (see the module docstring); not special tokens

#: What ``rollout.prefill`` writes at the start of the model's first turn (an environment token, never trained on).
PREFILLS: dict[str, str] = {"none": "", "think": THINK_OPEN, "search": SEARCH_OPEN}

#: The ten tag strings, in open/close pairs; a tokenizer adds them as special tokens.
SPECIAL_TOKENS: tuple[str, ...] = (
    THINK_OPEN, THINK_CLOSE, SEARCH_OPEN, SEARCH_CLOSE,
    INFORMATION_OPEN, INFORMATION_CLOSE, ANSWER_OPEN, ANSWER_CLOSE, QUESTION_OPEN, QUESTION_CLOSE,
)

# What the environment writes around the passages. The blank lines set the block
# apart from the model's own text; environment_spans relies on these exact strings.
_INFORMATION_LEAD = _INFORMATION_TRAIL = "\n\n"
INFORMATION_PREFIX = _INFORMATION_LEAD + INFORMATION_OPEN
INFORMATION_SUFFIX = INFORMATION_CLOSE + _INFORMATION_TRAIL

#: Appended after a turn that neither searched nor answered (Search-R1's corrective idea, our words). A model that
#: cannot search yet copies what sits between the tags here and in the instruction as its query, whatever it is
#: (measured on SmolLM2: "query" here, "and" for "between <search> and </search>"; docs/results/own-data.md), so
#: the wording keeps Search-R1's placeholder and :func:`copies_the_prompt` counts the copies.
INVALID_ACTION_MESSAGE = (
    "That action was invalid. To search, write <search> query </search>. "
    "To give the final answer, write <answer> answer </answer>. "
    "If needed, think first inside <think> </think>."
)
#: :data:`INVALID_ACTION_MESSAGE` exactly as :func:`step` appends it.
_FEEDBACK_LEAD = _FEEDBACK_TRAIL = "\n"
INVALID_ACTION_FEEDBACK = _FEEDBACK_LEAD + INVALID_ACTION_MESSAGE + _FEEDBACK_TRAIL

_TAG_RE = re.compile(r"<(/?)(think|search|information|answer|question)>")
# The last complete pair: the content may not contain another opening tag, so for
# "<search>a <search>b</search>" the pair is "<search>b</search>" (the inner, latest one).
_ANSWER_RE = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.S)
_SEARCH_RE = re.compile(r"<search>((?:(?!<search>).)*?)</search>", re.S)
_QUESTION_RE = re.compile(r"<question>((?:(?!<question>).)*?)</question>", re.S)
_CITE_RE = re.compile(r"<cite>((?:(?!<cite>).)*?)</cite>", re.S)
_DOC_REF_RE = re.compile(r"\bdoc\s*(\d+)", re.I)
# Where a passage starts inside an information block: the head _passage writes, at a line start.
_PASSAGE_HEAD_RE = re.compile(r"^Doc (\d+)\(Title: ", re.M)


# ---------------------------------------------------------------- prompt


def instruction(question: str) -> str:
    """The user message asking the model to answer ``question`` with the search protocol.

    Kept short because small models read it on every example; it ends with
    ``"Question: {question}\\n"``.
    """
    return (
        "Answer the given question. Reason inside <think> and </think> first, and again each time "
        "you get new information. If you lack some knowledge, search with <search> query </search>; "
        "the results will appear between <information> and </information>. You may search as many "
        "times as you need. When no more information is needed, give the answer inside <answer> and "
        "</answer> without detailed explanation, for example <answer> Beijing </answer>.\n"
        f"Question: {question.strip()}\n"
    )


def copies_the_prompt(query: str) -> bool:
    """Whether ``query`` is made only of words of the instruction's or the correction message's own text (the
    question left out), normalised as answers are: a query with nothing of the question in it, such as the
    placeholder "query" that a model which cannot search yet copies from a protocol example."""
    words = normalize_answer(query).split()
    return bool(words) and all(word in _PROMPT_WORDS for word in words)


def proposer_instruction(answer: str) -> str:
    """The user message asking the self-play *proposer* for a question whose answer is ``answer``.

    The proposer searches with the same protocol as the solver, then ends with
    ``<question> … </question>``: a question that the passages it found answer
    with ``answer``, without naming it. Ends with ``"Answer: {answer}\n"``.
    """
    return (
        "Write a question whose answer is the given answer. Reason inside <think> and </think> first, and "
        "again each time you get new information. Search with <search> query </search> for facts that lead "
        "to the answer; the results will appear between <information> and </information>. Use facts from "
        "several passages if you can, and never write the answer itself in the question. When the facts "
        "are enough, write the question inside <question> and </question>.\n"
        f"Answer: {answer.strip()}\n"
    )


# ---------------------------------------------------------------- passages


def _defuse(text: str) -> str:
    """Break any protocol tag inside retrieved text ("<answer>" -> "< answer>").

    A passage about HTML or about this very protocol could otherwise close the
    information block early, be read as the model's answer, or be tokenized as a
    special token.
    """
    if "<" not in text:
        return text
    return _TAG_RE.sub(lambda m: "< " + m.group(0)[1:], text)


def _title_and_text(contents: str) -> tuple[str, str]:
    """Split a corpus passage ``"Title"\\ntext`` into ``(Title, text)``, with any protocol tag in them defused."""
    title, text = split_contents(contents)
    return _defuse(title), _defuse(text)


def _passage(number: int, title: str, text: str) -> str:
    return f"Doc {number}(Title: {title}) {text}\n"


def format_passages(hits: Sequence[Hit]) -> str:
    """Search-R1's passage list: one ``Doc {i}(Title: {title}) {text}\\n`` line per hit, best first.

    ``title`` is the first line of the hit's contents without its quotes and
    ``text`` the rest. Protocol tags inside passages are broken up (``< answer>``)
    so retrieved text can never pass for the protocol.
    """
    return "".join(_passage(i, *_title_and_text(hit.contents)) for i, hit in enumerate(hits, start=1))


def _count_words(text: str) -> int:
    return len(text.split())


def information_block(
    hits: Sequence[Hit],
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> str:
    """What the environment appends after a search: ``"\\n\\n<information>" + passages + "</information>\\n\\n"``.

    ``passages`` is :func:`format_passages` of ``hits`` (no hits: empty). With
    ``max_tokens``, the *whole returned block* (tags and blank lines included)
    is kept within ``count_tokens(block) <= max_tokens``: whole passages are
    dropped from the last (worst) one, then the first dropped passage comes back
    with as many words of its text as still fit, so the budget is used by the
    best passages. When not even the empty block fits, the empty block is
    returned anyway: the tags are the protocol.

    ``count_tokens`` defaults to counting whitespace-separated words; pass the
    policy's tokenizer (``lambda s: len(tok(s, add_special_tokens=False).input_ids)``)
    to bound real tokens. Truncation assumes a longer text never has fewer tokens.
    """
    count = count_tokens or _count_words

    def block(passages: str) -> str:
        return INFORMATION_PREFIX + passages + INFORMATION_SUFFIX

    parts = [_title_and_text(hit.contents) for hit in hits]

    def first(n: int) -> str:
        return "".join(_passage(i, title, text) for i, (title, text) in enumerate(parts[:n], start=1))

    full = block(first(len(parts)))
    if not parts or max_tokens is None or count(full) <= max_tokens:
        return full

    # the longest run of whole passages that fits (passages are best first, so drop from the end)
    kept = len(parts) - 1
    while kept > 0 and count(block(first(kept))) > max_tokens:
        kept -= 1
    head = first(kept)

    # then as many words of the next passage's text as fit (binary search on the word count)
    title, text = parts[kept]
    words = text.split()

    def with_words(n: int) -> str:
        return block(head + _passage(kept + 1, title, " ".join(words[:n])))

    low, high = 0, len(words)  # with_words(len(words)) is known not to fit
    while low + 1 < high:
        mid = (low + high) // 2
        if count(with_words(mid)) <= max_tokens:
            low = mid
        else:
            high = mid
    # a header with no words carries nothing; keep the passage only if some of its text fits
    if low > 0 and count(with_words(low)) <= max_tokens:
        return with_words(low)
    return block(head)


# ---------------------------------------------------------------- one model turn


@dataclass(frozen=True, slots=True)
class Action:
    """What one model turn asks for.

    ``kind`` is ``"search"`` (``content`` = the query, never empty),
    ``"answer"`` (``content`` = the answer, may be empty), ``"question"`` (a
    self-play proposer's question, may be empty) or ``"invalid"``
    (``content`` empty). ``end`` is where the action ends in the parsed turn
    (just past ``</search>``/``</answer>``; the turn's length for an unclosed
    answer or an invalid turn): a rollout that did not stop generating there can
    cut the turn at ``end``. It is left out of comparisons.
    """

    kind: Literal["search", "answer", "question", "invalid"]
    content: str = ""
    end: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("search", "answer", "question", "invalid"):
            raise ValueError(f"Action kind must be 'search', 'answer', 'question' or 'invalid', got {self.kind!r}")
        if self.kind == "search" and not self.content.strip():
            raise ValueError("a search Action needs a non-empty query")


def _strip_partial_close(content: str, close: str) -> str:
    """Drop a closing tag cut short by the token limit ("Paris </ans" -> "Paris ")."""
    for n in range(len(close) - 1, 1, -1):
        if content.endswith(close[:n]):
            return content[:-n]
    return content


def parse_action(text: str, answer_opened: bool = False) -> Action:
    """Read one model turn: the text generated since the environment last appended something.

    Rules, in order (small models emit all of these):

    1. A complete ``<answer>…</answer>`` makes it an answer; with several, the
       last one wins. Anything after it is ignored. A complete
       ``<question>…</question>`` (the self-play proposer's final action) is
       read the same way, as a ``"question"``; of an answer and a question
       in one turn, the one that closes first ends the turn.
    2. Otherwise the last complete ``<search>…</search>`` makes it a search; an
       empty or whitespace-only query is ``invalid``.
    3. An ``<answer>`` never closed (generation hit EOS or the token limit) and
       not followed by a complete search is an answer: the text after the tag
       (without a half-written ``</answer>``).
    4. Anything else is ``invalid``.

    An answer wins over a search in the same turn: writing ``<answer>`` means the
    model decided to stop, and searching anyway would append passages nobody
    reads and charge the episode another turn. Contents are stripped.

    ``answer_opened``: the turn continues an ``<answer>`` that its context
    already opened (a forced answer, see :func:`searchlab.agent.rollout.rollout`),
    so it is an answer whatever it holds, never a search. It runs to the first
    ``</answer>`` or ``</search>`` (a model trained to search first may close
    its answer with the tag it is used to writing; a rollout's turn stops at
    either), or to the end without a half-written closing tag; when the model
    wrote ``<answer>`` again itself, the answer starts after the last one.
    """
    if answer_opened:
        return _opened_answer(text)
    finals = [(kind, matches[-1]) for kind, pattern in (("answer", _ANSWER_RE), ("question", _QUESTION_RE))
              if (matches := list(pattern.finditer(text)))]
    if finals:
        kind, last = min(finals, key=lambda found: found[1].end())
        return Action(kind, last.group(1).strip(), last.end())
    searches = list(_SEARCH_RE.finditer(text))
    search = searches[-1] if searches else None
    opened = text.rfind(ANSWER_OPEN)
    if opened >= 0 and (search is None or opened >= search.end()):
        content = _strip_partial_close(text[opened + len(ANSWER_OPEN):], ANSWER_CLOSE)
        return Action("answer", content.strip(), len(text))
    if search is not None:
        query = search.group(1).strip()
        return Action("search", query, search.end()) if query else Action("invalid", "", search.end())
    return Action("invalid", "", len(text))


def _opened_answer(text: str) -> Action:
    """:func:`parse_action` of a turn that continues an ``<answer>`` its context opened."""
    closes = [(at, tag) for tag in (ANSWER_CLOSE, SEARCH_CLOSE) if (at := text.find(tag)) >= 0]
    if closes:
        stop, tag = min(closes)
        body, end = text[:stop], stop + len(tag)
    else:
        body, end = _strip_partial_close(_strip_partial_close(text, ANSWER_CLOSE), SEARCH_CLOSE), len(text)
    opened = body.rfind(ANSWER_OPEN)
    content = body[opened + len(ANSWER_OPEN):] if opened >= 0 else body
    return Action("answer", content.strip(), end)


# ---------------------------------------------------------------- the environment


def step(
    retriever: Retriever,
    actions: Sequence[Action],
    k: int,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> list[str | None]:
    """The environment's move for a batch of episodes: per action, the text to append.

    All the search queries go to ``retriever`` in a single ``search`` call (the
    retrievers are built for batches). Returns, aligned with ``actions``: the
    :func:`information_block` of the ``k`` hits (bounded by ``max_tokens`` /
    ``count_tokens``, see there) for a search, :data:`INVALID_ACTION_FEEDBACK`
    for an invalid action, and ``None`` for an answer or a proposer's question
    (the episode is over).
    """
    positions = [i for i, action in enumerate(actions) if action.kind == "search"]
    results = retriever.search([actions[i].content for i in positions], k) if positions else []
    if len(results) != len(positions):
        raise RuntimeError(f"the retriever answered {len(results)} of {len(positions)} queries")
    appended: list[str | None] = [
        INVALID_ACTION_FEEDBACK if action.kind == "invalid" else None for action in actions
    ]
    for i, hits in zip(positions, results):
        appended[i] = information_block(hits, max_tokens, count_tokens)
    return appended


# ---------------------------------------------------------------- demonstrations


@dataclass(frozen=True, slots=True)
class DemoStep:
    """One search step of a demonstration: the reasoning, the query, and what the query retrieved.

    ``cite``: ids of ``hits`` that the *next* turn cites (after its think), the
    passages stating what this step found; empty: no citation.
    """

    think: str
    query: str
    hits: Sequence[Hit]
    cite: Sequence[str] = ()


def _check_demo_text(what: str, value: str) -> str:
    value = value.strip()
    if _TAG_RE.search(value) or CITE_OPEN in value or CITE_CLOSE in value:
        raise ValueError(f"{what} contains a protocol tag: {value!r}")
    return value


def _demo_citation(n: int, demo: DemoStep, block: str) -> str:
    """The ``<cite>`` line for step ``n``'s ``demo.cite`` ids ("" when none), as Doc numbers of its ``block``."""
    if not demo.cite:
        return ""
    ids = [hit.id for hit in demo.hits]
    shown = len(_block_passages(block))
    docs = []
    for passage in demo.cite:
        if passage not in ids or ids.index(passage) >= shown:
            raise ValueError(f"step {n} cites {passage!r}, which its information block does not show")
        docs.append(ids.index(passage) + 1)
    return cite_tag(docs) + "\n"


def render_demonstration(
    steps: Sequence[DemoStep],
    final_think: str,
    answer: str | None,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    *,
    question: str | None = None,
) -> str:
    """A whole completion (everything after the prompt) for supervised training.

    A solver's demonstration ends with ``answer``; a self-play proposer's
    (``answer=None``, ``question=...``) ends with ``<question> q </question>``
    instead, in the same layout.

    Each step renders as ``<think>…</think>\\n<search> q </search>`` followed by
    :func:`information_block` of its hits, and the end as
    ``<think>…</think>\\n<answer> a </answer>``: spaces inside the tags, as in the
    instruction's own example. That is not cosmetic: a byte-level BPE encodes a
    word differently with and without its leading space (``" Kelmora"`` is one
    token, ``"Kelmora"`` after a tag often several), and the space makes a name
    in a query or an answer the very tokens it is in the question and the
    passages, so the model learns to *copy* it. The information blocks are made by
    the same function as in live rollouts (give the same ``max_tokens`` /
    ``count_tokens``), so demonstrations look exactly like what the environment
    would produce. Texts are stripped; a tag inside them or an empty query or
    answer is a ``ValueError``.

    A step with ``cite`` ids makes the next turn cite them, on a line of its
    own between that turn's think and its search or answer
    (``<think>…</think>\\n<cite> Doc 2 </cite>\\n<search> q </search>``; see
    :func:`cite_tag`); citing a passage the block does not show is a
    ``ValueError``. Without ``cite`` the text is exactly as without citations.
    """
    parts = []
    citation = ""  # the previous step's <cite> line, opening the next turn after its think
    for n, demo in enumerate(steps, start=1):
        think = _check_demo_text(f"step {n}'s think", demo.think)
        query = _check_demo_text(f"step {n}'s query", demo.query)
        if not query:
            raise ValueError(f"step {n}'s query is empty")
        parts.append(f"{THINK_OPEN}{think}{THINK_CLOSE}\n{citation}{SEARCH_OPEN} {query} {SEARCH_CLOSE}")
        block = information_block(demo.hits, max_tokens, count_tokens)
        parts.append(block)
        citation = _demo_citation(n, demo, block)
    if (answer is None) == (question is None):
        raise ValueError("a demonstration ends with an answer or a question: give exactly one")
    final_think = _check_demo_text("final think", final_think)
    what, opening, closing = ("answer", ANSWER_OPEN, ANSWER_CLOSE) if question is None else (
        "question", QUESTION_OPEN, QUESTION_CLOSE)
    final = _check_demo_text(what, answer if question is None else question)
    if not final:
        raise ValueError(f"the {what} is empty")
    parts.append(f"{THINK_OPEN}{final_think}{THINK_CLOSE}\n{citation}{opening} {final} {closing}")
    return "".join(parts)


# ---------------------------------------------------------------- masks


def _feedback_positions(text: str) -> list[int]:
    positions, start = [], text.find(INVALID_ACTION_MESSAGE)
    while start >= 0:
        positions.append(start)
        start = text.find(INVALID_ACTION_MESSAGE, start + len(INVALID_ACTION_MESSAGE))
    return positions


def _widen(text: str, start: int, end: int, prefix: str, suffix: str) -> tuple[int, int]:
    """Grow ``[start, end)`` over as much of ``prefix`` as precedes it and of ``suffix`` as follows it."""
    for n in range(len(prefix), 0, -1):
        if n <= start and text[start - n:start] == prefix[-n:]:
            start -= n
            break
    for n in range(len(suffix), 0, -1):
        if text[end:end + n] == suffix[:n]:
            end += n
            break
    return start, end


def _information_blocks(text: str, feedback: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each ``<information>…</information>`` in ``text``, tags included, in order.

    ``feedback`` are the :data:`INVALID_ACTION_MESSAGE` positions: the tags that
    message names are not blocks. A block never closed runs to the end.
    """
    in_feedback = [(s, s + len(INVALID_ACTION_MESSAGE)) for s in feedback]
    blocks, position = [], 0
    while (start := text.find(INFORMATION_OPEN, position)) >= 0:
        if any(s <= start < e for s, e in in_feedback):
            position = start + len(INFORMATION_OPEN)
            continue
        close = text.find(INFORMATION_CLOSE, start + len(INFORMATION_OPEN))
        end = len(text) if close < 0 else close + len(INFORMATION_CLOSE)
        blocks.append((start, end))
        position = end
    return blocks


def environment_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of everything the environment inserted into ``text``, sorted.

    That is every ``<information>…</information>`` block with the blank lines
    :func:`information_block` puts around it, and every
    :data:`INVALID_ACTION_FEEDBACK`: for ``text = prefix + information_block(hits)
    + suffix`` the span is exactly the inserted block. An ``<information>``
    never closed (a completion cut off by the length limit) runs to the end.
    These are the characters every loss must mask. Live rollouts know their
    insertion offsets already; this recovers them from text alone (for
    demonstrations), so it also masks an information block the model wrote
    itself.
    """
    spans = []
    feedback = _feedback_positions(text)
    for start in feedback:
        end = start + len(INVALID_ACTION_MESSAGE)
        spans.append(_widen(text, start, end, _FEEDBACK_LEAD, _FEEDBACK_TRAIL))
    for start, end in _information_blocks(text, feedback):
        spans.append(_widen(text, start, end, _INFORMATION_LEAD, _INFORMATION_TRAIL))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:  # blank lines shared by two adjacent insertions belong to both
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


# ---------------------------------------------------------------- citations


def cite_tag(docs: Sequence[int]) -> str:
    """The citation of the passages ``docs`` (Doc numbers of the latest information block).

    >>> cite_tag([2, 3])
    '<cite> Doc 2, Doc 3 </cite>'
    """
    if not docs or any(n < 1 for n in docs):
        raise ValueError(f"a citation names one or more Doc numbers >= 1, got {list(docs)}")
    return f"{CITE_OPEN} {', '.join(f'Doc {n}' for n in docs)} {CITE_CLOSE}"


def _block_passages(block: str) -> list[str]:
    """The passages an information block shows, in Doc order, each without its ``Doc N(Title: `` head.

    ``block`` is the block's text, its tags included or not. A passage runs to
    the head of the very next Doc number, so a line in a passage that happens
    to start like a head of another number stays in the passage.
    """
    # the passages start right after the opening tag (not at a line start) and stop at the closing one
    body = block.split(INFORMATION_OPEN, 1)[-1].split(INFORMATION_CLOSE, 1)[0]
    heads, expected = [], 1
    for head in _PASSAGE_HEAD_RE.finditer(body):
        if int(head.group(1)) == expected:
            heads.append(head)
            expected += 1
    ends = [head.start() for head in heads[1:]] + [len(body)]
    return [body[head.end():end].strip() for head, end in zip(heads, ends)]


@dataclass(frozen=True, slots=True)
class Citation:
    """One ``Doc N`` that a ``<cite>`` tag in the model's own text names.

    ``doc`` is N; ``block`` the index (0-based, in completion order) of the most
    recent information block before the tag, ``None`` when there is none;
    ``start`` the tag's offset in the completion. ``passage`` is what that
    block shows as Doc N (``"Title) text"``, the head cut), ``None`` when it
    shows no Doc N. ``passage_id`` is that passage's id, known only when the
    retrieved ids were given (see :func:`citations`).
    """

    doc: int
    block: int | None
    start: int
    passage: str | None
    passage_id: str | None = None

    @property
    def valid(self) -> bool:
        """Whether the citation names a passage the agent was shown."""
        return self.passage is not None


def citations(text: str, retrieved: Sequence[Sequence[str]] | None = None) -> list[Citation]:
    """Every ``Doc N`` cited in a completion, in order, invalid ones included (``valid`` false).

    See the module docstring for the convention. ``retrieved`` (a Rollout's:
    ``retrieved[j]`` = the ids of the ``j``-th information block's passages, Doc 1
    first) fills in ``passage_id`` of the valid citations. That needs one
    retrieved list per information block: when the counts differ (the model
    wrote an ``<information>`` block itself, which can hold any text it likes),
    no citation gets an id, so no forged passage can be resolved.
    """
    feedback = _feedback_positions(text)
    blocks = _information_blocks(text, feedback)
    masked = environment_spans(text)
    shown = [_block_passages(text[start:end]) for start, end in blocks]
    aligned = retrieved is not None and len(retrieved) == len(blocks)
    found = []
    for tag in _CITE_RE.finditer(text):
        if any(s <= tag.start() < e for s, e in masked):
            continue  # inside a passage or the environment's message: not the model's words
        before = [j for j, (_, end) in enumerate(blocks) if end <= tag.start()]
        block = before[-1] if before else None
        for ref in _DOC_REF_RE.finditer(tag.group(1)):
            doc = int(ref.group(1))
            passages = shown[block] if block is not None else []
            passage = passages[doc - 1] if 1 <= doc <= len(passages) else None
            ids = retrieved[block] if aligned and passage is not None else ()
            passage_id = ids[doc - 1] if doc <= len(ids) else None
            found.append(Citation(doc, block, tag.start(), passage, passage_id))
    return found


def cited_passages(text: str, retrieved: Sequence[Sequence[str]]) -> list[str]:
    """The ids of the passages a completion cites, in citation order (repeats kept); invalid citations are ignored.

    ``retrieved`` is the Rollout's (one id list per information block); see :func:`citations`.
    """
    return [c.passage_id for c in citations(text, retrieved) if c.passage_id is not None]


# ---------------------------------------------------------------- whole trajectories

SegmentKind = Literal["think", "search", "information", "answer", "question", "text", "feedback"]


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a completion.

    ``kind`` is a tag name, ``"text"`` for words outside any tag, or
    ``"feedback"`` for the environment's :data:`INVALID_ACTION_MESSAGE`.
    ``start``/``end`` are character offsets into the completion (end exclusive):
    for tags the span runs from the opening tag through the closing one, for
    text and feedback it is the stripped words. ``content`` is the stripped text
    inside the tags. ``closed`` is false for a tag never closed (its span stops
    where the next tag, the feedback or the text begins).
    """

    kind: SegmentKind
    content: str
    start: int
    end: int
    closed: bool = True


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A parsed completion: its :class:`Segment` s in order, and what they amount to."""

    text: str
    segments: tuple[Segment, ...]
    _scan_problems: tuple[str, ...] = field(default=(), repr=False)

    @property
    def searches(self) -> list[str]:
        """The queries of the complete, non-empty searches, in order."""
        return [s.content for s in self.segments if s.kind == "search" and s.closed and s.content]

    @property
    def answer(self) -> str | None:
        """The last answer (also an unclosed one at the end, as :func:`parse_action` reads it), or ``None``."""
        answers = [s for s in self.segments if s.kind == "answer"]
        return answers[-1].content if answers else None

    @property
    def question(self) -> str | None:
        """The last proposed ``<question>`` (a self-play proposer's final action), or ``None``."""
        questions = [s for s in self.segments if s.kind == "question"]
        return questions[-1].content if questions else None

    def problems(self) -> list[str]:
        """Protocol violations, each a sentence naming the character offset; empty for a well-formed completion.

        Reported: unclosed, nested, stray and mismatched tags; an information
        block not right after ``</search>`` (whitespace aside); a search not
        followed by information (unless it ends the completion); an empty query;
        an invalid action the environment had to correct; no answer, an empty
        answer, several answers, or anything after the final answer. Free text
        between tags is tolerated. A proposer's trajectory (one that has a
        ``<question>``) is held to the same rules with its question in place of
        the answer.
        """
        found = list(self._scan_problems)
        segments = self.segments
        for i, seg in enumerate(segments):
            before = segments[i - 1] if i > 0 else None
            after = segments[i + 1] if i + 1 < len(segments) else None
            if seg.kind == "information":
                if before is None or before.kind != "search" or not before.closed:
                    found.append(f"<information> at {seg.start} does not directly follow a </search>")
            elif seg.kind == "search" and seg.closed:
                if not seg.content:
                    found.append(f"empty <search> query at {seg.start}")
                elif after is not None and after.kind != "information":
                    found.append(f"<search> at {seg.start} is not followed by <information>")
            elif seg.kind == "feedback":
                found.append(f"invalid action before {seg.start}: the environment inserted its correction")
        final_kind = "question" if any(seg.kind == "question" for seg in segments) else "answer"
        finals = [i for i, seg in enumerate(segments) if seg.kind in ("answer", "question")]
        if not finals:
            found.append("no <answer>")
        else:
            if len(finals) > 1:
                found.append(f"{len(finals)} <{final_kind}> blocks; only the last one counts")
            final = segments[finals[-1]]
            if not final.content:
                found.append(f"empty <{final.kind}> at {final.start}")
            if finals[-1] + 1 < len(segments):
                found.append(f"text after the final {final.kind} at {segments[finals[-1] + 1].start}")
        return found


def parse_trajectory(text: str) -> Trajectory:
    """Split a whole completion (everything after the prompt) into segments, in order.

    Reading is forgiving so that real rollouts can be analysed: an opening tag
    while another is still open ends the open one there (reported as nested,
    so a ``<search>`` written inside an unclosed ``<think>`` still counts, as it
    did for the live environment), a closing tag with nothing matching open is
    reported and kept as text, and a tag open at the end runs to the end. The
    environment's :data:`INVALID_ACTION_MESSAGE` is one ``"feedback"`` segment
    (the tags it mentions are not parsed). See :meth:`Trajectory.problems`.
    """
    segments: list[Segment] = []
    problems: list[str] = []
    # events in text order: protocol tags outside feedback messages, and the feedback messages
    feedback = [(s, s + len(INVALID_ACTION_MESSAGE)) for s in _feedback_positions(text)]
    events: list[tuple[int, int, str, str]] = [(s, e, "feedback", "") for s, e in feedback]
    for m in _TAG_RE.finditer(text):
        if not any(s <= m.start() < e for s, e in feedback):
            events.append((m.start(), m.end(), "close" if m.group(1) else "open", m.group(2)))
    events.sort()

    cursor = 0  # end of the last segment
    open_tag: tuple[str, int, int] | None = None  # (name, start of the tag, start of its content)

    def add_text(upto: int) -> None:
        gap = text[cursor:upto]
        if gap.strip():
            start = cursor + len(gap) - len(gap.lstrip())
            end = cursor + len(gap.rstrip())
            segments.append(Segment("text", text[start:end], start, end))

    def end_open(end: int, content_end: int, closed: bool) -> None:
        name, start, content_start = open_tag
        segments.append(Segment(name, text[content_start:content_end].strip(), start, end, closed))

    for start, end, event, name in events:
        if event == "feedback":
            if open_tag is not None:
                problems.append(f"unclosed <{open_tag[0]}> at {open_tag[1]} before the invalid-action message")
                end_open(start, start, closed=False)
                open_tag = None
            else:
                add_text(start)
            segments.append(Segment("feedback", INVALID_ACTION_MESSAGE, start, end))
            cursor = end
        elif event == "open":
            if open_tag is not None:
                problems.append(f"nested <{name}> at {start} inside <{open_tag[0]}> opened at {open_tag[1]} "
                                f"(the <{open_tag[0]}> is read as unclosed)")
                end_open(start, start, closed=False)
            else:
                add_text(start)
            open_tag, cursor = (name, start, end), start
        elif open_tag is not None and open_tag[0] == name:
            end_open(end, start, closed=True)
            open_tag, cursor = None, end
        elif open_tag is not None:
            problems.append(f"mismatched </{name}> at {start} inside <{open_tag[0]}> opened at {open_tag[1]}")
        else:
            problems.append(f"stray </{name}> at {start} with no open <{name}>")
    if open_tag is not None:
        problems.append(f"unclosed <{open_tag[0]}> at {open_tag[1]}")
        end_open(len(text), len(text), closed=False)
    else:
        add_text(len(text))
    return Trajectory(text, tuple(segments), tuple(problems))


def _prompt_words() -> frozenset[str]:
    return frozenset(normalize_answer(instruction("") + " " + INVALID_ACTION_MESSAGE).split())


_PROMPT_WORDS = _prompt_words()
