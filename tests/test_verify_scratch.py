"""Each verify run works in a mirror of the script's folder (verify/scratch.py): what it
writes stays there, the user's folder is left as it was, data paths still resolve."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchlint.verify import scratch
from torchlint.verify.scratch import mirror, tidy


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "data" / "images").mkdir(parents=True)
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "helper.py").write_text("VALUE = 3\n")
    (folder / "classifier.pt").write_bytes(b"the user's checkpoint")
    (folder / "data" / "labels.txt").write_text("cat\ndog\n")
    (folder / "data" / "images" / "0.png").write_bytes(b"\x89PNG")
    (folder / "data" / "big.bin").write_bytes(b"\0" * 2048)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    elsewhere = tmp_path / "datasets"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_text("x\n")
    (folder / "shared").symlink_to(Path("..") / "datasets")  # a relative link
    return folder


def snapshot(folder: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def test_a_run_writes_its_copy_and_the_user_folder_stays_as_it_was(project, tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "COPY_BYTES", 1024)  # big.bin (2 KB) is linked, not copied
    before = snapshot(project)
    work = mirror(project, tmp_path / "logs" / "runs" / "01-fixed")
    root = work.root
    # Data paths resolve: copies, the folders of the copies, links to the rest.
    assert (root / "data" / "labels.txt").read_text() == "cat\ndog\n"
    assert not (root / "data").is_symlink() and (root / "data" / "images" / "0.png").is_file()
    assert (root / "data" / "big.bin").is_symlink() and (root / ".git").is_symlink()
    assert (root / "shared" / "x.txt").read_text() == "x\n"  # relative link, resolved
    assert work.linked_files() == [project / "data" / "big.bin"]
    # What a run does: a new checkpoint over the user's, a log, a plot in a new folder.
    (root / "classifier.pt").write_bytes(b"weights of the fixed code")
    (root / "train.log").write_text("epoch 0\n")
    (root / "plots").mkdir()
    (root / "plots" / "loss.png").write_bytes(b"\x89PNG")
    assert tidy(work) == []
    assert snapshot(project) == before  # the user's checkpoint too
    assert snapshot(root) == {
        "classifier.pt": b"weights of the fixed code",
        "plots/loss.png": b"\x89PNG",
        "train.log": b"epoch 0\n",
    }


def test_a_run_that_writes_nothing_leaves_no_folder_and_a_linked_file_it_changes_is_named(
    project, tmp_path, monkeypatch
):
    monkeypatch.setattr(scratch, "COPY_BYTES", 1024)
    work = mirror(project, tmp_path / "runs" / "01-original")
    assert tidy(work) == [] and not work.root.exists()
    work = mirror(project, tmp_path / "runs" / "02-original")
    with open(work.root / "data" / "big.bin", "ab") as linked:  # too large to copy
        linked.write(b"appended")
    assert tidy(work) == [project / "data" / "big.bin"]


def test_the_budget_links_what_it_cannot_copy(project, tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "MAX_ENTRIES", 3)  # .git, classifier.pt, then no more
    work = mirror(project, tmp_path / "runs" / "01-fixed")
    checkpoint = work.root / "classifier.pt"
    assert checkpoint.is_file() and not checkpoint.is_symlink()
    assert (work.root / "data").is_symlink()  # past the budget: linked whole
    assert (work.root / "data" / "labels.txt").read_text() == "cat\ndog\n"
    assert (work.root / "train.py").is_symlink() and (work.root / "train.py").is_file()
    tidy(work)
    assert not work.root.exists()


def test_logs_inside_the_scripts_folder_are_not_mirrored_into_themselves(project):
    work = mirror(project, project / "logs" / "runs" / "01-fixed")
    assert (work.root / "logs").is_symlink()  # the folder that holds the mirror: linked
    assert (work.root / "train.py").is_file()
    tidy(work)
    assert not work.root.exists()


def test_a_fixed_file_replaces_its_copy_and_never_writes_through_a_link(
    project, tmp_path, monkeypatch
):
    """The fixed runs get the fixed files of the script's folder in place of their copies;
    a file in a linked folder is left as it is, or writing it would write the user's."""
    monkeypatch.setattr(scratch, "LINKED", scratch.LINKED | {"data"})
    before = snapshot(project)
    work = mirror(project, tmp_path / "runs" / "02-fixed")
    assert scratch.overlay(work, "helper.py", b"VALUE = 4\n")
    assert (work.root / "helper.py").read_text() == "VALUE = 4\n"
    assert not scratch.overlay(work, "data/labels.txt", b"fixed\n")  # data/ is a link
    tidy(work)
    assert snapshot(project) == before  # the user's folder as it was
    assert not work.root.exists()  # the overlay is the mirror's, not the run's
