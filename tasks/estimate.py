"""How long each stage of a plan will take on this machine, before it runs.

A stage's *work* is a number its time grows with, read from the params alone
(:func:`work`): passages for the corpus and index, episodes times their token
budget for rollouts and evaluation, steps times tokens for SFT. The time of a
unit comes from the stage's own ``build.json`` where an earlier build of the
stage in this data folder recorded its seconds and its work (this machine's
speed, on this profile's model); where none did, from :data:`CALIBRATION`,
measured on a 2-core CPU (the reference machine) for the tiny model and for
SmolLM2-135M. A cached stage costs nothing. An estimate, not a promise: the
work leaves out what the params cannot tell (how many demonstrations qa will
make, how long the answers are), so it is checked against measured runs in
docs/results/plan-estimate.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from searchlab.params import Params
from tasks.outputs import read_build_record

#: ``(fixed seconds, seconds per unit of work)`` on the reference machine (2 cores, no GPU), by stage and model kind
#: (``tiny``; ``pretrained``: SmolLM2-135M, and anything else): each stage's build.json seconds over its work in a
#: measured run from a fresh clone (docs/results/plan-estimate.md), the demo at a1bf17c for the tiny model and the
#: own-data profile (sft 10 steps, rl 2, 16 test questions) for SmolLM2. The fixed part is what a build costs before
#: its first unit (a JVM, a training worker's start); base is all fixed (its pretraining or conversion follows the
#: model, not the run's params).
CALIBRATION: dict[str, dict[str, tuple[float, float]]] = {
    "corpus": {"tiny": (0.0, 1.5e-5), "pretrained": (0.0, 1.5e-5)},
    "index": {"tiny": (1.5, 0.0), "pretrained": (1.5, 0.0)},
    "qa": {"tiny": (5.6, 0.0), "pretrained": (0.8, 0.0)},
    "benchmarks": {"tiny": (0.1, 0.0), "pretrained": (0.1, 0.0)},
    "base": {"tiny": (177.0, 0.0), "pretrained": (16.4, 0.0)},
    "sft": {"tiny": (20.0, 1.88e-4), "pretrained": (30.0, 2.5e-3)},
    "selfplay": {"tiny": (10.0, 6.3e-5), "pretrained": (30.0, 6.0e-3)},  # pretrained: rl's, scaled as tiny's
    "rl": {"tiny": (20.0, 1.29e-4), "pretrained": (30.0, 1.23e-2)},
    "evaluate": {"tiny": (10.0, 5.6e-5), "pretrained": (10.0, 4.1e-3)},
}


@dataclass(frozen=True)
class Estimate:
    """A stage's expected seconds and what the figure rests on (``cached``, ``earlier build``, ``calibrated``)."""

    seconds: float
    basis: str


def model_kind(params: Params) -> str:
    return "tiny" if params.model.name_or_path == "tiny" else "pretrained"


def work(stage_name: str, params: Params, root: Path) -> float:
    """The units of work of one build of the stage under ``params`` (see the module doc)."""
    rollout = params.rollout
    episode = rollout.max_turns * rollout.max_new_tokens  # the token budget of one search episode
    if stage_name in ("corpus", "index"):
        return _corpus_size(params, root)
    if stage_name == "sft":
        sft = params.sft
        steps = sft.max_steps if sft.max_steps > 0 else sft.epochs * 100  # demonstrations unknown before qa: 100
        return steps * sft.batch_size * sft.grad_accum * sft.max_length
    if stage_name == "rl":
        rl = params.rl
        return rl.steps * rl.questions_per_step * rl.num_generations * episode
    if stage_name == "selfplay":
        play = params.selfplay
        return play.rounds * (play.proposals_per_round + play.solver_questions) * play.num_generations * episode
    if stage_name == "evaluate":
        return _evaluation_tokens(params, root, episode)
    return 1.0


def estimate(stage_name: str, params: Params, root: Path, cached: bool) -> Estimate:
    """The stage's expected seconds on this machine: 0 if cached, else its fixed cost plus its work at the speed of
    the earlier build in this data folder, else at the calibrated speed."""
    if cached:
        return Estimate(0.0, "cached")
    fixed, per_unit = CALIBRATION[stage_name][model_kind(params)]
    units = work(stage_name, params, root)
    record = read_build_record(root / params.runtime.data_dir / stage_name)
    if record.get("work") and record.get("seconds") is not None:
        per_unit = max(record["seconds"] - fixed, 0.0) / record["work"]
        return Estimate(fixed + per_unit * units, "earlier build")
    return Estimate(fixed + per_unit * units, "calibrated")


def _corpus_size(params: Params, root: Path) -> float:
    """Passages: the synthetic world's (about 3.3 per entity), or the input's bytes over 300 (a passage's size)."""
    corpus = params.corpus
    if corpus.source == "synthetic":
        return 3.3 * corpus.world.entities
    path = root / corpus.path if corpus.path else None
    if path is None or not path.exists():
        return 0.0
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size
    return size / 300


def _evaluation_tokens(params: Params, root: Path, episode: int) -> float:
    """The token budget of every evaluated question: questions x models x their systems' budgets."""
    ev = params.eval
    budget = {"direct": params.rollout.max_new_tokens, "rag": params.rollout.max_new_tokens, "agent": episode,
              "sampled": ev.sampling.samples * episode}
    questions = sum(_questions(spec, root) for spec in ev.benchmarks.values())
    if params.qa.source == "synthesis":
        suites = sum(share > 0 for share in params.qa.types.values()) if ev.suites == "all" else len(ev.suites)
        questions += suites * (ev.sample or params.benchmarks.size)
    total = 0.0
    for model in ev.models:
        systems = getattr(model, "systems", None) or ev.systems
        total += questions * sum(budget[system] for system in systems)
    return total


def _questions(spec, root: Path) -> int:
    """A benchmark file's questions: its sample, else its lines (a JSONL file), else 100."""
    if spec.sample:
        return spec.sample
    path = root / spec.path
    if path.suffix == ".jsonl" and path.is_file():
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    return 100
