"""The table and the command line: ``python -m scenarios.published [--json FILE] [--workers N]``.

Two protocols (``docs/published.md``): **stated**, every row predicted from its stated setup with
the global constants; **transfer**, the rows of a study with a phase breakdown (verl's fully-async
tables) predicted with the trainer constants fitted on the study's calibration row
(:func:`~scenarios.published.claims.verl_fit`), the calibration row itself not scored (and a
ratio over it, verl's 2.35x, shown there but not scored: its denominator is what the fit set). Each row
is a point (the registry's lengths, seed 0) and a range: ``low`` and ``high`` over the point and
the two ends of the length band (:meth:`~scenarios.published.common.Variant.band`, each on its
own seed). The runs are found by a recording pass over the claims
(:func:`~scenarios.published.common.recording`), run in ``--workers`` processes with progress on
stderr, and memoised before the claims read them.

Ctrl-C or SIGTERM stops the command with one line and exit status 130; ``--json`` is written to a
temporary file and moved into place, so it is whole or untouched (:mod:`pipesim.io.interrupts`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pipesim.io.cli_options import workers_problem
from pipesim.io.interrupts import sigterm_as_interrupt, write_atomic
from pipesim.io.pools import as_finished, polled_interrupts, worker_pool
from scenarios.outputs import check_output
from scenarios.published import common
from scenarios.published.claims import CLAIMS, VERL_STUDY, Claim, verl_fit
from scenarios.published.common import POINT, RunKey, Variant

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _label(key: RunKey) -> str:
    _, name, args = key
    shown = []
    for a in args:
        if isinstance(a, Variant):
            shown.append(f"x{a.scale:.2f} seed {a.seed}{' fitted' if a.fit else ''}")
        else:
            shown.append(repr(a))
    return f"{name}({', '.join(shown)})"


def run_all(keys: list[RunKey], workers: int, progress: Progress) -> None:
    """Run ``keys`` (duplicates once) in ``workers`` processes (1: here), memoising each result."""
    todo = list(dict.fromkeys(keys))
    done = 0

    def stored(key: RunKey, m: common.Measured) -> None:
        nonlocal done
        done += 1
        common.RUNNERS[(key[0], key[1])].store(key[2], m)
        progress(f"[{done}/{len(todo)}] {_label(key)}: {m.wall_s:.1f} s")

    if workers <= 1 or len(todo) <= 1:
        for key in todo:
            stored(*common.run_key(key))
        return
    # a Ctrl-C stops the workers, not only this process; it is taken between the waits, never
    # inside concurrent.futures, where it left futures' locks held and the stop hung (pools)
    with worker_pool(workers) as pool, polled_interrupts() as check:
        futures = [pool.submit(common.run_key, key) for key in todo]
        for f in as_finished(futures, check):
            stored(*f.result())


def _ask(claims: Iterable[tuple[Claim, list[Variant]]]) -> None:
    for c, variants in claims:
        for v in variants:
            c.predict(v)
        if c.diagnosis:
            c.diagnosis(variants[0])


def _variants(c: Claim, point: Variant) -> list[Variant]:
    return [point] if c.phase == "trend" else [point, *point.band()]


COST = {"areal_run": 0, "verl_async": 1, "verl_colocate": 2}
"""Run order: the longest kinds first, so that no worker is left alone with a long run at the end."""


def _record(todo: list[tuple[Claim, list[Variant]]]) -> list[RunKey]:
    common.recording(True)
    try:
        _ask(todo)
    finally:
        keys = common.recording(False)
    return keys


def _rows(todo: list[tuple[Claim, list[Variant]]], protocol: str) -> list[dict[str, Any]]:
    out = []
    for c, variants in todo:
        values = [float(c.predict(v)) for v in variants]
        out.append(
            {
                "claim": c.claim,
                "system": c.system,
                "source": c.source,
                "unit": c.unit,
                "published": c.published,
                "predicted": values[0],
                "protocol": protocol,
                "phase": c.phase,
                "low": min(values),
                "high": max(values),
                "_diagnosis": c.diagnosis(variants[0]) if c.diagnosis else "",
                "_published_diagnosis": c.published_diagnosis,
                # shown, not scored: the row the default profile was set from, and (transfer) a
                # ratio over the transfer's own calibration row (verl's 2.35x)
                "calibration": c.profile_calibration or (protocol == "transfer" and c.reads_calibration),
            }
        )
    return out


def predict(
    claims: tuple[Claim, ...] = CLAIMS, workers: int = 1, progress: Progress = _quiet, transfer: bool = True
) -> list[dict[str, Any]]:
    """The rows of both protocols: every claim under ``stated``; under ``transfer`` the rows of
    the verl study but its calibration row, with the constants fitted on that row. The
    calibration run goes first (the fit needs it); every other run of both protocols then goes to
    one pool, the longest kinds first."""
    stated = [(c, _variants(c, POINT)) for c in claims]
    study = [c for c in claims if c.study == VERL_STUDY and not c.calibration]
    moved: list[tuple[Claim, list[Variant]]] = []
    if transfer and study:
        run_all(_record([(c, [POINT]) for c in claims if c.calibration and c.phase == "step"]), 1, progress)
        fit = verl_fit()
        p = fit.profile
        progress(
            f"transfer: {p.name} fwd_bwd_efficiency {p.fwd_bwd_efficiency:.3f}, "
            f"sample_s {p.sample_s:.4f} (fitted on {fit.row})"
        )
        moved = [(c, _variants(c, Variant(fit=fit))) for c in study]
    keys = _record(stated + moved)
    run_all(sorted(keys, key=lambda k: COST.get(k[1], 9)), workers, progress)
    return _rows(stated, "stated") + _rows(moved, "transfer")


def scored(row: dict[str, Any]) -> bool:
    """Whether a row counts in :func:`scores`: not a row the default profile was set from, nor
    (transfer) a ratio over the transfer's calibration row."""
    return not row.get("calibration", False)


