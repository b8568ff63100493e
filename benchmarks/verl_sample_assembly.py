"""What verl's fully-async trainer spends assembling its samples, measured on this host.

verl's ``recipe/fully_async_policy`` trainer times ``_get_samples_from_queue`` as ``gen``
(``fully_async_trainer.py`` at volcengine/verl b25bb7d4f, ``fit``). That function waits for
``require_batches x ppo_mini_batch_size`` prompts (128 in the README's runs) and then, after the
wait, unpickles every one (``ray.cloudpickle.loads``) and assembles them
(``detach_utils.assemble_batch_from_rollout_samples``: ``DataProto.concat``, then
``_balance_batch``, which reorders the batch). Each prompt was padded by the rollouter to the full
``prompt_length + response_length`` (``postprocess_agent_loop_outputs``): ``prompts``,
``responses``, ``response_mask``, ``input_ids``, ``attention_mask`` and ``position_ids`` as int64,
``rollout_log_probs`` as float32, for each of ``rollout.n`` responses: 21.2 MB a prompt at the
README's 2K + 28K tokens and n 16, whatever the response's length.

pipesim's model of verl leaves this host work out: its ``gen`` of a trainer-bound fully-async run is
the trainer's wait alone (0.7 s and 8.8 s predicted for the README's 33.14 s and 28.46 s;
``docs/published.md``, "verlasync"). This script times the same operations on tensors of the same
shapes, so the size of the cost can be read on the host a user trains on, rather than assumed:
per prompt, and per README step (``--per-step`` prompts: 512 = 4 trainer steps of 128, as the
README sums ``timing_s/gen`` over a parameter version). It leaves out Ray's transfer of each
pickled prompt from the message queue to the trainer, and the rollouter's own padding and
pickling (timed apart, as ``dumps``, since they cost the rollouter, not the trainer's ``gen``).

Run: ``.venv/bin/python benchmarks/verl_sample_assembly.py`` (about 20 s and 3 GB at the defaults:
32 prompts a round, 3 rounds; medians printed). Ctrl-C stops it with one line and exit status 130.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time

INT64_TENSORS = 6  # prompts, responses, response_mask, input_ids, attention_mask, position_ids
MAX_BYTES = 6 << 30  # one round's prompts, pickled and unpickled and assembled, stay under 4 x this


def prompt_bytes(n: int, prompt_len: int, response_len: int) -> int:
    """The padded tensors of one prompt (``rollout.n`` responses), in bytes."""
    full = prompt_len + response_len
    int64 = n * (prompt_len + 2 * response_len + 3 * full) * 8
    return int64 + n * response_len * 4  # rollout_log_probs, float32


def one_prompt(n: int, prompt_len: int, response_len: int, seed: int) -> dict[str, object]:
    """One prompt's padded tensors, as verl's rollouter builds them (values are arbitrary)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    full = prompt_len + response_len

    def ids(width: int) -> torch.Tensor:
        return torch.randint(0, 150_000, (n, width), generator=g)

    return {
        "prompts": ids(prompt_len),
        "responses": ids(response_len),
        "response_mask": torch.ones(n, response_len, dtype=torch.int64),
        "input_ids": ids(full),
        "attention_mask": torch.ones(n, full, dtype=torch.int64),
        "position_ids": torch.arange(full).repeat(n, 1),
        "rollout_log_probs": torch.zeros(n, response_len, dtype=torch.float32),
    }


