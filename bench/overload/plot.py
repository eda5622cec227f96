#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""plot.py DIR: the overload experiment's plots and headline figures (docs/overload.md).

Reads DIR/overload_{naive,guarded,queue_naive,queue_guarded,kill_naive,kill_guarded}.csv
(bench_overload's CSVs, one row per second of arrival; the queue and kill pairs
are optional), writes DIR/overload_slow.png, overload_queue.png and
overload_kill.png with naive and guarded on the same axes, and prints the
headline figures as Markdown tables. Every figure is computed from the CSVs.
"""
import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"naive": "tab:red", "guarded": "tab:blue"}


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k, v in r.items():
            if k not in ("mode", "phase"):
                r[k] = float(v)
    return rows


def phase_ranges(rows):
    """[(name, first, end)] of consecutive runs of the same phase."""
    out = []
    for i, r in enumerate(rows):
        if out and out[-1][0] == r["phase"]:
            out[-1][2] = i + 1
        else:
            out.append([r["phase"], i, i + 1])
    return [tuple(x) for x in out]


def ratio(rows, a, b):
    sa, sb = sum(r[a] for r in rows), sum(r[b] for r in rows)
    return sa / sb if sb else 0.0


def backlog_s(rows):
    """Seconds after the slow phase until the p99 of successes is back to
    normal (within 1.5x + 2 ms of the first normal phase's median p99) for 3
    rows in a row; None if it never is."""
    ph = phase_ranges(rows)
    base = statistics.median(r["ok_p99_ms"] for r in rows[ph[0][1]:ph[0][2]] if r["ok"] > 0)
    limit = 1.5 * base + 2
    end_slow = ph[1][2]
    for s in range(end_slow, len(rows) - 2):
        if all(rows[k]["ok"] > 0 and rows[k]["ok_p99_ms"] <= limit for k in range(s, s + 3)):
            return s - end_slow, base
    return None, base


def slow_figures(rows):
    ph = phase_ranges(rows)
    slow = rows[ph[1][1]:ph[1][2]]
    back, base = backlog_s(rows)
    return {
        "amp": ratio(slow, "attempts", "originals"),
        "goodput_pct": 100 * ratio(slow, "ok", "originals"),
        "ok_per_s": sum(r["ok"] for r in slow) / len(slow),
        "p99": statistics.median(r["ok_p99_ms"] for r in slow if r["ok"] > 0),
        "bulkhead": sum(r["fail_bulkhead"] for r in slow),
        "budget": sum(r["fail_budget"] for r in slow),
        "dep_rejected": sum(r["dep_rejected"] for r in slow),
        "backlog": back,
        "base_p99": base,
    }


def kill_figures(rows):
    down = [i for i, r in enumerate(rows) if r["dep_in_flight"] < 0]
    if not down:
        return None
    killed, back = down[0], down[-1] + 1
    outage = rows[killed:back]
    open_rows = [i for i, r in enumerate(rows) if r["breaker"] >= 1]
    rec = next((s for s in range(back, len(rows)) if rows[s]["goodput_pct"] >= 95), None)
    fails = [r["fail_p50_ms"] for r in outage if r["originals"] > r["ok"]]
    return {
        "down_s": back - killed,
        "amp": ratio(outage, "attempts", "originals"),
        "open_s": (open_rows[-1] - open_rows[0] + 1) if open_rows else 0,
        "open_rows": len(open_rows),
        "fastfail_ms": statistics.median(fails) if fails else 0.0,
        "recovery_s": (rec - back) if rec is not None else None,
        "budget": sum(r["fail_budget"] for r in outage),
    }


def shade(ax, rows):
    for name, a, b in phase_ranges(rows):
        if name != "normal":
            ax.axvspan(a, b, color="0.9", zorder=0)


def plot_slow(runs, path, title):
    fig, axes = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    panels = [
        ("attempts", "attempts sent per s"),
        ("ok", "successes within deadline per s"),
        ("ok_p99_ms", "p99 latency of successes (ms)"),
        ("dep_in_flight", "in flight at the catalog"),
    ]
    for ax, (col, label) in zip(axes, panels):
        shade(ax, runs["naive"])
        for mode, rows in runs.items():
            ax.plot([r["t"] for r in rows], [r[col] for r in rows], color=COLORS[mode],
                    label=mode, lw=1.4)
        if col == "attempts":
            ax.plot([r["t"] for r in runs["naive"]], [r["originals"] for r in runs["naive"]],
                    color="0.3", ls="--", lw=1, label="originals (both)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    axes[0].set_title(title)
    axes[-1].set_xlabel("second of arrival")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def plot_kill(runs, path):
    fig, axes = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True)
    panels = [("attempts", "attempts sent per s"), ("ok", "successes within deadline per s"),
              ("fail_p50_ms", "median latency of failures (ms)")]
    for ax, (col, label) in zip(axes, panels):
        for mode, rows in runs.items():
            down = [r["t"] for r in rows if r["dep_in_flight"] < 0]
            if down and mode == "guarded":
                ax.axvspan(min(down), max(down) + 1, color="0.9", zorder=0)
            ax.plot([r["t"] for r in rows], [r[col] for r in rows], color=COLORS[mode],
                    label=mode, lw=1.4)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    g = runs["guarded"]
    ax2 = axes[1].twinx()
    ax2.step([r["t"] for r in g], [r["breaker"] for r in g], where="post", color="tab:green",
             lw=1, label="guarded breaker (0 closed, 1 open, 2 half-open)")
    ax2.set_ylim(-0.2, 6)
    ax2.set_yticks([0, 1, 2])
    ax2.legend(loc="center right", fontsize=8)
    for ax in axes:
        ax.legend(loc="upper right", fontsize=8)
    axes[0].set_title("50 GetProduct/s; catalog kill -9 (grey: down) then restarted")
    axes[-1].set_xlabel("second of arrival")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def fmt(v, spec="{:.2f}"):
    return "never" if v is None else spec.format(v)


SLOW_ROWS = [("amp", "attempts per original", "{:.2f}"),
             ("goodput_pct", "goodput, % of originals", "{:.1f}"),
             ("ok_per_s", "successes within deadline per s", "{:.1f}"),
             ("p99", "p99 of successes, median over seconds (ms)", "{:.1f}"),
             ("dep_rejected", "catalog slot rejections (RESOURCE_EXHAUSTED)", "{:.0f}"),
             ("bulkhead", "client bulkhead rejections", "{:.0f}"),
             ("budget", "retry-budget denials", "{:.0f}"),
             ("backlog", "backlog after the slow phase (s)", "{:.0f}")]


def slow_report(d, prefix, png, title, heading):
    """One normal -> slow -> normal pair: its plot and its table."""
    paths = {m: os.path.join(d, f"overload_{prefix}{m}.csv") for m in ("naive", "guarded")}
    if not all(os.path.exists(p) for p in paths.values()):
        return
    runs = {m: load(p) for m, p in paths.items()}
    plot_slow(runs, os.path.join(d, png), title)
    f = {m: slow_figures(r) for m, r in runs.items()}
    print(f"\n| {heading} | naive | guarded |\n|---|---|---|")
    for key, label, spec in SLOW_ROWS:
        print(f"| {label} | {fmt(f['naive'][key], spec)} | {fmt(f['guarded'][key], spec)} |")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "docs/bench"
    slow_report(d, "", "overload_slow.png",
                "50 GetProduct/s open loop; catalog 4 slots, 20 ms -> 120 ms (grey) -> 20 ms",
                "slow phase")
    slow_report(d, "queue_", "overload_queue.png",
                "the same, but the catalog queues up to 100 calls for its 4 slots",
                "slow phase, catalog queueing")
    kpaths = {m: os.path.join(d, f"overload_kill_{m}.csv") for m in ("naive", "guarded")}
    if all(os.path.exists(p) for p in kpaths.values()):
        kill = {m: load(p) for m, p in kpaths.items()}
        plot_kill(kill, os.path.join(d, "overload_kill.png"))
        k = {m: kill_figures(r) for m, r in kill.items()}
        print("\n| kill run | naive | guarded |\n|---|---|---|")
        for key, label, spec in [("down_s", "seconds of arrivals with catalog down", "{:.0f}"),
                                 ("amp", "attempts per original while down", "{:.2f}"),
                                 ("open_s", "breaker open or half-open (s, first to last)", "{:.0f}"),
                                 ("fastfail_ms", "median latency of a failure while down (ms)", "{:.2f}"),
                                 ("recovery_s", "recovery: restart -> goodput >= 95% (s)", "{:.0f}"),
                                 ("budget", "retry-budget denials while down", "{:.0f}")]:
            vals = [fmt(k[m][key], spec) if k[m] else "?" for m in ("naive", "guarded")]
            print(f"| {label} | {vals[0]} | {vals[1]} |")


if __name__ == "__main__":
    main()
