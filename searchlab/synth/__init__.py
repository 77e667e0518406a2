"""QA synthesis (BMGQ-style): verified multi-hop questions, demonstrations and held-out suites from a KB.

Read top to bottom, over the corpus's KB (:mod:`searchlab.corpus.kb`: facts and value
indexes): :mod:`.lexicon` (how predicates are said) → :mod:`.generate` (evidence
clusters and reverse question construction) → :mod:`.solvers` (consensus filter) → :mod:`.demos`
(trajectories through the real retriever) → :mod:`.pipeline` (shards, splits,
outputs) → :mod:`.benchmarks` (the FlashRAG suites) and :mod:`.report`; the qa and benchmarks sections are
:mod:`.config`. Import the modules themselves: this package's face imports nothing, so reading its config does
not load synthesis.
"""
