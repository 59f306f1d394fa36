"""Publish several files as one unit: stage every file beside its destination, then replace one by one.

This is NOT filesystem-atomic multi-file replacement. Each `os.replace` is atomic for its own file,
but a reader can see a mix of old and new files while the replacements run, and a hard kill
(SIGKILL, power loss) between two replacements leaves that mix on disk, plus hidden temporaries
that the next publish of the same destinations removes. What it does guarantee, for every error
and interrupt Python sees (KeyboardInterrupt included):

- a fault while staging replaces nothing and deletes every temporary;
- a fault while replacing restores the files already replaced (bytes and mode, from backups read
  before anything was written), deletes files it created and directories it made, deletes every
  temporary; each failed restore is reported and none stops the others;
- replaced files keep their mode, new files get 0o644 whatever the umask;
- publishing bytes identical to what is on disk performs no write at all.

A second interrupt during the rollback stops the rollback; the next publish then completes the
publication. Concurrent publishers of the same destinations are not supported. Every file-system call goes
through a `FileOps` object so tests can count calls or inject faults at any step.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FileOps", "PublishError", "Snapshot", "NEW_FILE_MODE", "publish_files", "stale_temporaries"]

NEW_FILE_MODE = 0o644
_TEMP_SUFFIX = ".publish-tmp"
_TEMP_NAME = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{16}" + re.escape(_TEMP_SUFFIX))


class PublishError(Exception):
    """The first problem is the cause; any further ones are cleanup or restore failures."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Snapshot:
    data: bytes
    mode: int       # permission bits only


class FileOps:
    """Every file-system call the publisher makes."""

    def snapshot(self, path: Path) -> Snapshot | None:
        try:
            with open(path, "rb") as handle:
                return Snapshot(handle.read(), stat.S_IMODE(os.fstat(handle.fileno()).st_mode))
        except FileNotFoundError:
            return None

    def list_dir(self, path: Path) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def make_dirs(self, path: Path) -> list[Path]:
        """Create `path` and missing parents; returns the directories created, outermost first."""
        missing = []
        while not path.exists():
            missing.append(path)
            path = path.parent
        made = []
        try:
            for folder in reversed(missing):
                os.mkdir(folder)
                made.append(folder)
        except BaseException:
            for folder in reversed(made):  # the caller never learns of these, so undo them here
                os.rmdir(folder)
            raise
        return made

    def write_new(self, path: Path, data: bytes, mode: int) -> None:
        # O_EXCL: a temporary name is never someone else's file; fsync so a replace never exposes a hole.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, source: Path, destination: Path) -> None:
        os.replace(source, destination)

    def remove(self, path: Path) -> None:
        """Delete a file; a missing one is not an error (cleanup may run twice over the same path)."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def remove_empty_dir(self, path: Path) -> None:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass


def _temp_path(destination: Path) -> Path:
    return destination.with_name(f".{destination.name}.{secrets.token_hex(8)}{_TEMP_SUFFIX}")


def stale_temporaries(destinations, ops: FileOps | None = None) -> list[Path]:
    """Temporaries a killed publish left beside any of `destinations` (read-only)."""
    ops = ops or FileOps()
    names_by_dir: dict[Path, set[str]] = {}
    for destination in destinations:
        names_by_dir.setdefault(destination.parent, set()).add(destination.name)
    stale = []
    for folder, names in sorted(names_by_dir.items()):
        for entry in ops.list_dir(folder):
            match = _TEMP_NAME.fullmatch(entry)
            if match and match.group("name") in names:
                stale.append(folder / entry)
    return stale


def publish_files(files: dict[Path, bytes], *, ops: FileOps | None = None) -> list[Path]:
    """Make every path in `files` hold its bytes; returns the paths written, sorted.

    Raises PublishError (or re-raises an interrupt, with restore problems as notes) after undoing
    whatever it had done.
    """
    ops = ops or FileOps()
    try:
        stale = stale_temporaries(files, ops)
        backups = {path: ops.snapshot(path) for path in sorted(files)}
    except OSError as error:
        raise PublishError([f"reading the current files: {error!r}; nothing was written"]) from error
    changed = [path for path, before in backups.items() if before is None or before.data != files[path]]
    if stale:
        _cleanup_or_raise(stale, [], ops, cause="removing temporaries left by an interrupted publish")
    if not changed:
        return []
    temps, created_dirs = _stage(changed, files, backups, ops)
    _replace_all(temps, backups, created_dirs, ops)
    return changed


def _stage(changed, files, backups, ops) -> tuple[dict[Path, Path], list[Path]]:
    temps: dict[Path, Path] = {}
    created_dirs: list[Path] = []
    destination = None
    try:
        for destination in changed:
            created_dirs += ops.make_dirs(destination.parent)
            # Recorded before writing: a fault inside write_new may leave a partial temporary behind.
            temps[destination] = _temp_path(destination)
            before = backups[destination]
            ops.write_new(temps[destination], files[destination], before.mode if before else NEW_FILE_MODE)
    except BaseException as error:
        problems = _cleanup(list(temps.values()), created_dirs, ops)
        _fail(error, f"staging {destination}: {error!r}; nothing was replaced", problems)
    return temps, created_dirs


def _replace_all(temps, backups, created_dirs, ops) -> None:
    attempted: list[Path] = []
    try:
        for destination, temp in temps.items():
            # Recorded before the call: an interrupt may land after the rename took effect.
            attempted.append(destination)
            ops.replace(temp, destination)
    except BaseException as error:
        problems = _restore(attempted, backups, ops)
        problems += _cleanup(list(temps.values()), created_dirs, ops)
        what = "restored" if not problems else "restore was incomplete, see below"
        _fail(error, f"replacing {attempted[-1]}: {error!r}; {len(attempted)} file(s) {what}", problems)


def _restore(attempted, backups, ops) -> list[str]:
    problems = []
    for destination in attempted:
        before = backups[destination]
        try:
            if before is None:
                ops.remove(destination)
            elif ops.snapshot(destination) != before:
                temp = _temp_path(destination)
                try:
                    ops.write_new(temp, before.data, before.mode)
                    ops.replace(temp, destination)
                finally:
                    ops.remove(temp)
        except Exception as error:  # keep restoring the others; every failure is reported
            problems.append(f"could not restore {destination}: {error!r}")
    return problems


def _cleanup(temps, created_dirs, ops) -> list[str]:
    problems = []
    for temp in temps:
        try:
            ops.remove(temp)
        except Exception as error:
            problems.append(f"could not delete temporary {temp}: {error!r}")
    for folder in reversed(created_dirs):
        try:
            if not ops.list_dir(folder):
                ops.remove_empty_dir(folder)
        except Exception as error:
            problems.append(f"could not remove directory {folder}: {error!r}")
    return problems


def _cleanup_or_raise(temps, created_dirs, ops, *, cause: str) -> None:
    problems = _cleanup(temps, created_dirs, ops)
    if problems:
        raise PublishError([f"{cause}: failed", *problems])


def _fail(error: BaseException, summary: str, problems: list[str]):
    """Report an ordinary error as PublishError; let interrupts propagate, carrying the problems as notes."""
    if isinstance(error, Exception):
        raise PublishError([summary, *problems]) from error
    for problem in [summary, *problems]:
        error.add_note(problem)
    raise error