def within(row: dict[str, Any], tolerance: float = 0.25) -> bool:
    """A trend row: its pass or fail equals the published one. Any other: ``abs(predicted /
    published - 1) <= tolerance`` (25%: 0.75 to 1.25 times the published value, both ends in)."""
    if row["phase"] == "trend":
        return bool(row["predicted"] == row["published"])
    return abs(row["predicted"] / row["published"] - 1.0) <= tolerance


def table(rows: list[dict[str, Any]]) -> str:
    header = [
        "protocol",
        "claim",
        "unit",
        "published",
        "predicted",
        "low",
        "high",
        "ratio",
        "within 25%",
        "diagnosis",
    ]
    body = []
    for r in rows:
        diag = r["_diagnosis"]
        if r["_published_diagnosis"]:
            diag = f"published {r['_published_diagnosis']}; predicted {diag}"
        body.append(
            [
                r["protocol"],
                r["claim"],
                r["unit"],
                f"{r['published']:g}",
                f"{r['predicted']:.2f}",
                f"{r['low']:.2f}",
                f"{r['high']:.2f}",
                f"{r['predicted'] / r['published']:.2f}",
                ("yes" if within(r) else "no") if scored(r) else "calibration",
                diag,
            ]
        )
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(b) for b in body])


def scores(rows: list[dict[str, Any]]) -> str:
    """One line per protocol: rows within 25%, and (stated) the speedups and gains within 25%."""
    out = []
    for protocol in ("stated", "transfer"):
        shown = [r for r in rows if r["protocol"] == protocol]
        rs = [r for r in shown if scored(r)]
        if not rs:
            continue
        ok = sum(within(r) for r in rs)
        line = f"{protocol}: {ok} of {len(rs)} rows within 25% ({100 * ok / len(rs):.0f}%)"
        ratios = [r for r in rs if r["phase"] in ("speedup", "gain")]
        if ratios:
            line += f"; speedups and gains {sum(within(r) for r in ratios)} of {len(ratios)}"
        if len(shown) > len(rs):
            line += f" ({len(shown) - len(rs)} calibration row(s) shown, not scored)"
        out.append(line)
    return "\n".join(out)


