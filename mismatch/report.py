"""Text tables from a probe result dict (fresh, or loaded from JSON written on another machine), and
:func:`check_result`, which checks a loaded one field by field before any table or figure reads it."""

from __future__ import annotations

import math
from typing import Any

from mismatch.checks import refuse, shown
from mismatch.stats import MismatchRow, format_rows


def _rows(entries: list[dict[str, Any]]) -> list[MismatchRow]:
    fields = MismatchRow.__dataclass_fields__
    return [MismatchRow(**{k: e[k] for k in fields}) for e in entries]


def _incomplete(result: dict[str, Any]) -> list[str]:
    """The line saying a result was saved part-way (``"incomplete"``), or none."""
    if "incomplete" not in result:
        return []
    stage = (result["incomplete"] or {}).get("stage", "?")
    return [
        f"INCOMPLETE: the run stopped during {stage}: its rows and the stages after it are missing "
        "or partial; the main comparisons, bins and ratios are whole"
    ]


def format_report(result: dict[str, Any]) -> str:
    """Every table of the probe, each headed by the model's label."""
    m, cfg, env = result["model"], result["config"], result["env"]
    n_tok = result["comparisons"][0]["n_tokens"]
    n = cfg["batch_n"]
    out = [
        f"=== mismatch probe: {m['label']} ===",
        f"weights: {m['weights'].upper()} | {m['n_params']:,} parameters | tokenizer {m['tokenizer']} | "
        f"attention {m['attn_implementation']}",
        f"{cfg['n_prompts']} prompts x {cfg['new_tokens']} new tokens = {n_tok} sampled tokens | "
        f"seed {cfg['seed']} | device {env['device']} ({env['device_name']}) | "
        f"torch {env['torch']} | transformers {env['transformers']}",
        *_incomplete(result),
        "",
        format_rows(f"comparison ({n_tok} sampled tokens)", _rows(result["comparisons"])),
        "",
        "By engine probability of the sampled token (mean |d|):",
    ]
    keys = [c["key"] for c in result["comparisons"]]
    out.append(f"{'engine probability':<20} | tokens | " + " | ".join(f"{k:>17}" for k in keys))
    for b in result["bins"]:
        hi = "]" if b["hi"] >= 1.0 else ")"
        vals = " | ".join(
            f"{b['mean_abs_d'][k]:17.2e}" if b["mean_abs_d"][k] is not None else f"{'-':>17}" for k in keys
        )
        out.append(f"[{b['lo']:.1f}, {b['hi']:.1f}{hi:<11} | {b['n_tokens']:6d} | {vals}")
    r = result["ratios"]
    out += [
        "",
        f"bf16 trainer (batch 1) / engine: token ratios pi/mu in "
        f"[{r['token_min']:.3f}, {r['token_max']:.3f}]; sequence ratios in [{r['seq_min']:.3f}, "
        f"{r['seq_max']:.3f}]; tokens over TIS cap 2: {r['frac_tokens_over_tis_cap']:.1%}; "
        f"outside IcePop [0.5, 5]: {r['frac_tokens_outside_icepop']:.1%}",
        "",
        format_rows("engine batch composition (ex. 6)", _rows(result["engine_batches"])),
    ]
    if result["knobs"]:
        out += ["", f"Knobs, on both sides, same tokens (bf16 model; N = {n}):"]
        c2 = f"b1 vs b{n}: mean"
        head = f"{'knob':<38} | b1 vs engine: mean |    p99   | {c2} |    p99"
        out.append(head)
        for k in result["knobs"]:
            if not k["available"]:
                out.append(f"{k['name']:<38} | n/a: {k['note']}")
                continue
            a, b = k["engine_vs_trainer_b1"], k["trainer_b1_vs_bN"]
            out.append(
                f"{k['name']:<38} | {a['mean']:18.2e} | {a['p99']:.2e} | "
                f"{b['mean']:{len(c2)}.2e} | {b['p99']:.2e}"
            )
    t = result["timings_s"]
    out += ["", "timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in t.items())]
    if m["weights"] != "real":
        out.append(
            "NOTE: random weights, not Qwen3 itself: the numbers show the mechanism on these kernels, "
            "not the chapter's magnitudes."
        )
    return "\n".join(out)


#: the statistics of a row (:class:`MismatchRow`): absolute differences and their quantiles, in nats
ROW_STATS = ("mean", "median", "p99", "max", "max_abs_seq_sum")


def check_result(result: dict[str, Any]) -> None:
    """Every field :func:`format_report` and :mod:`mismatch.figure` read from a loaded result (JSON
    brought back from another machine) has its type and range: :class:`FieldError` naming the key
    path (``comparisons[2].mean``) otherwise, so a hand-edited or damaged file is one error instead
    of a traceback inside a table or figure, or a table that prints it (a mean |d| of -1, NaN).

    Bounds are what the probe can write: absolute log-prob differences and their quantiles are
    finite and >= 0; counts are integers (``n_prompts`` and ``batch_n`` >= 2, as ``ProbeConfig``
    requires); token shares are in [0, 1]; ratios pi/mu are >= 0 (infinity allowed: ``exp`` of a
    large log-ratio); every row counts ``n_prompts x new_tokens`` tokens and the bins share them out.
    Signed per-token differences (``samples.d``) need only be finite. Fields neither reads
    (``samples.engine_logp``, ``env.cuda``, a knob's ``key``) are not checked. The top-level keys
    and ``schema`` are the loader's (:func:`mismatch.cli.load_result`)."""
    for name in ("model", "config", "env", "ratios", "samples", "timings_s"):
        _dict(result[name], name)
    m, cfg, env = result["model"], result["config"], result["env"]
    for key in ("label", "weights", "tokenizer", "attn_implementation"):
        _str(m, "model", key)
    _int(m, "model", "n_params", 0)
    for key in ("device", "device_name", "torch", "transformers"):
        _str(env, "env", key)
    n_prompts = _int(cfg, "config", "n_prompts", 2)
    _int(cfg, "config", "new_tokens", 1)
    _int(cfg, "config", "seed", 0)
    _int(cfg, "config", "batch_n", 2, n_prompts)
    n_tok = n_prompts * cfg["new_tokens"]
    incomplete = result.get("incomplete")
    if incomplete is not None:
        _str(_dict(incomplete, "incomplete"), "incomplete", "stage")

    comparisons = _list(result["comparisons"], "comparisons", nonempty=True)
    keys: list[str] = []
    for i, row in enumerate(comparisons):
        where = f"comparisons[{i}]"
        key = _str(_dict(row, where), where, "key")
        if key in keys:
            raise refuse(f"{where}.key", f"repeats comparisons[{keys.index(key)}].key {key!r}")
        keys.append(key)
        _row(row, where, n_tok)
    _bins(result["bins"], keys, n_tok)
    for key in ("token_min", "token_max", "seq_min", "seq_max"):
        _number(result["ratios"], "ratios", key, infinite=True)
    for key in ("frac_tokens_over_tis_cap", "frac_tokens_outside_icepop"):
        _number(result["ratios"], "ratios", key, high=1.0)
    for i, row in enumerate(_list(result["engine_batches"], "engine_batches")):
        _row(_dict(row, f"engine_batches[{i}]"), f"engine_batches[{i}]", n_tok)
    for i, knob in enumerate(_list(result["knobs"], "knobs")):
        _knob(_dict(knob, f"knobs[{i}]"), f"knobs[{i}]", n_tok)
    for key in _dict(result["timings_s"], "timings_s"):
        _number(result["timings_s"], "timings_s", key)
    _samples(result["samples"], keys)


def _where(parent: str, key: str | int) -> str:
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}" if parent else key


