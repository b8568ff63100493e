"""``pipesim profile`` keeps what it measured, and what it writes ``check-roofline`` scores.

A walkthrough found: a shape too large for the device threw away every row before it and named no
shape; Ctrl-C during the all-reduce lost the groups that had finished; an interrupted re-profile
replaced a complete profile with a partial one; a FIFO or a link as ``--out`` was replaced by a
file; a ``--tp`` the roofline refuses (not dividing the KV heads nor a multiple of them) was
measured and then made ``check-roofline`` refuse the whole CSV; the script took ``--repeats``
beyond ``pipesim profile``'s cap; a bad option was refused after a line was already printed;
``cluster.gpu = "h100-nvl"`` suggested the H100 that ``NOT_CATALOGUED`` says must not stand in.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pipesim.compute.measured import read_measurements, report, score
from pipesim.compute.profile_shapes import COLUMNS, GEMM_OPS

TINY = ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--warmup", "0", "--repeats", "1"]
TINY += ["--tokens", "1,8", "--tp", "1", "--decode", "2x16", "--prefill", "8x0"]


def _main(*args: str) -> int:
    from pipesim.io.cli import main

    return main(["profile", *TINY, *args])


def test_a_shape_too_large_keeps_the_rows_before_it_and_names_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The allocator's failure on ``--decode 100000x1000000`` (simulated: a real one may take the
    machine's memory) stops the profile with one error line naming the option and the shape, after
    the rows measured before it are written, marked incomplete."""
    torch = pytest.importorskip("torch")
    from pipesim.compute import profile

    full = profile.Timer.full

    def oom(self: profile.Timer, *shape: int) -> object:
        if 100000 in shape:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 5.96 TiB")
        return full(self, *shape)

    monkeypatch.setattr(profile.Timer, "full", oom)
    out = tmp_path / "oom.csv"
    assert _main("--decode", "2x16,100000x1000000", "--out", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--decode 100000x1000000" in err[0]
    kept = read_measurements(out)
    assert {m.op for m in kept} == {*GEMM_OPS, "linear", "decode_attention"}
    assert all(m.complete is False for m in kept)


@pytest.mark.timeout(240)
def test_an_interrupted_all_reduce_keeps_the_groups_that_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the second process group runs (simulated at its start): the first group's rows
    are in the CSV."""
    pytest.importorskip("torch")
    import torch.multiprocessing as mp

    spawn, calls = mp.spawn, []

    def second_interrupted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return spawn(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mp, "spawn", second_interrupted)
    out = tmp_path / "ar.csv"
    ar = ["--allreduce-backend", "gloo", "--allreduce-gpus", "2,3", "--allreduce-bytes", "4096,65536"]
    assert _main(*ar, "--out", str(out)) == 130
    reduced = [m for m in read_measurements(out) if m.op == "all_reduce"]
    assert [(m.ints["n_gpus"], m.ints["size_bytes"]) for m in reduced] == [(2, 4096), (2, 65536)]


def test_an_interrupted_profile_never_replaces_a_file_at_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A complete profile at ``--out`` stays as it was; the partial one goes beside it, and the
    command says where."""
    pytest.importorskip("torch")
    from pipesim.compute import profile

    out = tmp_path / "keep.csv"
    assert _main("--out", str(out)) == 0
    before = out.read_bytes()

    def interrupted(*_: object, **__: object) -> list[dict[str, object]]:
        raise KeyboardInterrupt

    monkeypatch.setattr(profile, "measure_attention", interrupted)
    capsys.readouterr()
    assert _main("--out", str(out)) == 130
    assert out.read_bytes() == before
    partial = tmp_path / "keep.partial.csv"
    assert str(partial) in capsys.readouterr().out
    kept = read_measurements(partial)
    assert kept and all(m.complete is False for m in kept)
    assert all(m.complete for m in read_measurements(out))


def test_out_through_a_link_or_a_fifo_is_written_not_replaced(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    link.symlink_to(target)
    assert _main("--out", str(link)) == 0
    assert link.is_symlink() and read_measurements(target)

    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the profile's open() returns
    try:
        assert _main("--out", str(fifo)) == 0
        got = os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got.splitlines()[0] == ",".join(COLUMNS)


def test_a_tp_the_roofline_refuses_is_skipped_by_the_profile_and_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """12 heads, 4 KV heads: tp 6 divides the heads but neither divides the KV heads nor is a
    multiple of them, which ``check_tp`` (and vLLM) refuse. The profile skips it, saying so; a CSV
    holding such rows (an older profile) is scored on its other rows, with a note."""
    pytest.importorskip("torch")
    from pipesim.compute import gpu
    from pipesim.compute.measured import refused_tp
    from pipesim.io.cli import main

    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"hidden_size": 96, "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 64}
        )
    )
    out = tmp_path / "six.csv"
    args = [a for a in TINY if a not in ("--model", "tiny")]
    assert main(["profile", *args, "--config", str(config), "--tp", "1,6", "--out", str(out)]) == 0
    assert "--tp 6: skipped" in capsys.readouterr().out
    rows = read_measurements(out)
    assert {m.ints["tp"] for m in rows} == {1}

    old = tmp_path / "old.csv"
    lines = out.read_text().splitlines()
    old.write_text("\n".join([*lines, *(line.replace("qkv,1,", "qkv,6,", 1) for line in lines[1:3])]) + "\n")
    measured, h100 = read_measurements(old), gpu("h100-sxm")
    skipped = refused_tp(measured, h100)
    assert [m.ints["tp"] for m, _ in skipped] == [6]
    assert score(measured, h100)["qkv"].rows == sum(m.op == "qkv" and m.ints["tp"] == 1 for m in measured)
    assert "tp 6 skipped" in report(old, h100, rows=measured)
    capsys.readouterr()
    assert main(["check-roofline", str(old), "--gpu", "h100-sxm"]) == 0
    assert "note:" in capsys.readouterr().out


def test_every_option_is_checked_before_anything_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    assert _main("--tp", "1,3", "--allreduce-bytes", "0", "--out", str(tmp_path / "x.csv")) == 2
    got = capsys.readouterr()
    assert got.out == "" and "--allreduce-bytes" in got.err


def test_the_script_caps_repeats_as_pipesim_profile_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from pipesim.compute import profile

    def no_measuring(*_: object, **__: object) -> list[dict[str, object]]:
        raise AssertionError("measured an option the command refuses")

    monkeypatch.setattr(profile, "measure_gemms", no_measuring)
    for name in ("--repeats", "--warmup"):
        assert profile.main([*TINY, name, "100000000", "--out", str(tmp_path / "x.csv")]) == 2
        assert name in capsys.readouterr().err


def test_a_cpu_profile_says_the_all_reduce_is_skipped_for_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    assert _main("--out", str(tmp_path / "c.csv")) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("all-reduce: skipped"))
    assert "CPU" in line and "one GPU" not in line


def test_an_uncatalogued_gpu_is_explained_not_misspelled() -> None:
    from pipesim.compute.gpus import NOT_CATALOGUED
    from pipesim.plan.checks import PlanError
    from pipesim.plan.resolve import resolve_gpu

    with pytest.raises(PlanError) as e:
        resolve_gpu("h100-nvl")
    assert e.value.field == "cluster.gpu"
    assert NOT_CATALOGUED["h100-nvl"] in str(e.value) and "did you mean" not in str(e.value)
    with pytest.raises(PlanError, match="did you mean 'h100-sxm'"):  # a misspelling still gets its hint
        resolve_gpu("h100-sxn")