JSON_KEYS = (
    "claim",
    "system",
    "source",
    "unit",
    "published",
    "predicted",
    "protocol",
    "phase",
    "low",
    "high",
    "calibration",
)


def json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in JSON_KEYS} for r in rows]


def write_json(rows: list[dict[str, Any]], path: str) -> None:
    """The rows as a JSON list, written whole or not at all (an interrupt leaves the old file)."""
    _dump_json(json_rows(rows), path)


def _dump_json(obj: Any, path: str) -> None:
    """``obj`` as indented JSON at ``path``, written whole or not at all. A path that cannot be
    written at the end (its folder removed during the run, a full disk) is one line on stderr and
    exit status 1 (``SystemExit``), not a traceback: the table has been printed by then."""

    def dump(p: Path) -> None:
        with open(p, "w") as f:
            json.dump(obj, f, indent=1)

    try:
        write_atomic(path, dump)
    except OSError as e:
        raise SystemExit(
            f"python -m scenarios.published: --json {path}: cannot write it ({e.strerror or e}); the "
            "table above was printed, not saved"
        ) from None


DESCRIPTION = "Predict published results of real systems from their stated setups (and by transfer)."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scenarios.published", description=DESCRIPTION)
    ap.add_argument("--json", metavar="FILE", help="write the rows as a JSON list")
    ap.add_argument("--workers", type=int, default=1, metavar="N", help="processes for the runs (default 1)")
    ap.add_argument(
        "--april-dapo",
        action="store_true",
        help="instead of the table: APRIL's gain with DAPO's dynamic-sampling filter in both arms, "
        "over filter rates (a diagnosis, not scored; about 6 s; --seeds N, --json FILE)",
    )
    ap.add_argument(
        "--april-offpolicy",
        action="store_true",
        help="instead of the table: APRIL's off-policy ratio against its README's, over length scales "
        "and spreads (held out, about 4 s in one process; --json writes its rows)",
    )
    ap.add_argument(  # listed here so --help shows it; --april-dapo's own parser reads it
        "--seeds", type=int, metavar="N", help="with --april-dapo only: seeds 0 .. N - 1 (default 1)"
    )
    given = sys.argv[1:] if argv is None else argv
    if "--april-dapo" in given:  # its own flags (--seeds): scenarios.published.april.dapo_main
        from scenarios.published.april import dapo_main

        return dapo_main(list(given))
    args = ap.parse_args(given)
    if args.seeds is not None:
        ap.error("--seeds goes with --april-dapo only (the table and --april-offpolicy fix their seeds)")
    if (problem := workers_problem(args.workers)) is not None:
        ap.error(problem)
    check_output(ap, "--json", args.json)  # before the runs
    if args.april_offpolicy:
        return _april_offpolicy(ap.prog, args.json)
    t0 = time.perf_counter()

    def progress(text: str) -> None:
        print(f"{time.perf_counter() - t0:6.1f} s  {text}", file=sys.stderr, flush=True)

    try:
        with sigterm_as_interrupt():
            rows = predict(workers=args.workers, progress=progress)
            print(table(rows))
            print(f"\n{scores(rows)}\n{time.perf_counter() - t0:.0f} s wall, {args.workers} worker(s)")
            if args.json:
                write_json(rows, args.json)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: one line, and --json is whole or untouched
        kept = f"; {args.json} was not written" if args.json else ""
        print(f"{ap.prog}: interrupted{kept}", file=sys.stderr)
        return 130
    return 0


def _april_offpolicy(prog: str, path: str | None) -> int:
    """``--april-offpolicy``: the sensitivity table (:func:`scenarios.published.april.
    offpolicy_sensitivity`), and its rows as JSON with ``--json``; an interrupt is one line."""
    from scenarios.published.april import offpolicy_report, offpolicy_sensitivity

    try:
        with sigterm_as_interrupt():
            rows = offpolicy_sensitivity()
            print(offpolicy_report(rows))
            if path:
                _dump_json(rows, path)
    except KeyboardInterrupt:
        kept = f"; {path} was not written" if path else ""
        print(f"{prog}: interrupted{kept}", file=sys.stderr)
        return 130
    return 0
