"""Per-file result cache in `.torchlint_cache/` (under the config root, or the cwd).

An entry holds one file's result for one way of running (torchlint version, a hash of
torchlint's and the rules' source, the selected codes, rule options, target torch, the
project's knowledge, check/fix/diff, unsafe, with_edits, the file's path) and is valid
only for the exact bytes it was computed from (their SHA-256 is stored and compared);
a project file's summary and answers are not in it but in the summaries' store
(`Summaries`), once.
Entries are JSON (never pickle: a cache directory can come from anywhere, and loading
it must not run code), written to a temporary file and renamed into place, so
concurrent runs never see a partial entry; an unreadable or corrupt entry is a miss,
never an error. A directory that cannot be written disables the cache silently; the
first entry of a new format removes the entries of others.

Only results that leave the file as it is are stored (checks, diffs, and fix runs
that had nothing to change): the result of a run that rewrote the file is the input
of the next run, which then lints the new bytes and stores that.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from torchlint import __version__
from torchlint.project import answers_digest, content_digest
from torchlint.results import (
    Answers,
    FileError,
    FileResult,
    FixRecord,
    Job,
    TextEdit,
    Violation,
    answers_from_json,
    answers_to_json,
)
from torchlint.settings import Knowledge
from torchlint.text.source import SourceError, decode, read_bytes

DIRNAME = ".torchlint_cache"
ENV = "TORCHLINT_CACHE_DIR"  # overrides the location (tests, read-only checkouts)
TAG = "CACHEDIR.TAG"
_TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by torchlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
# 2: errors as records (FileError); 3: findings carry their impact; 4: summaries left out;
# 6: answers as [kind, subject, name, answer] lists (`answers_to_json`); 7: calls name the
# arguments that are Python numbers, functions their `**kwargs`
FORMAT = 7


def location(root: Path) -> Path:
    env = os.environ.get(ENV)
    return Path(env) if env else root / DIRNAME


def code_fingerprint() -> str:
    """A hash of the engine's source files (its subpackages' too) and the rules' (local
    rules' and plugins' too): editing either in development invalidates what it
    computed."""
    import torchlint
    from torchlint.lint.registry import extension_files, rules_package

    digest = hashlib.sha256(__version__.encode())
    engine = Path(torchlint.__file__).parent
    rules = [path for d in rules_package().__path__ for path in sorted(Path(d).glob("*.py"))]
    for path in (*sorted(engine.rglob("*.py")), *rules, *extension_files()):
        try:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            digest.update(path.name.encode() + b"\0?\0")
    return digest.hexdigest()


class Cache:
    """Get and put `FileResult`s of one run (one Job) in one cache directory."""

    def __init__(self, directory: Path, job: Job) -> None:
        self.directory = directory
        self.entries = directory / f"v{FORMAT}"
        settings = {
            "code": code_fingerprint(),
            "options": job.settings.options,
            "target_torch": job.settings.target_torch,
            "knowledge": job.settings.knowledge.to_json(),
            "fix": job.fix,
            "unsafe": job.unsafe,
            "diff": job.diff,
            "with_edits": job.with_edits,
            "unfixable": sorted(job.unfixable),
            "low_impact": job.low_impact,
        }
        self.salt = json.dumps(settings, sort_keys=True, default=repr).encode()
        self.writable = True

    def _entry(self, path: Path, name: str, codes: tuple[str, ...] | list[str]) -> Path:
        key = hashlib.sha256(self.salt)
        key.update(f"\0{path.absolute()}\0{name}\0{','.join(codes)}".encode())
        hexdigest = key.hexdigest()
        return self.entries / hexdigest[:2] / hexdigest[2:]

    def get(
        self,
        path: Path,
        name: str,
        codes: tuple[str, ...] | list[str],
        raw: bytes | None,
        digest: str | None = None,
    ) -> FileResult | None:
        """The stored result for this file, if it was computed from these bytes (`raw`,
        or bytes known by their `digest`: read only for a result that shows its text)."""
        try:
            data = json.loads(self._entry(path, name, codes).read_bytes())
            if data["content"] != (digest if raw is None else content_digest(raw)):
                return None
            result = decode_result(data["result"], name)
            if data.get("text_is_source"):
                if raw is None:
                    raw = read_bytes(path)
                    if content_digest(raw) != digest:
                        return None  # changed since its stamp was taken
                result.text = decode(raw)[0]
            return result
        except (OSError, ValueError, KeyError, TypeError, AttributeError, SourceError):
            return None  # missing or corrupt: recompute

    def put(
        self,
        path: Path,
        name: str,
        codes: tuple[str, ...] | list[str],
        raw: bytes,
        result: FileResult,
    ) -> None:
        if not self.writable:
            return
        encoded = encode_result(result)
        text_is_source = False
        if result.text is not None:
            with contextlib.suppress(SourceError):
                text_is_source = result.text == decode(raw)[0]
        if text_is_source:
            encoded["text"] = None  # the file itself: not stored twice
        data = {
            "content": content_digest(raw),
            "text_is_source": text_is_source,
            "result": encoded,
        }
        self.writable = _store(self.directory, self._entry(path, name, codes), data)


class Summaries:
    """Project files' summaries, each with the answers about the rest of the project it
    was computed from (`Environment.answers`), by the file's key and content: valid while
    those answers hold. Independent of the rules selected and of their options; keyed on
    the project's knowledge (`[tool.torchlint.semantic]`), which summaries read."""

    def __init__(self, directory: Path, knowledge: Knowledge) -> None:
        self.directory = directory
        self.entries = directory / f"project-v{FORMAT}"
        told = json.dumps(knowledge.to_json(), sort_keys=True)  # what summaries are read with
        self.salt = f"{code_fingerprint()}\0{told}\0".encode()
        self.writable = True

    def _entry(self, root: Path, key: str, content: str) -> Path:
        digest = hashlib.sha256(self.salt)
        digest.update(f"{root.absolute()}\0{key}\0".encode())
        digest.update(bytes.fromhex(content))
        hexdigest = digest.hexdigest()
        return self.entries / hexdigest[:2] / hexdigest[2:]

    def get(self, root: Path, key: str, content: str) -> tuple[dict[str, Any], Answers] | None:
        """(summary, answers) stored for the file with these bytes (`content_digest`)."""
        try:
            data = json.loads(self._entry(root, key, content).read_bytes())
            return data["summary"], answers_from_json(data["answers"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(
        self, root: Path, key: str, content: str, summary: dict[str, Any], answers: Answers
    ) -> None:
        if self.writable:
            target = self._entry(root, key, content)
            data = {"summary": summary, "answers": answers_to_json(answers)}
            self.writable = _store(self.directory, target, data)

    def _scan_entry(self, root: Path) -> Path:
        digest = hashlib.sha256(self.salt)
        digest.update(f"{root.absolute()}\0scan".encode())
        return self.entries / f"scan-{digest.hexdigest()}"

    def scan(self, root: Path) -> dict[str, Any]:
        """What the last run read off the project's files (by key: stamp, content digest,
        imports...) and the state it reached a fixed point in; empty if none."""
        try:
            data = json.loads(self._scan_entry(root).read_bytes())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def put_scan(self, root: Path, data: dict[str, Any]) -> None:
        if self.writable:
            self.writable = _store(self.directory, self._scan_entry(root), data)


def _store(directory: Path, target: Path, data: dict[str, Any]) -> bool:
    """Write one entry (atomically: a temporary file renamed into place); False when the
    directory cannot be written (read-only checkout, full disk): run without storing."""
    try:
        _prepare(directory, target.parent.parent)
        target.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(data))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True


def _prepare(directory: Path, entries: Path) -> None:
    if (directory / TAG).exists():
        if not entries.is_dir():  # first entry of this format: those of others go
            kind = re.escape(entries.name.rstrip("0123456789"))  # "v" or "project-v"
            for old in directory.glob("*v[0-9]*"):
                if re.fullmatch(kind + r"\d+", old.name) and old.name != entries.name:
                    shutil.rmtree(old, ignore_errors=True)
        entries.mkdir(exist_ok=True)
        return
    entries.mkdir(parents=True, exist_ok=True)
    for name, text in ((TAG, _TAG_TEXT), (".gitignore", "# Created by torchlint.\n*\n")):
        file = directory / name
        if not file.exists():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, file)


