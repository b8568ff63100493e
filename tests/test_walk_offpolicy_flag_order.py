"""A user walkthrough: the off-policy scripts checked their default ``--lags`` against ``--steps``
before anything else, so with ``--steps 4`` the default lag 8 hid the real error.

``staleness --corrections tiss --steps 4``, ``staleness --steps 4 --json /tmp/nodir/x.json`` and
``lr_sweep --lrs -1e-3 --steps 4`` (or ``--lrs 1e7``) all said ``--lags: lag 8 is not below
--steps 4`` instead of naming ``--corrections``, ``--json`` or ``--lrs``. Each flag's own refusal
now comes first, and the lag cross-check last; with the default lags it opens with ``--steps``,
says the lags are the defaults and suggests ``--lags``. ``fp8`` has no ``--lags`` (it runs at lag
0), ``estimator`` no ``--steps``.

No test here trains: ``load_base``, the first piece of work, raises :class:`Started`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from offpolicy import lr_sweep, staleness

Main = Callable[[list[str]], int]


class Started(Exception):
    """The first piece of work began: the flags were accepted."""


def _start(*args: object, **kwargs: object) -> Any:
    raise Started


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (staleness, lr_sweep):
        monkeypatch.setattr(module, "load_base", _start)


def refused(main: Main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one ``error:`` line of a usage error (exit 2), after its ``error:``."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    return errors[0].split("error:", 1)[1].strip()


SHORT = ["--steps", "4", "--seed-list", "1"]  # below the default lags' 8 (staleness and lr_sweep)

OWN: list[tuple[str, Main, list[str], str]] = [
    ("staleness-corrections", staleness.main, ["--corrections", "tiss"], "--corrections"),
    ("staleness-json-dir", staleness.main, ["--json", "{tmp}/nodir/x.json"], "--json"),
    ("staleness-html-dir", staleness.main, ["--html", "{tmp}/nodir/x.html"], "--html"),
    ("staleness-lr", staleness.main, ["--lr", "-1e-3"], "--lr"),
    ("staleness-seed-list", staleness.main, ["--seed-list", "1", "1"], "--seed-list"),
    ("lr-sweep-negative-lr", lr_sweep.main, ["--lrs", "-1e-3"], "--lrs"),
    ("lr-sweep-huge-lr", lr_sweep.main, ["--lrs", "1e7"], "--lrs"),
    ("lr-sweep-corrections", lr_sweep.main, ["--corrections", "tiss"], "--corrections"),
    ("lr-sweep-json-dir", lr_sweep.main, ["--json", "{tmp}/nodir/x.json"], "--json"),
]


@pytest.mark.parametrize(("main", "argv", "flag"), [c[1:] for c in OWN], ids=[c[0] for c in OWN])
def test_a_flags_own_refusal_comes_before_the_default_lags_check(
    main: Main, argv: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    json_path = [] if "--json" in argv else ["--json", str(tmp_path / "x.json")]
    err = refused(main, [*SHORT, *json_path, *argv], capsys)
    assert err.startswith(flag), err


@pytest.mark.parametrize(
    ("main", "defaults"),
    [(staleness.main, [0, 2, 4, 8]), (lr_sweep.main, [0, 8])],
    ids=["staleness", "lr-sweep"],
)
def test_the_default_lags_against_steps_name_steps_and_suggest_lags(
    main: Main, defaults: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing else wrong: the default lags' 8 is refused, opening with the flag the user gave
    (``--steps``) and naming ``--lags`` and the default lags themselves; lags it suggests run."""
    err = refused(main, [*SHORT, "--json", str(tmp_path / "x.json")], capsys)
    assert err.startswith("--steps 4") and "--lags" in err, err
    assert " ".join(map(str, defaults)) in err, err
    extra = ["--corrections", "none"] if main is staleness.main else []
    suggested = err.split("such as --lags ", 1)[1].split(")", 1)[0].split()
    assert suggested and all(int(lag) < 4 for lag in suggested), err
    with pytest.raises(Started):
        main([*SHORT, "--json", str(tmp_path / "x.json"), *extra, "--lags", *suggested])


@pytest.mark.parametrize("main", [staleness.main, lr_sweep.main], ids=["staleness", "lr-sweep"])
def test_given_lags_at_or_past_steps_still_name_lags(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same values as the default, given: the user's own ``--lags`` is named first."""
    lags = ["0", "8"]
    err = refused(main, [*SHORT, "--json", str(tmp_path / "x.json"), "--lags", *lags], capsys)
    assert err.startswith("--lags") and "--steps" in err, err