def _get(d: dict[str, Any], parent: str, key: str) -> Any:
    if key not in d:
        raise refuse(_where(parent, key), "is missing")
    return d[key]


def _dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise refuse(where, f"must be an object, got {shown(value)}")
    return value


def _list(value: Any, where: str, nonempty: bool = False) -> list[Any]:
    if not isinstance(value, list) or (nonempty and not value):
        raise refuse(where, f"must be a {'non-empty ' if nonempty else ''}list, got {shown(value)}")
    return value


def _str(d: dict[str, Any], parent: str, key: str) -> str:
    value = _get(d, parent, key)
    if not isinstance(value, str):
        raise refuse(_where(parent, key), f"must be a string, got {shown(value)}")
    return value


def _int(d: dict[str, Any], parent: str, key: str, low: int, high: int | None = None) -> int:
    value = _get(d, parent, key)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise refuse(_where(parent, key), f"must be an integer {bound}, got {shown(value)}")
    return value


def _number(
    d: dict[str, Any], parent: str, key: str, high: float | None = None, infinite: bool = False
) -> float:
    """A finite number in [0, ``high``] (``infinite``: +inf allowed, NaN never)."""
    value = _get(d, parent, key)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and (math.isfinite(value) or (infinite and value == math.inf))
    if not ok or value < 0 or (high is not None and value > high):
        what = "a number >= 0 (or Infinity)" if infinite else "a finite number >= 0"
        bound = f"{what[:-5]} in [0, {high:g}]" if high is not None else what
        raise refuse(_where(parent, key), f"must be {bound}, got {shown(value)}")
    return float(value)


