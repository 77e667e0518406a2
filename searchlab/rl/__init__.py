"""Reinforcement learning of the search agent: the ``rl`` stage's library.

:mod:`searchlab.rl.rewards` scores one episode (built on :mod:`searchlab.scoring`
and the protocol of :mod:`searchlab.agent`); :mod:`searchlab.rl.advantages` has
the estimators TRL lacks (Stratified GRPO, IGPO); :mod:`searchlab.rl.curriculum`
chooses each step's questions and retrieval noise; :mod:`searchlab.rl.env`
drives TRL's ``GRPOTrainer`` with the project's rollouts; :mod:`searchlab.rl.train`
is the training run, :mod:`searchlab.rl.worker` its worker process.
"""
