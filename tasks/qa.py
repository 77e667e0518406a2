"""The qa stage: the training questions, as ``data/qa/``: synthesized from the corpus's KB (BMGQ-style, with
demonstrations and held-out questions), or read from labeled files with a leakage check against the evaluated
benchmarks and demonstrations made by searching them (``qa.source``)."""

from pathlib import Path

from searchlab.corpus.kb import missing_kb
from searchlab.labeled.questions import import_questions
from searchlab.params import Params
from searchlab.retrieval import open_retriever
from searchlab.synth.pipeline import synthesize
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    if p.qa.source == "files":  # the demonstrations search the index the agent will search
        with open_retriever(p.retriever, ctx.inputs["index"]) as retriever:
            return import_questions(p.qa, p.eval.benchmarks, ctx.root, ctx.out_dir, retriever)
    return synthesize(p.qa, p.retriever, ctx.inputs["corpus"], ctx.inputs["index"], ctx.out_dir, ctx.work_dir)


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """The question files (``qa.source: files``) and the benchmark files they are checked against, labelled with
    their params key and format (a changed format rereads them); a missing one is a ValueError naming the key."""
    if params.qa.source != "files":
        return {}
    files = {f"qa.files.{name}": spec for name, spec in params.qa.files.items()}
    files.update({f"eval.benchmarks.{name}": spec for name, spec in params.eval.benchmarks.items()})
    inputs = {}
    for key, spec in files.items():
        path = root / spec.path
        if not path.is_file():
            raise ValueError(f"{key}.path: no such file: {path}")
        inputs[f"{key} ({spec.format})"] = path
    return inputs


def rules(params: Params):
    """Synthesis needs a knowledge base."""
    no_kb = missing_kb(params.corpus.source)
    if params.qa.source == "synthesis" and no_kb:
        yield "qa.source", (f"synthesis builds questions from a knowledge base, and {no_kb}; read labeled questions "
                            "instead (qa.source: files, qa.files)")


STAGE = Stage(
    name="qa",
    description="The training questions: synthesized from the KB (verified multi-hop questions, demonstrations, "
                "held-out questions), or read from labeled files without the questions evaluation uses",
    upstream=lambda params: ("corpus", "index"),  # synthesis reads the KB; both search the index for demonstrations
    # qa.files' samples and seeds are in the qa section; benchmark files enter as external inputs
    reads=("qa", "retriever"),
    build=_build,
    reports=("datasheet.md", "stats.json", "overlap.json"),
    external=external_inputs,
    rules=rules,
)