def _row(row: dict[str, Any], where: str, n_tok: int) -> None:
    """One :class:`MismatchRow`: a name, |d| statistics >= 0, and the run's token count."""
    _str(row, where, "name")
    for key in ROW_STATS:
        _number(row, where, key)
    if _int(row, where, "n_tokens", 1) != n_tok:
        raise refuse(
            f"{where}.n_tokens",
            f"must be config.n_prompts x config.new_tokens ({n_tok}), got {row['n_tokens']}",
        )


def _bins(bins: Any, keys: list[str], n_tok: int) -> None:
    """Each bin: bounds in [0, 1], a token count, and mean |d| (or null: no tokens) per comparison;
    the counts share out every token."""
    counted = 0
    for i, b in enumerate(_list(bins, "bins", nonempty=True)):
        where = f"bins[{i}]"
        _dict(b, where)
        _number(b, where, "lo", high=1.0)
        _number(b, where, "hi", high=1.0)
        counted += _int(b, where, "n_tokens", 0)
        means = _dict(_get(b, where, "mean_abs_d"), f"{where}.mean_abs_d")
        for key in keys:
            if _get(means, f"{where}.mean_abs_d", key) is not None:
                _number(means, f"{where}.mean_abs_d", key)
    if counted != n_tok:
        raise refuse(
            "bins", f"n_tokens must add up to config.n_prompts x config.new_tokens ({n_tok}), got {counted}"
        )


def _knob(knob: dict[str, Any], where: str, n_tok: int) -> None:
    """A knob: its name and ``available``; its two rows where available, else the note why not."""
    _str(knob, where, "name")
    available = _get(knob, where, "available")
    if not isinstance(available, bool):
        raise refuse(f"{where}.available", f"must be true or false, got {shown(available)}")
    if not available:
        _str(knob, where, "note")
        return
    for key in ("engine_vs_trainer_b1", "trainer_b1_vs_bN"):
        _row(_dict(_get(knob, where, key), f"{where}.{key}"), f"{where}.{key}", n_tok)


def _samples(samples: dict[str, Any], keys: list[str]) -> None:
    """``samples.d``: per comparison key, rows of finite signed per-token differences."""
    d = _dict(_get(samples, "samples", "d"), "samples.d")
    for key, rows in d.items():
        where = f"samples.d.{key}"
        if key not in keys:
            raise refuse(where, f"is not a key of comparisons ({', '.join(keys)})")
        for i, row in enumerate(_list(rows, where)):
            for j, x in enumerate(_list(row, f"{where}[{i}]")):
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                    raise refuse(f"{where}[{i}][{j}]", f"must be a finite number, got {shown(x)}")
