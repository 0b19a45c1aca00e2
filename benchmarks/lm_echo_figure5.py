"""Figure 5 of the data-echoing paper on this project's LM (benchmarks/lm.py --part figure5):
fresh tokens needed to reach a held-out bits-per-byte target against the echo factor e,
at two batch sizes, over seeds.

Each (batch size, e, seed) is one in-process run of the small LM (benchmarks/lm_common.py)
with batch echo (echo.stage batch, as the paper's Transformer experiments; --f5-stage
before_augment for example echo), stopped at the target or at a budget of fresh tokens.
Fresh tokens to target are those of the evaluation that crossed it (summary.json's
fresh_examples_to_target: nothing interpolated); a run that missed counts at its budget.
Per point: how many seeds reached the target, and the median over all seeds with the misses
at their budget (min and max beside it); a point whose median is a miss (most seeds
missed) has only a bound. The target is fixed before the runs (issue 64): with `--f5-target
pilot` (the default) an e = 1 run of seed 100 per batch size over the whole budget, its
held-out bits per byte at 70% of its evaluations (benchmarks/ttt.py), the higher (easier)
of the batch sizes' values, so e = 1 reaches it at every batch size.

What a repeated token is worth, from the medians: a run at e trains e x F(e) tokens of which
F(e) are fresh; if the (e - 1) x F(e) repeats were each worth w fresh ones, F(1) = F(e) x
(1 + w (e - 1)), so

    w(e) = (F(1) / F(e) - 1) / (e - 1)

(1 on the dotted line F(1)/e: a repeat as good as a fresh token; 0: worthless). The
script states, per batch size, the first e at which w falls below --worth (default 0.5:
a repeat worth less than half a fresh token) and the e with the fewest fresh tokens (the
most useful factor, the paper's reading of its Figure 5: between 4 and 8 at batch 1024,
above 16 at 4096). Unlike the paper, the optimizer settings are the same for every point
(no search per point).

-> results/lm_echo_figure5.json, lm_echo_figure5.png
"""

from __future__ import annotations

import statistics
from pathlib import Path

import lm_common
import ttt
from common import save


def fresh_budget(a, e: float) -> int:
    """Fresh tokens a run at e may read: --f5-budget-tokens, or less where e times it would
    train more than --f5-trained-cap times it (a run at e trains e x its fresh tokens)."""
    return int(min(a.f5_budget_tokens, a.f5_trained_cap * a.f5_budget_tokens / e))