def clean(directory: Path) -> bool:
    """Remove a torchlint cache directory (only one that carries torchlint's tag)."""
    if not (directory / TAG).is_file():
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return True


# -- FileResult <-> JSON ------------------------------------------------------------------


_UNSTORED = frozenset({"path", "fetched", "violations", "errors"})  # or not as they are


def encode_result(result: FileResult) -> dict[str, Any]:
    """A result as stored: the summaries' store keeps a file's summary with its answers
    (`stored`: their digest) and the summaries it read of others."""
    # Field by field: `asdict` would copy the summary and answers (large) to drop them.
    data = {f.name: getattr(result, f.name) for f in fields(result) if f.name not in _UNSTORED}
    data["violations"] = [asdict(v) for v in result.violations]
    data["errors"] = [asdict(e) for e in result.errors]
    data["fetched"] = None
    if result.summary is not None:
        data["stored"] = answers_digest(result.answers or {})
        data["summary"] = data["answers"] = None
    elif result.answers is not None:
        data["answers"] = answers_to_json(result.answers)
    return data


def decode_result(data: dict[str, Any], name: str) -> FileResult:
    def violation(v: dict[str, Any]) -> Violation:
        fix = v.get("fix")
        if fix is not None:
            edits = tuple(
                TextEdit(**{**e, "start": tuple(e["start"]), "end": tuple(e["end"])})
                for e in fix["edits"]
            )
            v = {**v, "fix": FixRecord(**{**fix, "edits": edits})}
        return Violation(**v)

    known = {f.name for f in fields(FileResult)}
    values = {k: v for k, v in data.items() if k in known}
    values["violations"] = [violation(v) for v in data["violations"]]
    values["errors"] = [FileError(**e) for e in data["errors"]]
    if values.get("answers") is not None:
        values["answers"] = answers_from_json(values["answers"])
    return FileResult(name, **values)