def one_round(args: argparse.Namespace, seed: int) -> dict[str, float]:
    """Seconds per prompt of each operation, on ``args.prompts`` prompts."""
    import torch

    made = [one_prompt(args.n, args.prompt_len, args.response_len, seed + i) for i in range(args.prompts)]
    t0 = time.perf_counter()
    blobs = [pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL) for p in made]
    t1 = time.perf_counter()
    del made
    t2 = time.perf_counter()
    loaded = [pickle.loads(b) for b in blobs]
    t3 = time.perf_counter()
    del blobs
    t4 = time.perf_counter()
    batch = {k: torch.cat([p[k] for p in loaded]) for k in loaded[0]}
    t5 = time.perf_counter()
    del loaded
    order = torch.randperm(args.prompts * args.n, generator=torch.Generator().manual_seed(seed))
    t6 = time.perf_counter()
    balanced = {k: v.index_select(0, order) for k, v in batch.items()}
    t7 = time.perf_counter()
    del batch, balanced
    per = 1.0 / args.prompts
    return {
        "dumps": (t1 - t0) * per,
        "loads": (t3 - t2) * per,
        "concat": (t5 - t4) * per,
        "reorder": (t7 - t6) * per,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from pipesim.io.argtypes import int_in  # bounded flags (imports pipesim here, not at the top)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--prompts", type=int_in(1, 256), default=32, help="prompts a round, 1 to 256 (default 32)"
    )
    ap.add_argument(
        "--n", type=int_in(1, 128), default=16, help="responses a prompt, rollout.n, 1 to 128 (default 16)"
    )
    ap.add_argument(
        "--prompt-len",
        type=int_in(1, 32768),
        default=2048,
        help="max_prompt_length, padded to, 1 to 32,768 (default 2,048)",
    )
    ap.add_argument(
        "--response-len",
        type=int_in(1, 131072),
        default=28 * 1024,
        help="max_response_length, padded to, 1 to 131,072 (default 28,672: the README's 28K)",
    )
    ap.add_argument(
        "--rounds", type=int_in(1, 100), default=3, help="rounds, 1 to 100; medians printed (default 3)"
    )
    ap.add_argument(
        "--per-step", type=int_in(1, 1 << 20), default=512, help="prompts per README step (default 512)"
    )
    args = ap.parse_args(argv)
    size = args.prompts * prompt_bytes(args.n, args.prompt_len, args.response_len)
    if size > MAX_BYTES:
        ap.error(
            f"--prompts x the padded prompt (--n, --prompt-len, --response-len) is {size / 2**30:.1f} GiB a "
            f"round, over {MAX_BYTES / 2**30:.0f} GiB (a round holds about four copies): fewer --prompts"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it."""
    args = parse_args(argv)
    from pipesim.io.interrupts import interrupt_once

    mb = prompt_bytes(args.n, args.prompt_len, args.response_len) / 1e6
    rounds: list[dict[str, float]] = []
    with interrupt_once():  # SIGTERM as Ctrl-C
        try:
            print(
                f"{args.prompts} prompts of {args.n} x ({args.prompt_len:,} + {args.response_len:,}) padded "
                f"tokens ({mb:.1f} MB each), median of {args.rounds} rounds",
                flush=True,
            )
            for r in range(args.rounds):
                rounds.append(one_round(args, seed=1000 * r))
        except KeyboardInterrupt:
            print(
                f"verl_sample_assembly: interrupted in round {len(rounds) + 1}; no row printed",
                file=sys.stderr,
            )
            return 130
    print(f"{'operation':<28}{'ms/prompt':>10}{'MB/s':>9}{'s per step':>12}")
    trainer = 0.0
    for op in ("dumps", "loads", "concat", "reorder"):
        s = statistics.median(r[op] for r in rounds)
        side = "rollouter" if op == "dumps" else "trainer"
        trainer += s if side == "trainer" else 0.0
        print(f"{op + f' ({side})':<28}{1e3 * s:>10.1f}{mb / s:>9,.0f}{s * args.per_step:>12.1f}")
    print(f"{'trainer gen, after the wait':<28}{1e3 * trainer:>10.1f}{'':>9}{trainer * args.per_step:>12.1f}")
    print(
        f"(a README step is {args.per_step} prompts; verl's README gives gen 21.26, 28.46 and 33.14 s a step "
        "for its fully-async 16:16, 32:32 and 64:64 runs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
