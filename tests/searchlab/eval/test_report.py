"""The Markdown report and the two charts, written to real files and read back (the PNGs by matplotlib itself)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.image import imread

from searchlab.eval.metrics import compare, summarize
from searchlab.eval.report import (
    plot_em,
    plot_search_counts,
    results_table,
    write_report,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _summary(em: tuple[float, float, float], evidence: float | None = None, searches: float = 0.0) -> dict:
    """A ``summarize``-shaped summary: EM as given, fixed other means, ``found_evidence`` only when given."""
    means = {"f1": 0.5, "cover_em": 0.6, "found_evidence": evidence, "searches": searches, "turns": 1.0,
             "generated_tokens": 42.25, "seconds": 0.125}
    summary = {"em": dict(zip(("mean", "low", "high"), em))}
    summary |= {name: {"mean": mean, "low": mean, "high": mean} for name, mean in means.items() if mean is not None}
    return summary


def _results() -> dict:
    """Two benchmarks, three systems; ``sft/direct`` was not run on nq and nq lists no evidence."""
    return {
        "benchmarks": {
            "world-single": {
                "questions": 66,
                "systems": {"sft/direct": _summary((0.1, 0.03, 0.18)),
                            "sft/rag": _summary((0.25, 0.15, 0.36), evidence=0.7, searches=1.0),
                            "sft/agent": _summary((0.454, 0.333, 0.576), evidence=0.8, searches=1.5)},
                "comparisons": {"sft/agent vs sft/rag": {"difference": 0.2, "low": 0.1, "high": 0.3, "p_value": 0.001},
                                "sft/rag vs sft/direct": {"difference": 0.05, "low": -0.02, "high": 0.12,
                                                          "p_value": 0.21}},
            },
            "nq": {
                "questions": 200,
                "systems": {"sft/rag": _summary((0.3, 0.24, 0.36), searches=1.0),
                            "sft/agent": _summary((0.35, 0.29, 0.41), searches=2.25)},
                "comparisons": {},
            },
        },
        "throughput": {"sft/agent": {"questions_per_s": 3.2}, "sft/rag": {"questions_per_s": 11.0}},
    }


def _table_rows(markdown: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``markdown``, as lists of cells."""
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [line.strip("| ").split(" | ") for line in lines[2:]]


def _assert_real_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100


def _only(folder: Path, *names: str) -> None:
    """Nothing but ``names`` in ``folder``: no temporary file was left behind."""
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)


# --- the table and the report ------------------------------------------------------------------


def test_the_table_has_one_row_per_benchmark_and_system_with_formatted_numbers():
    table = results_table(_results())
    assert table.splitlines()[0] == ("| benchmark | system | n | EM [95% CI] | F1 | cover-EM | evidence | searches "
                                     "| turns | tokens |")
    rows = _table_rows(table)
    assert [(r[0], r[1]) for r in rows] == [("world-single", "sft/direct"), ("world-single", "sft/rag"),
                                           ("world-single", "sft/agent"), ("nq", "sft/rag"), ("nq", "sft/agent")]
    assert rows[2] == ["world-single", "sft/agent", "66", "0.45 [0.33, 0.58]", "0.50", "0.60", "0.80", "1.50",
                       "1.00", "42.2"]
    assert all(len(r) == 10 for r in rows)


def test_a_benchmark_or_system_without_evidence_shows_a_dash():
    rows = _table_rows(results_table(_results()))
    evidence = {(r[0], r[1]): r[6] for r in rows}
    assert evidence == {("world-single", "sft/direct"): "–", ("world-single", "sft/rag"): "0.70",
                        ("world-single", "sft/agent"): "0.80", ("nq", "sft/rag"): "–", ("nq", "sft/agent"): "–"}


def test_the_report_has_the_table_the_paired_tests_with_verdicts_and_the_throughput(tmp_path):
    path = tmp_path / "report.md"
    write_report(path, _results(), title="World suite")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# World suite\n")
    assert results_table(_results()) in text
    tests = text.split("## Paired tests (EM)")[1].split("## Throughput")[0]
    assert "| world-single | sft/agent vs sft/rag | +0.20 [+0.10, +0.30] | 0.001 | yes |" in tests
    assert "| world-single | sft/rag vs sft/direct | +0.05 [-0.02, +0.12] | 0.21 | no |" in tests
    throughput = text.split("## Throughput")[1]
    assert "| sft/agent | 3.20 |" in throughput and "| sft/rag | 11.00 |" in throughput
    _only(tmp_path, "report.md")


