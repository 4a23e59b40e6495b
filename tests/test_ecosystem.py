"""The ecosystem check's committed files: benchmarks/ecosystem-baseline.json (torchlint's
findings on ../shared/corpus) and benchmarks/ecosystem-verdicts.tsv (judgments of them).

No test reads the corpus: `python benchmarks/ecosystem.py --check` compares a run with
the baseline.
"""

from __future__ import annotations

import json

from torchlint.lint.registry import all_rules

from .conftest import ROOT, benchmark

eco = benchmark("ecosystem")

BASELINE = eco.read_baseline()
LOW = eco.read_low()
VERDICTS, PROBLEMS = eco.read_verdicts()


def test_verdict_file_is_well_formed():
    assert PROBLEMS == []
    unknown = sorted({rule for rule, _, _ in VERDICTS} - set(all_rules()))
    assert unknown == [], f"verdicts on rules that do not exist: {unknown}"


def test_baseline_is_canonical(tmp_path):
    """As --update-baseline writes it (sorted, one finding per line), so diffs stay small."""
    eco.write_baseline(BASELINE, LOW, tmp_path / "baseline.json")
    assert (tmp_path / "baseline.json").read_text(encoding="utf-8") == eco.BASELINE.read_text(
        encoding="utf-8"
    )
    assert {rule for rule, _, _ in BASELINE} <= set(all_rules())


def test_every_finding_has_a_verdict():
    missing = sorted(BASELINE - VERDICTS.keys(), key=eco.sort_key)
    assert missing == [], (
        f"{len(missing)} findings without a verdict, e.g. {eco.show(missing[0])}: "
        "judge them (python benchmarks/ecosystem.py --unjudged)"
    )


def test_seed_true_positives_are_still_found():
    """The TP rows of ../shared/corpus/judgments.tsv are findings that must not be lost."""
    seeds = [k for k, v in VERDICTS.items() if v.origin == "seed" and v.verdict == "TP"]
    assert len(seeds) >= 10
    assert [eco.show(k) for k in seeds if k not in BASELINE] == []


def test_precision_doc_is_current():
    text = (ROOT / "docs" / "precision.md").read_text(encoding="utf-8")
    table = text.split(eco.START, 1)[1].split(eco.END, 1)[0].strip("\n").splitlines()
    assert table == eco.precision_markdown(BASELINE, VERDICTS, LOW), (
        "run python benchmarks/ecosystem.py --write-precision docs/precision.md"
    )


def test_no_corpus_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(eco, "CORPUS", ROOT / "no-such-corpus")
    assert eco.main([]) == 2
    assert "no corpus" in capsys.readouterr().err


def test_unjudged_shows_context_and_rows_to_fill(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("".join(f"line {n}\n" for n in range(1, 11)), encoding="utf-8")
    cells = {"cells": [{"source": "md"}, {"source": ["a = 1\n", "b = 2\n", "c = 3"]}]}
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(json.dumps(cells), encoding="utf-8")
    judged = eco.Finding(("TL201", "repo/train.py", "2"), "judged", script, None, 2, False)
    todo = [
        eco.Finding(("TL201", "repo/train.py", "5"), "the message", script, None, 5, False),
        eco.Finding(("TL104", "repo/n.ipynb", "cell 2:2"), "in a cell", notebook, 2, 2, False),
    ]
    verdicts = {judged.key: eco.Verdict("TP", "reason", "review")}
    out = eco.unjudged([judged, *todo], verdicts, 1)
    assert "TL201 repo/train.py:5: the message" in out
    assert [line for line in out if line.startswith("  >")] == [
        "  >    2 | b = 2",
        "  >    5 | line 5",
    ]
    assert "       4 | line 4" in out and "       6 | line 6" in out
    assert out[-2:] == [
        "TL104\trepo/n.ipynb\tcell 2:2\t\t\treview",
        "TL201\trepo/train.py\t5\t\t\treview",
    ]
    assert not any("repo/train.py:2" in line for line in out)


def test_a_change_in_the_blind_split_is_shown_without_its_location():
    """The diff names a blind repository's changed finding by rule and repository only:
    its findings are read at the end of a round, not while rules change."""
    blind, dev = (
        ("TL401", f"{eco.BLIND[0]}/train.py", "12"),
        ("TL401", "yolov5/train.py", "12"),
    )
    assert eco.show(blind) == f"TL401 {eco.BLIND[0]}/(blind split)"
    assert eco.show(dev) == "TL401 yolov5/train.py:12"
