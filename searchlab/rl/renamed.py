"""Training episodes in a renamed world (``rl.renamed``): what the policy remembers of the corpus's names cannot pay.

The rl stage trains on the qa stage's training questions, whose answers the
sft demonstrations already showed (once under their own names), so a policy
could earn the reward by recalling a remembered name instead of reading. On
the demo the sft policy does answer partly from memory (greedy EM 0.56 on
training questions against 0.34 on held-out ones), but RL was not found to
feed on it, and training in the renamed world did not change held-out EM
(docs/results/rl.md, "Recall or reading?"). The option is for corpora whose
training answers sft has seen: with it, only reading can earn the reward.

Here every step's episodes play in the world under a random permutation of the
corpus titles (:meth:`~searchlab.train.renaming.TitleRenamer.permutation`): the
question, every retrieved passage and the gold answers are renamed, the
agent's queries are restored before they are searched, so BM25 returns exactly
the passages the real names would. Only searching and reading the shown
passages earns the reward.
"""

from __future__ import annotations

import dataclasses

from searchlab.questions.record import QuestionRecord
from searchlab.retrieval.base import Hit, Retriever
from searchlab.train.renaming import TitlePermutation


class RenamedRetriever:
    """``retriever`` seen through ``names``: queries restored to the corpus's names, passages renamed."""

    def __init__(self, retriever: Retriever, names: TitlePermutation) -> None:
        self.retriever, self.names = retriever, names

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        results = self.retriever.search([self.names.restore(q) for q in queries], k)
        return [[dataclasses.replace(hit, contents=self.names.rename(hit.contents)) for hit in hits]
                for hits in results]


def renamed_question(question: QuestionRecord, names: TitlePermutation) -> QuestionRecord:
    """``question`` with its text and gold answers renamed; its ids, evidence and features kept."""
    return dataclasses.replace(question, question=names.rename(question.question),
                               answers=[names.rename(a) for a in question.answers])
