"""Search self-play (SSP): one policy proposes questions that only searching can answer, and learns to solve them.

A *round* (:mod:`searchlab.selfplay.rounds`): the policy, prompted as the
proposer (:func:`searchlab.agent.protocol.proposer_instruction`), searches
around seed answers drawn from the corpus (:mod:`searchlab.selfplay.seeds`)
and ends each episode with a ``<question>``; every proposal is verified
(:mod:`searchlab.selfplay.verify`: the solver must answer it from the
proposer's own passages and not without them, the question must not name its
answer or repeat a kept one; against the knowledge base where there is one,
as a report of how often that check lets a wrong question through); the
policy, as the solver, then plays a group of search episodes per verified
question, and one GRPO step of the rl stage's trainer updates both roles:
the solver rewarded by the exact match of its parsed answer, the proposer by
how hard its verified question was for the solver (``1 - s``, or SSP's
``4s(1 - s)``) and penalised for a proposal that failed verification.
No label from the qa stage's questions is used.
"""
