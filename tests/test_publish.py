"""The transactional multi-file publisher: faults while staging or replacing leave the tree as it was."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from py_runtime.host import publish as publish_module
from py_runtime.host.publish import NEW_FILE_MODE, FileOps, PublishError, publish_files

WRITING_CALLS = ("make_dirs", "write_new", "replace", "remove", "remove_empty_dir")


class ScriptedOps(FileOps):
    """Records every call; `fault(method, path, phase)` may return an exception to raise
    before ("before") or after ("after") the real operation runs."""

    def __init__(self, fault=None):
        self.calls: Counter[str] = Counter()
        self.paths: list[tuple[str, Path]] = []
        self.fault = fault or (lambda method, path, phase: None)

    def _run(self, method, path, action):
        self.calls[method] += 1
        self.paths.append((method, path))
        if (error := self.fault(method, path, "before")) is not None:
            raise error
        result = action()
        if (error := self.fault(method, path, "after")) is not None:
            raise error
        return result

    def snapshot(self, path):
        return self._run("snapshot", path, lambda: super(ScriptedOps, self).snapshot(path))

    def list_dir(self, path):
        return self._run("list_dir", path, lambda: super(ScriptedOps, self).list_dir(path))

    def make_dirs(self, path):
        return self._run("make_dirs", path, lambda: super(ScriptedOps, self).make_dirs(path))

    def write_new(self, path, data, mode):
        return self._run("write_new", path, lambda: super(ScriptedOps, self).write_new(path, data, mode))

    def replace(self, source, destination):
        return self._run("replace", destination, lambda: super(ScriptedOps, self).replace(source, destination))

    def remove(self, path):
        return self._run("remove", path, lambda: super(ScriptedOps, self).remove(path))

    def remove_empty_dir(self, path):
        return self._run("remove_empty_dir", path, lambda: super(ScriptedOps, self).remove_empty_dir(path))

    @property
    def writes(self) -> int:
        return sum(self.calls[name] for name in WRITING_CALLS)


def nth_call(method: str, n: int, error: BaseException, *, after: bool = False):
    """A fault: the n-th call of `method` raises `error`, before or after the operation took effect."""
    seen = Counter()

    def fault(name, path, phase):
        if name != method:
            return None
        if phase == "before":
            seen[name] += 1
        if seen[name] == n and phase == ("after" if after else "before"):
            return error
        return None
    return fault


def tree_state(root: Path) -> dict[str, tuple]:
    """Every file (bytes, mode, mtime) and folder under root, to compare before and after."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        info = path.stat()
        state[rel] = ("dir",) if path.is_dir() else (path.read_bytes(), info.st_mode & 0o777, info.st_mtime_ns)
    return state


def temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".publish-tmp")]


@pytest.fixture
def site(tmp_path):
    """Three existing files with distinct modes; the publication changes them and adds two new files,
    one in a folder that does not exist yet."""
    old = {"a.txt": (b"old a", 0o600), "b.txt": (b"old b", 0o755), "d.txt": (b"old d", 0o640)}
    for name, (data, mode) in old.items():
        (tmp_path / name).write_bytes(data)
        os.chmod(tmp_path / name, mode)
    new = {tmp_path / name: f"new {name}".encode() for name in ["a.txt", "b.txt", "c.txt", "d.txt", "sub/e.txt"]}
    return tmp_path, new


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()], ids=["oserror", "interrupt"])
@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
def test_a_fault_while_staging_leaves_destinations_untouched_and_no_temporaries(site, error, k, after):
    root, files = site
    before = tree_state(root)
    ops = ScriptedOps(nth_call("write_new", k, error, after=after))
    with pytest.raises(PublishError if isinstance(error, Exception) else KeyboardInterrupt) as caught:
        publish_files(files, ops=ops)
    assert ops.calls["replace"] == 0
    assert tree_state(root) == before          # bytes, modes, mtimes; the new folder is gone too
    assert temporaries(root) == []
    if isinstance(error, Exception):
        assert "staging" in caught.value.problems[0] and "nothing was replaced" in caught.value.problems[0]


@pytest.mark.parametrize("error", [OSError(5, "I/O error"), KeyboardInterrupt()], ids=["oserror", "interrupt"])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("after", [False, True], ids=["before-replace", "after-replace"])
def test_a_fault_while_replacing_the_kth_file_restores_the_first_k_minus_1_and_deletes_new_files(site, error, k, after):
    root, files = site
    before = tree_state(root)
    ops = ScriptedOps(nth_call("replace", k, error, after=after))
    with pytest.raises(PublishError if isinstance(error, Exception) else KeyboardInterrupt) as caught:
        publish_files(files, ops=ops)
    state = tree_state(root)
    assert {rel: value[:2] for rel, value in state.items()} == {rel: value[:2] for rel, value in before.items()}
    assert not (root / "c.txt").exists() and not (root / "sub").exists()
    assert temporaries(root) == []
    replaced = sorted(files)[k - 1]
    if isinstance(error, Exception):
        assert f"replacing {replaced}" in caught.value.problems[0]
        assert len(caught.value.problems) == 1, caught.value.problems  # every restore succeeded
    else:
        assert any(f"replacing {replaced}" in note for note in caught.value.__notes__)


