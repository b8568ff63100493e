"""``--model`` weights files that are missing, damaged or cut short (a user walkthrough's finds).

* A truncated ``model.safetensors`` (an interrupted download) or one holding garbage was a
  traceback from inside ``from_pretrained`` (``safetensors._safetensors_rust.SafetensorError:
  Error while deserializing header``, rc 1): ``SafetensorError`` is an ``Exception``, not one of the
  ``ValueError``/``OSError``/``RuntimeError`` the command line turns into an ``error:`` line.
* A directory without weights failed only after the config and the tokenizer had loaded (~14 s),
  with transformers' own sentence, not naming ``--model``.

Now each is a ``FieldError`` (field ``model``, ``file`` the file at fault) from
:func:`mismatch.weightfiles.check_weights`, which ``ModelSource.real`` and ``load_model`` run before
the tokenizer or the model is loaded, and one ``error:`` line naming ``--model`` with exit 2.
The checkpoints are built here: a one-layer Qwen3 with a word-level tokenizer, no hub.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from mismatch.checks import FieldError  # noqa: E402
from mismatch.cli import main  # noqa: E402
from mismatch.models import WEIGHTS_FILES, ModelSource, check_weights, load_model  # noqa: E402
from tests.tiny_checkpoint import tiny_checkpoint  # noqa: E402

SHARD = "model-00001-of-00002.safetensors"
INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete checkpoint: config.json, model.safetensors and a tokenizer (about 0.1 MB)."""
    return tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "good", max_position=128, seed=0)


def _halve(file: Path) -> None:
    os.truncate(file, file.stat().st_size // 2)


def _sharded(path: Path, shard_damage: Callable[[Path], object] | None = None, missing: bool = False) -> None:
    """Turn ``path`` into a one-shard "sharded" checkpoint: the index and its shard."""
    (path / "model.safetensors").rename(path / SHARD)
    from safetensors import safe_open

    with safe_open(str(path / SHARD), framework="pt") as fh:
        names = list(fh.keys())
    index = {
        "metadata": {"total_size": (path / SHARD).stat().st_size},
        "weight_map": dict.fromkeys(names, SHARD),
    }
    (path / INDEX).write_text(json.dumps(index))
    if shard_damage is not None:
        shard_damage(path / SHARD)
    if missing:
        (path / SHARD).unlink()


def _index_says(text: str) -> Callable[[Path], object]:
    """A shard damage that instead rewrites the shard's index with ``text``."""
    return lambda shard: (shard.parent / INDEX).write_text(text)


def _as_bin(path: Path, damage: Callable[[Path], object]) -> None:
    """``model.safetensors`` rewritten as a zip-format ``pytorch_model.bin`` (torch.save), damaged."""
    from safetensors.torch import load_file

    state = load_file(str(path / "model.safetensors"))
    (path / "model.safetensors").unlink()
    torch.save(state, path / "pytorch_model.bin")
    damage(path / "pytorch_model.bin")


def _explicit(path: Path) -> None:
    """config.json names its own weights file (``transformers_weights``), which is not there."""
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(cfg | {"transformers_weights": "mine.safetensors"}))


