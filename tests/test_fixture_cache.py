"""The one build-and-cache step of the tiny-model fixtures (``tests/fixtures/tiny_qwen3.cached_build``), which
``build_tiny_qwen3`` and ``build_tiny_vlm`` share: reuse, rebuild, refuse, and no half-written folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .fixtures import tiny_qwen3, tiny_vlm
from .fixtures.tiny_qwen3 import STAMP_FILE, cached_build, fingerprint


def _tokenizer(tmp_path: Path, text: str = "{}") -> Path:
    folder = tmp_path / "tok"
    folder.mkdir(exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_text(text)
    return folder


def test_a_build_is_reused_by_its_fingerprint_and_replaced_by_another(tmp_path: Path):
    built: list[Path] = []

    def build(folder: Path) -> dict:
        built.append(folder)
        (folder / "weights").write_text(str(len(built)))
        return {"seed": 0}

    tok, out = _tokenizer(tmp_path), tmp_path / "model"
    first = fingerprint(tok, {"v": 1}, [])
    assert cached_build(out, first, build) == out and len(built) == 1
    assert json.loads((out / STAMP_FILE).read_text()) == {"fingerprint": first, "seed": 0}
    assert cached_build(out, fingerprint(tok, {"v": 1}, []), build) == out and len(built) == 1  # reused
    assert fingerprint(_tokenizer(tmp_path, '{"changed": 1}'), {"v": 1}, []) != first  # tokenizer counts
    cached_build(out, fingerprint(tok, {"v": 2}, []), build)  # another recipe: rebuilt in place
    assert len(built) == 2 and (out / "weights").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "tok"]  # no build left beside it


def test_a_failed_build_leaves_the_folder_as_it_was_and_a_foreign_folder_is_refused(tmp_path: Path):
    def ok(folder: Path) -> dict:
        (folder / "weights").write_text("good")
        return {}

    def broken(folder: Path) -> dict:
        (folder / "weights").write_text("half")
        raise RuntimeError("out of memory")

    out = tmp_path / "model"
    cached_build(out, "a", ok)
    with pytest.raises(RuntimeError):
        cached_build(out, "b", broken)
    assert (out / "weights").read_text() == "good"  # the earlier build, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # and nothing half-written beside it
    cached_build(out, "b", ok)  # and the next try builds
    assert json.loads((out / STAMP_FILE).read_text())["fingerprint"] == "b"

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="holds no tiny-model build"):
        cached_build(mine, "a", broken)  # refused before anything is built
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_both_tiny_models_build_through_the_one_helper():
    assert tiny_vlm.cached_build is tiny_qwen3.cached_build and tiny_vlm.fingerprint is tiny_qwen3.fingerprint