def test_the_report_says_how_each_system_was_run_one_line_each_before_the_results(tmp_path):
    how = {"direct": "one turn, no search: the answer tag `<answer>` is forced after the question",
           "rag": "one turn, the question's passages shown", "agent": "up to 4 turns of searches"}
    write_report(tmp_path / "report.md", _results(), systems=how)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    section = text.split("How each system was run:\n\n")[1].split("\n\n")[0]
    assert section.splitlines() == [f"- {name}: {line}" for name, line in how.items()]
    assert text.index("How each system was run") < text.index(results_table(_results()))
    write_report(tmp_path / "report.md", _results())  # not given: no such section
    assert "How each system was run" not in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_a_report_without_tests_or_throughput_says_so_and_has_no_throughput_section(tmp_path):
    results = _results()
    del results["throughput"]
    results["benchmarks"]["world-single"]["comparisons"] = {}
    write_report(tmp_path / "report.md", results)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert text.startswith("# Evaluation\n") and "No paired tests were run." in text and "Throughput" not in text


def test_a_report_that_cannot_be_rendered_keeps_the_old_one_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old report\n")
    broken = _results()
    del broken["benchmarks"]["nq"]["questions"]
    with pytest.raises(KeyError):
        write_report(path, broken)
    assert path.read_text() == "old report\n"
    _only(tmp_path, "report.md")


def test_results_from_the_real_summaries_and_comparisons_render(tmp_path):
    records = {system: [{"id": f"q{i}", "em": float(i % k == 0), "f1": float(i % k == 0), "cover_em": 1.0,
                         "searches": i % k, "turns": 1 + i % k, "generated_tokens": 10 * k, "seconds": 0.1 * k}
                        for i in range(30)]
               for system, k in (("sft/agent", 2), ("sft/rag", 3))}
    results = {"benchmarks": {"nq": {
        "questions": 30,
        "systems": {system: summarize(rs, resamples=200) for system, rs in records.items()},
        "comparisons": {"sft/agent vs sft/rag": compare(records["sft/agent"], records["sft/rag"], resamples=200)}}}}
    write_report(tmp_path / "report.md", results)
    plot_em(results, tmp_path / "em.png")
    plot_search_counts({"nq": {s: [r["searches"] for r in rs] for s, rs in records.items()}}, tmp_path / "s.png")
    assert "| nq | sft/agent | 30 | 0.50 [" in (tmp_path / "report.md").read_text(encoding="utf-8")
    _assert_real_png(tmp_path / "em.png")
    _assert_real_png(tmp_path / "s.png")


# --- the charts --------------------------------------------------------------------------------


def test_the_em_chart_of_two_benchmarks_and_three_systems_is_a_real_png(tmp_path):
    plot_em(_results(), tmp_path / "em.png")
    _assert_real_png(tmp_path / "em.png")
    _only(tmp_path, "em.png")


def test_the_search_count_chart_is_a_real_png(tmp_path):
    counts = {"world-single": {"sft/direct": [0] * 66, "sft/rag": [1] * 66, "sft/agent": [i % 4 for i in range(66)]},
              "nq": {"sft/rag": [1] * 200, "sft/agent": [1 + i % 3 for i in range(200)]}}
    plot_search_counts(counts, tmp_path / "searches.png")
    _assert_real_png(tmp_path / "searches.png")
    _only(tmp_path, "searches.png")


def test_charts_of_a_single_system_with_zero_width_intervals(tmp_path):
    results = {"benchmarks": {"nq": {"questions": 1, "systems": {"sft/agent": _summary((1.0, 1.0, 1.0))},
                                     "comparisons": {}}}}
    plot_em(results, tmp_path / "em.png")
    plot_search_counts({"nq": {"sft/agent": [2]}}, tmp_path / "searches.png")
    _assert_real_png(tmp_path / "em.png")
    _assert_real_png(tmp_path / "searches.png")
    _only(tmp_path, "em.png", "searches.png")


def test_charts_of_nothing_raise_and_write_nothing(tmp_path):
    with pytest.raises(ValueError, match="no benchmark"):
        plot_em({"benchmarks": {}}, tmp_path / "em.png")
    with pytest.raises(ValueError, match="no search counts"):
        plot_search_counts({"nq": {"sft/agent": []}}, tmp_path / "searches.png")
    _only(tmp_path)
