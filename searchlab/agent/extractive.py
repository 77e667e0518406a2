"""Extractive answers: while the agent writes ``<answer>``, it may only copy text it was shown.

A small model that found the right passage still miscopies what it reads: a
year comes out as another year, a name as a similar name. With
``rollout.extractive_answers`` the answer is decoded under a constraint, as in
span-extraction reading comprehension: the text inside ``<answer>`` must be a
substring of the *sources*, the question and the retrieved passages the episode
has seen (never the model's own thinking, which may already be miscopied).
The model still chooses which span; it can no longer write one that appears
nowhere. Outside ``<answer>`` decoding is untouched.

:class:`ExtractiveAnswers` is a ``transformers`` logits processor. Before each
turn the rollout loop hands it every row's sources (:meth:`begin_turn`); at each
step, for rows inside an open ``<answer>``, it keeps the tokens whose text
extends the answer to a substring of the sources, whitespace, and the closing
tag once the answer is a non-empty substring, and masks the rest. Token texts
are single-token decodes, which is exact for byte-level BPE vocabularies (the
tiny model's, Qwen's, GPT-2's, Llama 3's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchlab.agent.protocol import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    INFORMATION_PREFIX,
    environment_spans,
)


def answer_sources(question: str, shown: str) -> str:
    """The text an extractive answer may copy from: ``question`` and every information block in ``shown``.

    ``shown`` is what the model has read so far (prompt and completion); the
    invalid-action feedback and the model's own turns are not sources.
    """
    # as the environment writes them, set apart by a blank line: the instruction's own mention of the
    # tags ("between <information> and </information>") is not a block
    blocks = [shown[start:end] for start, end in environment_spans(shown)
              if shown[start:end].startswith(INFORMATION_PREFIX)]
    return "\n".join([question, *blocks])


def _occurs(span: str, sources: str, whole: bool) -> bool:
    """Whether ``span`` occurs in ``sources`` starting at a word boundary (and, if ``whole``, ending at one)."""
    at = sources.find(span)
    while at >= 0:
        starts = at == 0 or not sources[at - 1].isalnum() or not span[0].isalnum()
        after = at + len(span)
        ends = after == len(sources) or not sources[after].isalnum() or not span[-1].isalnum()
        if starts and (ends or not whole):
            return True
        at = sources.find(span, at + 1)
    return False


def allows(answer: str, piece: str, sources: str) -> bool:
    """Whether an answer written so far as ``answer`` may continue with the token text ``piece``.

    The answer must be a copy of whole words: it starts where a word of the
    sources starts, and it may close only where one ends ("Dro" of "Dromouth",
    or "6" of "586", cannot be an answer).
    """
    text = answer + piece
    if ANSWER_CLOSE in text:  # closing: the answer before the tag must be a non-empty copy
        core = text[:text.index(ANSWER_CLOSE)].strip()
        return bool(core) and _occurs(core, sources, whole=True)
    if "</" in text:  # a closing tag spelled over several tokens ("</", "answer>"), each beginning with "</"
        for size in range(len(ANSWER_CLOSE) - 1, 1, -1):
            if text.endswith(ANSWER_CLOSE[:size]):
                core = text[:-size].strip()
                return bool(core) and _occurs(core, sources, whole=True)
    core = text.strip()
    if not core:
        return True
    # trailing whitespace ends a word: what came before must be whole
    return _occurs(core, sources, whole=text != text.rstrip())


class ExtractiveAnswers:
    """A logits processor confining each row's open ``<answer>`` to substrings of that row's sources.

    ``begin_turn(sources)`` must be called before every ``generate``: ``sources[r]``
    for row ``r`` of the batch (see :func:`answer_sources`). The first call of a
    turn takes the input width as where the turn's generated tokens start. A
    turn whose prompt already opened the answer (a forced ``<answer>``) is
    announced with ``begin_turn(sources, answer_opened=True)``: its rows are
    inside the answer from their first token, though the tag is not among the
    tokens they generate.
    """

    def __init__(self, tokenizer: Any, pad_id: int) -> None:
        self.tokenizer, self.pad_id = tokenizer, pad_id
        # per row (a batch row, or any key a caller of begin_row_turn uses): its sources, whether its turn opened
        # inside <answer>, its turn's text so far as single-token pieces with the count of tokens it holds, and,
        # once the row opens an answer, its candidate tokens and those by their text's first character
        self.sources: dict[Any, str] = {}
        self.opened: dict[Any, bool] = {}
        self.scanned: dict[Any, tuple[str, int]] = {}
        self.candidates: dict[Any, list[int]] = {}
        self.by_first: dict[Any, dict[str | None, list[int]]] = {}
        self.turn_start: int | None = None
        self._pieces: dict[int, str] = {}
        self._spelled: dict[str, list[int]] = {}  # a word's ids, spelled alone and after a space (see _spell)
        # every answer may close, and words are set apart by spaces
        self._always = set(tokenizer(ANSWER_CLOSE, add_special_tokens=False)["input_ids"])
        self._always |= set(tokenizer(" ", add_special_tokens=False)["input_ids"])

    def _piece(self, token: int) -> str:
        if token not in self._pieces:
            self._pieces[token] = self.tokenizer.decode([token], skip_special_tokens=False,
                                                        clean_up_tokenization_spaces=False)
        return self._pieces[token]

    def begin_turn(self, sources: Sequence[str], answer_opened: bool = False) -> None:
        """Set the rows' sources for the next ``generate`` and the tokens an answer could be spelled with.

        ``answer_opened``: every row's context ends with an ``<answer>`` the turn continues.
        """
        self.sources, self.opened, self.scanned, self.candidates, self.by_first = {}, {}, {}, {}, {}
        self.turn_start = None
        for r, text in enumerate(sources):
            self.begin_row_turn(r, text, answer_opened)

    def begin_row_turn(self, row: Any, sources: str, answer_opened: bool = False) -> None:
        """Set one row's sources for its next turn, before its first token (:meth:`constrain` names rows by the same
        keys, and reads a row's turn as growing from here)."""
        self.sources[row], self.opened[row], self.scanned[row] = sources, answer_opened, ("", 0)
        # the tokens an answer could be spelled with are found when the row opens one (:meth:`_candidates`): most
        # turns search, and tokenizing the sources for each took a tenth of an evaluation
        self.candidates.pop(row, None)
        self.by_first.pop(row, None)

    def _candidates(self, row: Any) -> list[int]:
        """The tokens row ``row``'s answer may be spelled with: those of its sources, each source word spelled alone
        and after a space, the closing tag's and the space's (found once per turn, and grouped by first character)."""
        if row not in self.candidates:
            sources = self.sources[row]
            ids = set(self.tokenizer(sources, add_special_tokens=False)["input_ids"]) | self._always
            # a word may be spelled with or without its leading space, depending on where the answer starts
            words = set(sources.split())
            self._spell(words - self._spelled.keys())
            for word in words:
                ids.update(self._spelled[word])
            self.candidates[row] = sorted(ids)
            self.by_first[row] = self._by_first_character(self.candidates[row])
        return self.candidates[row]

    def _spell(self, words: set[str]) -> None:
        """Keep the ids of each of ``words`` tokenized alone and after a space (words recur over turns and rows)."""
        if not words:
            return
        ordered = sorted(words)
        encoded = self.tokenizer(ordered + [" " + w for w in ordered], add_special_tokens=False)["input_ids"]
        for word, alone, spaced in zip(ordered, encoded, encoded[len(ordered):]):
            self._spelled[word] = alone + spaced

    def _by_first_character(self, candidates: list[int]) -> dict[str | None, list[int]]:
        """``candidates`` grouped by the first character of their text; under None the tokens :meth:`_viable`
        must always check: texts of whitespace alone (or empty), and texts holding ``<`` (a tag)."""
        groups: dict[str | None, list[int]] = {None: []}
        for token in candidates:
            piece = self._piece(token)
            key = None if not piece.strip() or "<" in piece else piece[0]
            groups.setdefault(key, []).append(token)
        return groups

    def _viable(self, r: int, answer: str) -> list[int]:
        """Row ``r``'s candidates that :func:`allows` could accept after ``answer``: a subset it is exact to check.

        When ``answer`` is a non-empty copy with no trailing whitespace and no
        ``<``, a piece that starts with a character ``c`` and is not whitespace
        alone extends it to ``answer.lstrip() + c…``, which can occur in the
        sources only if ``c`` follows an occurrence of ``answer.lstrip()``
        there. Checking ``allows`` on every candidate took most of the
        processor's time.
        """
        candidates = self._candidates(r)
        if not answer or answer[-1].isspace() or "<" in answer:
            return candidates
        copied, sources, groups = answer.lstrip(), self.sources[r], self.by_first[r]
        following, at = set(), sources.find(copied)
        while at >= 0:
            if at + len(copied) < len(sources):
                following.add(sources[at + len(copied)])
            at = sources.find(copied, at + 1)
        return groups[None] + [token for c in following for token in groups.get(c, ())]

    def _open_answer(self, row: Any, generated: list[int]) -> str | None:
        """The answer text row ``row``'s turn has written so far as ``generated``, or None when it is not inside
        ``<answer>``.

        A turn whose single-token pieces hold no ``<answer>`` has not opened one
        (the tag's characters are ASCII, which a byte-level token never splits),
        so the turn is decoded whole only once it has: the pieces are joined as
        the turn grows, where a decode of the whole turn at every step was a
        quarter of this processor's time.
        """
        answer_opened = self.opened[row]
        if not answer_opened:
            pieces, seen = self.scanned[row]
            pieces += "".join(self._piece(t) for t in generated[seen:] if t != self.pad_id)
            self.scanned[row] = (pieces, len(generated))
            if ANSWER_OPEN not in pieces:
                return None
        text = self.tokenizer.decode([t for t in generated if t != self.pad_id], skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)
        if answer_opened:
            text = ANSWER_OPEN + text
        start = text.rfind(ANSWER_OPEN)
        if start < 0 or ANSWER_CLOSE in text[start:]:
            return None
        return text[start + len(ANSWER_OPEN):]

    def constrain(self, rows: Sequence[Any], generated: Sequence[list[int]], scores):
        """Mask ``scores[i]`` (the next token's) to what may extend row ``rows[i]``'s open answer, whose turn has
        generated ``generated[i]`` so far; rows not inside ``<answer>`` are left alone."""
        import torch

        for i, (r, turn) in enumerate(zip(rows, generated)):
            answer = self._open_answer(r, turn)
            if answer is None:
                continue
            allowed = [t for t in self._viable(r, answer) if allows(answer, self._piece(t), self.sources[r])]
            if not allowed:  # nothing in the sources continues it: leave the model free rather than stall
                continue
            keep = torch.zeros(scores.shape[1], dtype=torch.bool, device=scores.device)
            keep[torch.tensor(allowed, device=scores.device)] = True
            scores[i] = torch.where(keep, scores[i], torch.finfo(scores.dtype).min)
        return scores

    def __call__(self, input_ids, scores):
        """The ``generate`` logits processor: every row of the batch, its turn from the first call's width on."""
        if self.turn_start is None:
            self.turn_start = input_ids.shape[1]
        return self.constrain(range(input_ids.shape[0]), input_ids[:, self.turn_start:].tolist(), scores)


def constrained_start(tokenizer: Any, completion_ids: Sequence[int], env_mask: Sequence[int]) -> int | None:
    """Where :class:`ExtractiveAnswers` began constraining an episode: the index in ``completion_ids`` of the
    first token after the ``<answer>`` of its last model turn, or None when that turn opened no answer.

    The processor constrains a row from the first token generated after the
    turn's text contains ``<answer>``, however the tag was split into tokens;
    everything from there to the turn's end (the answer and its closing tag)
    was chosen among the sources' spans, not sampled freely.
    """
    start = len(env_mask)
    while start > 0 and not env_mask[start - 1]:  # back to the start of the last run of model tokens
        start -= 1
    text = ""
    for i in range(start, len(completion_ids)):
        text += tokenizer.decode([completion_ids[i]], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if ANSWER_OPEN in text:
            return i + 1
    return None