def test_several_restore_errors_are_all_reported_and_later_restores_still_happen(site):
    root, files = site
    first = nth_call("replace", 5, OSError(5, "I/O error"))
    failed_forward = []

    def fault(method, path, phase):
        if (error := first(method, path, phase)) is not None:
            failed_forward.append(path)
            return error
        # Once the forward pass failed, restoring a.txt and b.txt fails too.
        if failed_forward and method == "replace" and phase == "before" and path.name in ("a.txt", "b.txt"):
            return PermissionError(13, "Permission denied")
        return None

    with pytest.raises(PublishError) as caught:
        publish_files(files, ops=ScriptedOps(fault))
    problems = caught.value.problems
    restore_errors = [p for p in problems if p.startswith("could not restore")]
    assert [Path(p.split()[3].rstrip(":")).name for p in restore_errors] == ["a.txt", "b.txt"]
    assert "incomplete" in problems[0]
    # a.txt and b.txt keep the new bytes (their restores failed); c.txt and d.txt, after them, were undone.
    assert (root / "a.txt").read_bytes() == b"new a.txt"
    assert (root / "b.txt").read_bytes() == b"new b.txt"
    assert not (root / "c.txt").exists()
    assert (root / "d.txt").read_bytes() == b"old d" and (root / "d.txt").stat().st_mode & 0o777 == 0o640
    assert not (root / "sub").exists()
    assert temporaries(root) == []


def test_replaced_files_keep_their_modes_and_new_files_get_0644(site):
    root, files = site
    old_umask = os.umask(0o077)
    try:
        publish_files(files)
    finally:
        os.umask(old_umask)
    modes = {p.relative_to(root).as_posix(): p.stat().st_mode & 0o777 for p in files}
    assert modes == {"a.txt": 0o600, "b.txt": 0o755, "c.txt": NEW_FILE_MODE, "d.txt": 0o640, "sub/e.txt": NEW_FILE_MODE}
    assert all(p.read_bytes() == data for p, data in files.items())


def test_an_idempotent_rerun_performs_zero_writes(site):
    root, files = site
    assert publish_files(files) == sorted(files)
    before = tree_state(root)
    ops = ScriptedOps()
    assert publish_files(files, ops=ops) == []
    assert ops.writes == 0, ops.calls
    assert set(ops.calls) <= {"snapshot", "list_dir"}
    assert tree_state(root) == before


def test_only_changed_files_are_written(site):
    root, files = site
    publish_files(files)
    files[root / "b.txt"] = b"newer b"
    ops = ScriptedOps()
    assert publish_files(files, ops=ops) == [root / "b.txt"]
    assert ops.calls["write_new"] == 1 and ops.calls["replace"] == 1


def test_a_rerun_after_an_interrupted_publish_completes_it(site):
    root, files = site
    with pytest.raises(KeyboardInterrupt):
        publish_files(files, ops=ScriptedOps(nth_call("replace", 3, KeyboardInterrupt(), after=True)))
    assert publish_files(files) == sorted(files)
    assert all(p.read_bytes() == data for p, data in files.items())
    assert temporaries(root) == []


def test_a_rerun_after_a_hard_kill_completes_the_publication_and_removes_its_temporaries(site):
    root, files = site
    # What SIGKILL between two replacements leaves: one file already new, staged temporaries beside others.
    (root / "a.txt").write_bytes(files[root / "a.txt"])
    for destination in (root / "b.txt", root / "d.txt"):
        publish_module._temp_path(destination).write_bytes(files[destination])
    assert len(temporaries(root)) == 2
    assert publish_files(files) == sorted(files)[1:]
    assert all(p.read_bytes() == data for p, data in files.items())
    assert temporaries(root) == []


def test_temporaries_are_hidden_and_staged_beside_their_destination(site):
    root, files = site
    staged = []
    ops = ScriptedOps(lambda method, path, phase: staged.append(path) if (method, phase) == ("write_new", "before") else None)
    publish_files(files, ops=ops)
    assert [(p.parent, p.name.startswith(".")) for p in staged] == [(d.parent, True) for d in sorted(files)]


def test_unreadable_destinations_fail_before_anything_is_written(tmp_path):
    (tmp_path / "dir.txt").mkdir()
    ops = ScriptedOps()
    with pytest.raises(PublishError, match="nothing was written"):
        publish_files({tmp_path / "dir.txt": b"x", tmp_path / "ok.txt": b"y"}, ops=ops)
    assert ops.writes == 0 and not (tmp_path / "ok.txt").exists()
