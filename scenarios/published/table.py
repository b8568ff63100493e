"""The table and the command line: ``python -m scenarios.published [--json FILE]``.

Ctrl-C or SIGTERM stops the command with one line and exit status 130; ``--json`` is written to a
temporary file and moved into place, so it is whole or untouched (:mod:`pipesim.io.interrupts`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pipesim.io.interrupts import sigterm_as_interrupt, write_atomic
from scenarios.outputs import check_output
from scenarios.published.claims import CLAIMS, Claim


def predict(claims: tuple[Claim, ...] = CLAIMS) -> list[dict[str, Any]]:
    """The rows: each claim's published and predicted value (and the diagnosis text)."""
    out = []
    for c in claims:
        pred = float(c.predict())
        out.append(
            {
                "claim": c.claim,
                "system": c.system,
                "source": c.source,
                "unit": c.unit,
                "published": c.published,
                "predicted": pred,
                "_diagnosis": c.diagnosis() if c.diagnosis else "",
                "_published_diagnosis": c.published_diagnosis,
            }
        )
    return out


def within(row: dict[str, Any], tolerance: float = 0.25) -> bool:
    return abs(row["predicted"] / row["published"] - 1.0) <= tolerance


def table(rows: list[dict[str, Any]]) -> str:
    header = ["claim", "source", "unit", "published", "predicted", "ratio", "within 25%", "diagnosis"]
    body = []
    for r in rows:
        diag = r["_diagnosis"]
        if r["_published_diagnosis"]:
            diag = f"published {r['_published_diagnosis']}; predicted {diag}"
        body.append(
            [
                r["claim"],
                r["source"].split(";")[0],
                r["unit"],
                f"{r['published']:g}",
                f"{r['predicted']:.2f}",
                f"{r['predicted'] / r['published']:.2f}",
                "yes" if within(r) else "no",
                diag,
            ]
        )
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(b) for b in body])


def json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("claim", "system", "source", "unit", "published", "predicted")
    return [{k: r[k] for k in keys} for r in rows]


def write_json(rows: list[dict[str, Any]], path: str) -> None:
    """The rows as a JSON list, written whole or not at all (an interrupt leaves the old file)."""

    def dump(p: Path) -> None:
        with open(p, "w") as f:
            json.dump(json_rows(rows), f, indent=1)

    write_atomic(path, dump)


DESCRIPTION = "Predict published results of real systems from their stated setups."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scenarios.published", description=DESCRIPTION)
    ap.add_argument("--json", metavar="FILE", help="write the rows as a JSON list")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    check_output(ap, "--json", args.json)  # before the runs
    t0 = time.perf_counter()
    try:
        with sigterm_as_interrupt():
            rows = predict()
            print(table(rows))
            n_ok = sum(within(r) for r in rows)
            print(f"\n{n_ok} of {len(rows)} rows within 25%; {time.perf_counter() - t0:.0f} s wall")
            if args.json:
                write_json(rows, args.json)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: one line, and --json is whole or untouched
        kept = f"; {args.json} was not written" if args.json else ""
        print(f"{ap.prog}: interrupted{kept}", file=sys.stderr)
        return 130
    return 0
