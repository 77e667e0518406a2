"""The evaluation results for people: a Markdown report, a chart of EM and a chart of searches per question.

The evaluation stage keeps its results as one JSON-ready dict (also written as ``data/eval/metrics.json``)::

    {"benchmarks": {name: {"questions": n,
                           "systems": {"<model>/<system>": summarize(records)},      # searchlab.eval.metrics
                           "comparisons": {"<a> vs <b>": compare(a, b, "em")}}},    # may be empty
     "throughput": {"<model>/<system>": {"questions_per_s": q}}}                      # may be missing

:func:`results_table` and :func:`write_report` render it as Markdown (with one line per system saying how it was
run, passed apart from the results because it is words, not metrics), :func:`plot_em` draws EM with its 95%
intervals, and :func:`plot_search_counts` shows how many searches each system made per question. Every file is
written atomically (a temporary file in the same folder, then :func:`os.replace`), so a crash leaves the old file
or the new one, never half of one.

The charts are drawn on :class:`matplotlib.figure.Figure` with the Agg canvas directly rather than through
``pyplot``: no display is needed, no process-wide backend is switched on import, and no global figure registry
keeps a figure alive after its function returns (so there is nothing left to close).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from searchlab.files import write_atomically

MISSING = "–"
SIGNIFICANCE = 0.05
DPI = 120

# The columns after EM: (metric, heading, format). Scores keep two decimals, costs one or two.
OTHER_COLUMNS = (
    ("f1", "F1", "{:.2f}"),
    ("cover_em", "cover-EM", "{:.2f}"),
    ("found_evidence", "evidence", "{:.2f}"),
    ("searches", "searches", "{:.2f}"),
    ("turns", "turns", "{:.2f}"),
    ("generated_tokens", "tokens", "{:.1f}"),
)


# ---------------------------------------------------------------------- Markdown
def _row(cells: Iterable[object]) -> str:
    """One Markdown table row; a ``|`` inside a cell is escaped so it cannot split the cell."""
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def _mean_cell(summary: dict[str, dict[str, float]], metric: str, template: str) -> str:
    """The metric's mean, formatted, or a dash where the system was not measured on it (no evidence listed)."""
    return template.format(summary[metric]["mean"]) if metric in summary else MISSING


def _em_cell(summary: dict[str, dict[str, float]]) -> str:
    """EM as ``0.45 [0.33, 0.58]``: the mean and its 95% interval."""
    if "em" not in summary:
        return MISSING
    em = summary["em"]
    return f"{em['mean']:.2f} [{em['low']:.2f}, {em['high']:.2f}]"


def results_table(results: dict) -> str:
    """Every (benchmark, system) as one row of a Markdown table: n, EM with its 95% interval, the other means."""
    header = ["benchmark", "system", "n", "EM [95% CI]", *(heading for _, heading, _ in OTHER_COLUMNS)]
    lines = [_row(header), _row(["---", "---", *["---:"] * (len(header) - 2)])]
    for benchmark, entry in results["benchmarks"].items():
        for system, summary in entry["systems"].items():
            means = [_mean_cell(summary, metric, template) for metric, _, template in OTHER_COLUMNS]
            lines.append(_row([benchmark, system, entry["questions"], _em_cell(summary), *means]))
    return "\n".join(lines)


def _p_value(p: float) -> str:
    # Four significant digits rather than fixed decimals, so a p of 0.04998 never reads as "0.050" beside "yes".
    return f"{p:.4g}"


def _paired_tests(results: dict) -> list[str]:
    """The paired EM tests of every benchmark as a Markdown table, or a line saying there were none."""
    tests = [(benchmark, name, test) for benchmark, entry in results["benchmarks"].items()
             for name, test in (entry.get("comparisons") or {}).items()]
    if not tests:
        return ["No paired tests were run."]
    lines = ["EM of the first system minus the second on the same questions; two-sided paired bootstrap p-value.",
             "",
             _row(["benchmark", "comparison", "difference [95% CI]", "p-value", f"significant at {SIGNIFICANCE}"]),
             _row(["---", "---", "---:", "---:", "---"])]
    for benchmark, name, test in tests:
        difference = f"{test['difference']:+.2f} [{test['low']:+.2f}, {test['high']:+.2f}]"
        significant = "yes" if test["p_value"] < SIGNIFICANCE else "no"
        lines.append(_row([benchmark, name, difference, _p_value(test["p_value"]), significant]))
    return lines


def _throughput(throughput: dict[str, dict[str, float]]) -> list[str]:
    """Questions answered per second, per system, as a Markdown table."""
    lines = [_row(["system", "questions/s"]), _row(["---", "---:"])]
    lines += [_row([system, f"{rates['questions_per_s']:.2f}"]) for system, rates in throughput.items()]
    return lines


