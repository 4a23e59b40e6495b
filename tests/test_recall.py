"""benchmarks/recall.py: the lists of problems written before a run, and how they are scored.

No test reads the corpus: the lists are checked for form, the scoring on made-up findings.
"""

from __future__ import annotations

import pytest

from .conftest import benchmark

recall = benchmark("recall")

HEADER = "\t".join(recall.COLUMNS)


def test_committed_lists_are_well_formed():
    items, problems = recall.read_items()
    causes, more = recall.read_causes()
    assert problems == [] and more == []
    assert items, "no recall list in benchmarks/recall/"
    listed = {(i.folder, i.location, i.category) for i in items}
    assert sorted(set(causes) - listed) == [], "a cause for an item no list holds"


def test_every_category_names_rules_that_exist():
    from torchlint.lint.registry import all_rules

    named = {code for rules in recall.CATEGORIES.values() for code in rules}
    assert sorted(named - set(all_rules())) == []


def test_locations_parse():
    assert recall.place("a/b.py:12") == recall.Place("a/b.py", None, 12)
    assert recall.place("n.ipynb:cell 3:4") == recall.Place("n.ipynb", 3, 4)
    with pytest.raises(ValueError):
        recall.place("train.py")


def _items(tmp_path, rows):
    (tmp_path / "repo.tsv").write_text(HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return recall.read_items(tmp_path)


def test_an_item_is_found_by_a_rule_of_its_category_near_one_of_its_places(tmp_path):
    items, problems = _items(
        tmp_path,
        [
            "repo\ttrain.py:40 | train.py:12\tbatch-size\tclear\tbatch 8\tT",
            "repo\ttrain.py:20\tworkers\tclear\tno workers\tT",
            "repo\tnb.ipynb:cell 2:5\thost-sync\tdebatable\titem\tT",
            "repo\ttrain.py:60\tother\tclear\tper-token loop\tT",
        ],
    )
    assert problems == []
    found = {
        ("repo", "train.py", None): [(14, "TL001"), (20, "TL202"), (60, "TL401")],
        ("repo", "nb.ipynb", 3): [(5, "TL401")],  # another cell
    }
    hits = [recall.answered(i, found) for i in items]
    assert hits == [True, False, False, False]  # TL202 does not answer "workers"
    counts = recall.recall(items, found)
    assert (counts["all found"], counts["all listed"]) == (1, 4)
    assert (counts["clear found"], counts["clear listed"]) == (1, 3)
    missed = recall.misses(items, found, {("repo", "train.py:20", "workers"): "helper"})
    assert [m.split("\t")[3] for m in missed] == ["helper", "?", "no rule"]
    # The run of every rule tells the rest: a default rule's hidden (low-impact) finding
    # (TL401, TL701 are on by default); a finding of no rule of the category tells nothing.
    every = {**found, ("repo", "nb.ipynb", 2): [(5, "TL401")]}
    every[("repo", "train.py", None)] = [(20, "TL701")]
    missed = recall.misses(items, found, {}, every)
    assert [m.split("\t")[3] for m in missed] == ["low impact", "low impact", "no rule"]
    every[("repo", "train.py", None)] = [(20, "TL702")]  # pin memory's, not workers'
    assert recall.misses(items, found, {}, every)[0].split("\t")[3] == "?"


def test_a_miss_only_a_rule_off_by_default_finds_is_in_preview(tmp_path):
    items, _ = _items(tmp_path, ["repo	train.py:5	tf32	clear	no TF32	T"])
    every = {("repo", "train.py", None): [(1, "TL503")]}  # TL503 is off by default
    assert recall.misses(items, {}, {}, every)[0].split("\t")[3] == "preview"


def test_a_setting_of_the_whole_program_is_found_anywhere_in_its_file(tmp_path):
    items, _ = _items(
        tmp_path,
        [
            "repo\tnb.ipynb:cell 2:5\ttf32\tclear\tno TF32\tT",
            "repo\ttrain.py:5\ttf32\tclear\tno TF32\tT",
        ],
    )
    found = {("repo", "nb.ipynb", 9): [(1, "TL503")], ("repo", "other.py", None): [(5, "TL503")]}
    assert [recall.answered(i, found) for i in items] == [True, False]


def test_malformed_rows_are_reported(tmp_path):
    _, problems = _items(
        tmp_path,
        [
            "other\ttrain.py:1\tworkers\tclear\tx\tT",
            "repo\ttrain.py:1\tspeed\tclear\tx\tT",
            "repo\ttrain.py\tworkers\tclear\tx\tT",
            "repo\ttrain.py:1\tworkers\tmaybe\tx\tT",
            "repo\ttrain.py:1\tworkers",
        ],
    )
    assert len(problems) == 5
