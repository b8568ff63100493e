"""Text tables from a probe result dict (fresh, or loaded from JSON written on another machine)."""

from __future__ import annotations

from typing import Any

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