def one_run(a, c: lm_common.Corpus, batch: int, e: float, seed: int) -> dict:
    budget_tokens = fresh_budget(a, e)
    budget = budget_tokens // c.seq_len
    # the same spacing in fresh tokens at every e: f5_evals evaluations in the full budget
    k = lm_common.evals_for(c, batch, a.f5_budget_tokens // c.seq_len, a.f5_evals)
    s = lm_common.run([f"echo.stage={a.f5_stage if e > 1 else 'none'}", f"echo.factor={e}",
                       f"train.batch_size={batch}", f"seed={seed}", f"train.target={a.f5_target}",
                       f"train.max_fresh_examples={budget}", f"train.evals_per_epoch={k}", *a.set],
                      f"b{batch}-e{e:g}-s{seed}")
    hit = s["fresh_examples_to_target"]
    return {"batch_size": batch, "factor": e, "seed": seed, "reached": hit is not None,
            "fresh_tokens_to_target": hit * c.seq_len if hit is not None else None,
            "fresh_tokens_or_budget": (hit if hit is not None else budget) * c.seq_len,
            "budget_tokens": budget * c.seq_len, "evals_per_epoch": k, "evaluations": len(s["history"]),
            "fresh_tokens": s["text"]["fresh_tokens"], "trained_tokens": s["text"]["trained_tokens"],
            "best_bits_per_byte": s["best_metric"], "steps": s["steps"], "wall_s": s["wall_s"],
            "train_loop_s": s["train_loop_s"], "eval_s": s["eval_s"],
            "curve": [(h["fresh_examples"] * c.seq_len, h.get("bits_per_byte")) for h in s["history"]]}


def pilot_target(a, c: lm_common.Corpus) -> dict:
    """--f5-target pilot: e = 1 of ttt.PILOT_SEED per batch size, no target, the whole budget;
    the target is the highest of their bits per byte at 70% of their evaluations."""
    per_batch = []
    for batch in a.f5_batch_sizes:
        k = lm_common.evals_for(c, batch, a.f5_budget_tokens // c.seq_len, a.f5_evals)
        s = lm_common.run(["echo.stage=none", f"train.batch_size={batch}", f"seed={ttt.PILOT_SEED}",
                           "train.target=null", f"train.max_fresh_examples={a.f5_budget_tokens // c.seq_len}",
                           f"train.evals_per_epoch={k}", *a.set], f"pilot-b{batch}")
        per_batch.append({"batch_size": batch, **ttt.pilot_value(ttt.curve(s, "bits_per_byte"), "bits_per_byte")})
    return {"target": max(p["target"] for p in per_batch), "per_batch_size": per_batch}


def points(runs: list[dict]) -> list[dict]:
    """Per (batch size, e), over every seed with misses at their budget: the median, min and
    max fresh tokens, how many reached, and whether the median is a reached value."""
    keys = sorted({(r["batch_size"], r["factor"]) for r in runs})
    out = []
    for b, e in keys:
        mine = [r for r in runs if (r["batch_size"], r["factor"]) == (b, e)]
        vals = [r["fresh_tokens_or_budget"] for r in mine]
        reached = sum(r["reached"] for r in mine)
        out.append({"batch_size": b, "factor": e, "seeds": len(mine), "reached": reached,
                    "budget_tokens": max(r["budget_tokens"] for r in mine), "n": len(vals),
                    "median": statistics.median(vals), "min": min(vals), "max": max(vals),
                    "median_reached": 2 * reached > len(mine)})
    return out


def worth(pts: list[dict], threshold: float) -> list[dict]:
    """Per batch size: w(e) for every factor (module docstring; a factor no seed of which
    reached the target within its budget B has w(e) < (F(1) / B - 1) / (e - 1), kept as
    worth_at_most), the first e whose w is below `threshold`, and the e with the fewest
    median fresh tokens to target (misses at their budget)."""
    out = []
    for b in sorted({p["batch_size"] for p in pts}):
        mine = sorted((p for p in pts if p["batch_size"] == b), key=lambda p: p["factor"])
        base = next((p["median"] for p in mine if p["factor"] == 1 and p["median_reached"]), None)
        reached = [p for p in mine if p["median_reached"]]
        ws = [{"factor": p["factor"], "fresh_tokens": p["median"], "on_line": base / p["factor"] if base else None,
               "worth": (base / p["median"] - 1) / (p["factor"] - 1) if base and p["factor"] > 1 else None,
               "worth_at_most": None}
              for p in reached]
        ws += [{"factor": p["factor"], "fresh_tokens": None, "on_line": base / p["factor"] if base else None,
                "worth": None, "worth_at_most": (base / p["budget_tokens"] - 1) / (p["factor"] - 1)
                if base and p["factor"] > 1 else None} for p in mine if not p["median_reached"]]
        ws.sort(key=lambda w: w["factor"])
        below = next((w["factor"] for w in ws if bound(w) is not None and bound(w) < threshold), None)
        best = min(reached, key=lambda p: p["median"])["factor"] if reached else None
        out.append({"batch_size": b, "worth": ws, "worth_threshold": threshold, "first_e_below": below,
                    "most_useful_e": best, "largest_e": mine[-1]["factor"] if mine else None,
                    "unreached_factors": [p["factor"] for p in mine if not p["median_reached"]],
                    "reached": {f"{p['factor']:g}": f"{p['reached']}/{p['seeds']}" for p in mine},
                    "statement": statement(b, base, ws, below, best, threshold, mine)})
    return out


def bound(w: dict) -> float | None:
    """w(e) where measured, else its upper bound from the budget (None: neither)."""
    return w["worth"] if w["worth"] is not None else w["worth_at_most"]


def statement(b, base, ws, below, best, threshold, mine) -> str:
    if base is None:
        return f"batch {b}: e = 1 did not reach the target, so nothing is compared"
    if below is not None:
        where = f"from e = {below:g} on, a repeated token is worth less than {threshold:g} of a fresh one"
    else:
        known = max((w["factor"] for w in ws if w["worth"] is not None), default=1.0)
        beyond = ", ".join(f"{w['factor']:g}" for w in ws if w["factor"] > known)
        where = (f"up to e = {known:g} a repeated token is worth at least {threshold:g} of a fresh one"
                 + (" (the largest tested)" if not beyond else
                    f" (e = {beyond} did not reach the target within its budget)"))
    reached = ", ".join(f"e = {p['factor']:g} {p['reached']}/{p['seeds']}" for p in mine)
    return f"batch {b}: {where}; the fewest fresh tokens to target at e = {best:g} (reached: {reached})"


def plot(pts: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for batch in sorted({p["batch_size"] for p in pts}):
        mine = sorted((p for p in pts if p["batch_size"] == batch and p["n"]), key=lambda p: p["factor"])
        if not mine:
            continue
        xs, mean = [p["factor"] for p in mine], [p["median"] for p in mine]
        err = [[m - p["min"] for m, p in zip(mean, mine, strict=True)],
               [p["max"] - m for m, p in zip(mean, mine, strict=True)]]
        line = ax.errorbar(xs, mean, yerr=err, marker="o", capsize=4, label=f"batch {batch}")
        base = next((p["median"] for p in mine if p["factor"] == 1), None)
        if base:
            ax.plot(xs, [base / x for x in xs], linestyle="dotted", color=line[0].get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("echo factor e")
    ax.set_ylabel("fresh tokens to target")
    ax.set_title(title + "\n(median, bars min..max over seeds, a miss at its budget; dotted: e = 1 / e)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def part(a, results: Path, scale: dict) -> list[str]:
    c = lm_common.corpus(a.set)
    pilot = None
    if a.f5_target == "pilot":
        pilot = pilot_target(a, c)
        a.f5_target = pilot["target"]
        print(f"figure5: target {a.f5_target:.4f} bits per byte from the pilots {pilot['per_batch_size']}", flush=True)
    runs = []
    for batch in a.f5_batch_sizes:
        for e in a.f5_factors:
            for seed in a.f5_seeds:
                r = one_run(a, c, batch, e, seed)
                runs.append(r)
                print(f"figure5 batch {batch} e {e:g} seed {seed}: "
                      + (f"{r['fresh_tokens_to_target']:,.0f} fresh tokens to target" if r["reached"]
                         else f"not reached (best {r['best_bits_per_byte']:.4f} bpb)")
                      + f", {r['steps']} steps, {r['wall_s']:.1f} s", flush=True)
    pts = points(runs)
    verdict = worth(pts, a.f5_worth)
    for v in verdict:
        print(v["statement"], flush=True)
    results.mkdir(parents=True, exist_ok=True)
    title = f"small LM, {a.f5_stage} echo, target {float(a.f5_target):.3f} bits/byte, {len(a.f5_seeds)} seeds"
    png = plot(pts, results / f"{a.f5_name}.png", title)
    save(a.f5_name, {"stage": a.f5_stage, "target_bits_per_byte": float(a.f5_target), "pilot": pilot,
                     "corpus": vars(c),
                             "model": lm_common.SMALL, "extra": a.set, "scale": scale, "points": pts,
                             "worth": verdict, "runs": runs, "plot": png.name},
         a, path=results / f"{a.f5_name}.json", seeds=a.f5_seeds)
    return [a.f5_name]