BROKEN: list[tuple[str, Callable[[Path], object], str]] = [  # (id, what is done to a copy, file named)
    ("safetensors-truncated", lambda p: _halve(p / "model.safetensors"), "model.safetensors"),
    ("safetensors-garbage", lambda p: (p / "model.safetensors").write_text("garbage"), "model.safetensors"),
    ("safetensors-empty", lambda p: (p / "model.safetensors").write_bytes(b""), "model.safetensors"),
    ("no-weights", lambda p: (p / "model.safetensors").unlink(), "."),
    ("shard-missing", lambda p: _sharded(p, missing=True), SHARD),
    ("shard-truncated", lambda p: _sharded(p, _halve), SHARD),
    ("index-not-json", lambda p: _sharded(p, _index_says("{")), INDEX),
    ("index-a-list", lambda p: _sharded(p, _index_says("[]")), INDEX),
    ("index-without-weight-map", lambda p: _sharded(p, _index_says("{}")), INDEX),
    ("index-without-metadata", lambda p: _sharded(p, _index_says('{"weight_map": {"w": "x"}}')), INDEX),
    ("bin-truncated", lambda p: _as_bin(p, _halve), "pytorch_model.bin"),
    ("explicit-file-missing", _explicit, "."),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "named"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_weights_are_refused_naming_model_and_the_file(
    damage: Callable[[Path], object],
    named: str,
    good: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """FieldError (field ``model``, ``file`` the file at fault) from both entry points, before the
    tokenizer is read; and one ``error:`` line naming --model and the file, exit 2."""
    path = tmp_path / "ckpt"
    shutil.copytree(good, path)
    damage(path)

    def no_tokenizer(*_: object, **__: object) -> None:
        raise AssertionError("the tokenizer was loaded before the weights were checked")

    monkeypatch.setattr("mismatch.models.load_tokenizer", no_tokenizer)
    want = os.path.normpath(path / named)
    for call in (lambda: ModelSource.real(str(path)), lambda: load_model(str(path), torch.float32)):
        with pytest.raises(FieldError) as info:
            call()
        assert info.value.field == "model" and os.path.normpath(str(info.value.file)) == want
        assert "--model" in str(info.value)
    capsys.readouterr()
    assert main(["--model", str(path), "--prompts", "2", "--new-tokens", "2", "--no-knobs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--model" in err[0], err
    assert os.path.basename(want) in err[0] and "Traceback" not in err[0]


def test_a_directory_without_weights_names_every_file_transformers_takes(good: Path, tmp_path: Path) -> None:
    """The files looked for are transformers' four names (safetensors, its index, the .bin, its index)."""
    path = tmp_path / "nowts"
    shutil.copytree(good, path)
    (path / "model.safetensors").unlink()
    with pytest.raises(FieldError) as info:
        check_weights(str(path), str(path), {})
    assert all(name in str(info.value) for name in WEIGHTS_FILES)
    assert set(WEIGHTS_FILES) == {
        "model.safetensors",
        "model.safetensors.index.json",
        "pytorch_model.bin",
        "pytorch_model.bin.index.json",
    }


GOOD_LAYOUTS: list[tuple[str, Callable[[Path], object], str]] = [  # (id, change, the file found)
    ("safetensors", lambda p: None, "model.safetensors"),
    ("sharded", lambda p: _sharded(p), INDEX),
    ("bin", lambda p: _as_bin(p, lambda f: None), "pytorch_model.bin"),
]


@pytest.mark.parametrize(("layout", "found"), [g[1:] for g in GOOD_LAYOUTS], ids=[g[0] for g in GOOD_LAYOUTS])
def test_complete_checkpoints_pass_and_load(
    layout: Callable[[Path], object], found: str, good: Path, tmp_path: Path
) -> None:
    """The check finds the file from_pretrained reads, and the model loads with the saved weights."""
    path = tmp_path / "ckpt"
    shutil.copytree(good, path)
    layout(path)
    cfg = json.loads((path / "config.json").read_text())
    assert check_weights(str(path), str(path), cfg) == os.path.join(str(path), found)
    loaded = load_model(str(path), torch.float32)
    reference = load_model(str(good), torch.float32)
    for (name, a), (_, b) in zip(loaded.model.state_dict().items(), reference.model.state_dict().items()):
        assert torch.equal(a, b), name


def _safetensor_error() -> type[Exception]:
    import safetensors

    return safetensors.SafetensorError


RAISED: list[tuple[str, Callable[[], BaseException], type[BaseException]]] = [  # (id, raised, seen)
    ("safetensors-error", lambda: _safetensor_error()("Error while deserializing header"), FieldError),
    ("eof", lambda: EOFError("Ran out of input"), FieldError),
    ("keyboard-interrupt", lambda: KeyboardInterrupt(), KeyboardInterrupt),
    ("programming-error", lambda: TypeError("unexpected keyword"), TypeError),
    ("out-of-memory", lambda: torch.OutOfMemoryError("CUDA out of memory"), torch.OutOfMemoryError),
]


@pytest.mark.parametrize(("raised", "seen"), [r[1:] for r in RAISED], ids=[r[0] for r in RAISED])
def test_only_a_damaged_file_s_errors_from_loading_become_a_model_refusal(
    raised: Callable[[], BaseException],
    seen: type[BaseException],
    good: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Damage the header check cannot see (past the header) still reaches the user as the named
    refusal, with the loader's error as its cause; an interrupt, a programming error or running out
    of memory pass through unchanged."""
    from transformers import AutoModelForCausalLM

    exc = raised()

    def fail(*_: object, **__: object) -> None:
        raise exc

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fail)
    with pytest.raises(seen) as info:
        load_model(str(good), torch.float32)
    if seen is FieldError:
        assert isinstance(info.value, FieldError) and info.value.field == "model"
        assert info.value.file == os.path.join(str(good), "model.safetensors")
        assert info.value.__cause__ is exc
    else:
        assert info.value is exc


def test_a_safetensors_without_its_error_class_exported_still_checks(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error class is looked up, never imported from safetensors' private module: without the
    name, a complete checkpoint still passes and a missing file is still refused by name."""
    import safetensors

    monkeypatch.delattr(safetensors, "SafetensorError")
    assert check_weights(str(good), str(good), {}).endswith("model.safetensors")
    path = tmp_path / "nowts"
    shutil.copytree(good, path)
    (path / "model.safetensors").unlink()
    with pytest.raises(FieldError) as info:
        check_weights(str(path), str(path), {})
    assert info.value.field == "model"