def write_report(path: Path, results: dict, title: str = "Evaluation",
                 systems: Mapping[str, str] | None = None) -> None:
    """Write ``report.md``: the title, how each system was run, the results table, the paired EM tests, then the
    throughput if measured.

    ``systems`` maps a system's name (``"rag"``, the part after the model in the results' keys) to one line saying
    how it was run (:func:`searchlab.eval.systems.describe`); without it that section is left out.
    """
    legend = ("Means per question. n: questions; EM with its 95% bootstrap interval; evidence: share of questions "
              f"whose searches retrieved every evidence passage ({MISSING} where the benchmark lists none).")
    lines = [f"# {title}", ""]
    if systems:
        lines += ["How each system was run:", "", *(f"- {name}: {how}" for name, how in systems.items()), ""]
    lines += [legend, "", results_table(results), "", "## Paired tests (EM)", "", *_paired_tests(results)]
    if results.get("throughput"):
        lines += ["", "## Throughput", "", *_throughput(results["throughput"])]
    # Rendered in full before the file is opened: a bad result raises here and the old report stays.
    text = "\n".join(lines) + "\n"
    write_atomically(path, lambda out: out.write(text.encode("utf-8")))


# ---------------------------------------------------------------------- charts
def _new_figure(width: float, height: float) -> Figure:
    """A figure drawn by Agg alone (see the module docstring for why not pyplot)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself as figure.canvas
    return figure


def _system_keys(groups: Iterable[Iterable[str]]) -> list[str]:
    """Every system key in order of first appearance, so each keeps one colour and one bar slot everywhere."""
    return list(dict.fromkeys(key for group in groups for key in group))


def _bar_offsets(count: int) -> tuple[np.ndarray, float]:
    """Where ``count`` side-by-side bars sit around a group's centre, and their width (the group spans 0.8)."""
    width = 0.8 / count
    return -0.4 + width * (np.arange(count) + 0.5), width


def _save_png(figure: Figure, path: Path) -> None:
    write_atomically(path, lambda out: figure.savefig(out, format="png", dpi=DPI))


def plot_em(results: dict, path: Path) -> None:
    """A PNG of EM per benchmark: one group of bars per benchmark, one bar per system, whiskers the 95% interval.

    A system missing from a benchmark simply has no bar there; its slot stays empty so every system keeps the same
    place and colour in each group.
    """
    benchmarks = results["benchmarks"]
    systems = _system_keys(entry["systems"] for entry in benchmarks.values())
    if not systems:
        raise ValueError("no benchmark has a system to plot")
    offsets, width = _bar_offsets(len(systems))
    figure = _new_figure(width=min(16.0, max(6.0, 2.5 + 0.45 * len(benchmarks) * len(systems))), height=4.5)
    axes = figure.subplots()
    for slot, system in enumerate(systems):
        positions, means, below, above = [], [], [], []
        for group, entry in enumerate(benchmarks.values()):
            if system in entry["systems"]:
                em = entry["systems"][system]["em"]
                positions.append(group + offsets[slot])
                means.append(em["mean"])
                # Error lengths must not be negative; rounding can put a zero-width interval a hair past the mean.
                below.append(max(em["mean"] - em["low"], 0.0))
                above.append(max(em["high"] - em["mean"], 0.0))
        axes.bar(positions, means, width, yerr=[below, above], capsize=3, color=f"C{slot % 10}", label=system)
    axes.set_xticks(range(len(benchmarks)),
                    [f"{name}\n(n={entry['questions']})" for name, entry in benchmarks.items()])
    axes.set_ylim(0, 1)
    axes.set_ylabel("exact match (EM)")
    axes.set_title("EM per benchmark (bar: mean, whiskers: 95% bootstrap CI)")
    axes.yaxis.grid(True, alpha=0.3)
    axes.set_axisbelow(True)
    axes.legend(title="model/system", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    _save_png(figure, path)


def plot_search_counts(search_counts: dict[str, dict[str, list[int]]], path: Path) -> None:
    """A PNG of how many searches each system made per question: one panel per benchmark.

    One panel per benchmark rather than all pooled, because single-hop and multi-hop benchmarks call for different
    numbers of searches, and pooling them would blur exactly the behaviour worth seeing. In each panel, every system
    has a bar at 0, 1, 2, ... searches (integer bins, side by side) whose height is the share of that benchmark's
    questions; shares rather than counts so panels of different sizes read on one scale. The panels share the
    x axis. Systems or benchmarks with no counts are left out.
    """
    panels = {benchmark: {system: counts for system, counts in by_system.items() if len(counts)}
              for benchmark, by_system in search_counts.items()}
    panels = {benchmark: by_system for benchmark, by_system in panels.items() if by_system}
    if not panels:
        raise ValueError("no search counts to plot")
    systems = _system_keys(panels.values())
    most = max(max(counts) for by_system in panels.values() for counts in by_system.values())
    bins = np.arange(most + 1)
    offsets, width = _bar_offsets(len(systems))
    figure = _new_figure(width=min(16.0, max(7.0, 3.0 + 0.3 * len(bins) * len(systems))),
                         height=1.0 + 2.6 * len(panels))
    axes_column = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for axes, (benchmark, by_system) in zip(axes_column, panels.items()):
        for slot, system in enumerate(systems):
            if system in by_system:
                # bincount also rejects a negative count, which no episode can have.
                tally = np.bincount(np.asarray(by_system[system], dtype=int), minlength=len(bins))
                axes.bar(bins + offsets[slot], tally / tally.sum(), width, color=f"C{slot % 10}", label=system)
        axes.set_title(benchmark)
        axes.set_ylim(0, 1)
        axes.set_ylabel("share of questions")
        axes.yaxis.grid(True, alpha=0.3)
        axes.set_axisbelow(True)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes_column[-1].set_xlabel("searches per question")
    axes_column[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    _save_png(figure, path)
