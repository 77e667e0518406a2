"""Reinforcement learning of the search agent (the coming ``rl`` stage).

So far its parts that need no trainer: :mod:`searchlab.rl.rewards` (the reward of
one episode, built on :mod:`searchlab.scoring` and the protocol of
:mod:`searchlab.agent`) and :mod:`searchlab.rl.advantages` (Stratified GRPO and
IGPO, the estimators TRL lacks).
"""
