#!/usr/bin/env python3
"""The soak's samples (soak-samples.csv, written by SoakRigTests) as a table for BENCHMARKS.md,
the bounds that "flat" means checked over the run's second half (exit status 1 when one is
missed), and trend plots as one SVG: resident memory per terminal, and the delay of the talks A -> B.

    scripts/soak_report.py SAMPLES.csv OUT.svg

Standard library only (the plot is a few polylines): nothing to install for a report.
"""
import csv
import statistics
import sys


def load(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows.append({
                "s": float(r["seconds"]), "room": r["room"], "rss": int(r["rss_kib"]), "fds": int(r["descriptors"]),
                "threads": int(r["threads"]), "cpu": float(r["cpu_s"]), "xruns": int(r["xruns"]),
                "m2e": float(r["mouth_to_ear_ms"]) if r["mouth_to_ear_ms"] else None,
                "buffer": float(r["buffer_delay_ms"]) if r["buffer_delay_ms"] else None,
                "drift": float(r["drift_ppm"]) if r["drift_ppm"] else None,
            })
    return rows


def table(rows):
    rooms = sorted({r["room"] for r in rows})
    out = ["| terminal | cycles | resident memory first → last (KiB) | growth per hour after the first cycle | "
           "descriptors | threads | CPU (% of one core) | xruns |", "|---|---|---|---|---|---|---|---|"]
    for room in rooms:
        s = [r for r in rows if r["room"] == room]
        first, last = s[0], s[-1]
        hours = (last["s"] - first["s"]) / 3600
        per_hour = (last["rss"] - first["rss"]) / hours if hours > 0 else 0
        cpu = 100 * (last["cpu"] - first["cpu"]) / (last["s"] - first["s"]) if last["s"] > first["s"] else 0
        out.append(f"| {room} | {len(s)} | {first['rss']} → {last['rss']} | {per_hour:+.0f} KiB/h | "
                   f"{min(r['fds'] for r in s)}-{max(r['fds'] for r in s)} | {min(r['threads'] for r in s)}-{max(r['threads'] for r in s)} | "
                   f"{cpu:.1f} | {first['xruns']} → {last['xruns']} |")
    b = [r for r in rows if r["room"] == "roomb"]
    talks = [r["m2e"] for r in b if r["m2e"] is not None]
    buffers = [r["buffer"] for r in b if r["buffer"] is not None]
    drifts = [r["drift"] for r in b if r["drift"] is not None]
    if talks:
        n = max(1, len(talks) // 10)
        out.append("")
        out.append(f"Mouth-to-ear A → B over {len(talks)} talks the machine left alone: median {statistics.median(talks):.1f} ms; "
                   f"first tenth {statistics.median(talks[:n]):.1f} ms, last tenth {statistics.median(talks[-n:]):.1f} ms; "
                   f"range {min(talks):.1f}-{max(talks):.1f} ms. B's buffer delay median {statistics.median(buffers):.1f} ms "
                   f"(range {min(buffers):.1f}-{max(buffers):.1f}); drift estimate {min(drifts):.1f} to {max(drifts):.1f} ppm.")
    return "\n".join(out)


# The bounds "flat" means here, checked over the run's second half (the first holds the warm-up:
# caches, the history filling to its bound, the allocator's pools):
MEMORY_KIB_PER_HOUR = 512    # a leak of 1.4 KiB per cycle (a call's state, say) would pass it
DESCRIPTOR_SPREAD = 3        # a control connection or two open at the moment of a sample
CPU_CREEP = 1.25             # the last quarter's CPU at most this times the second's, plus a point
DELAY_DRIFT_MS = 5.0         # the last tenth's median mouth-to-ear within this of the first tenth's


def quarters(s):
    """The samples of one terminal cut into four spans of equal time: (start, end) sample pairs."""
    t0, t1 = s[0]["s"], s[-1]["s"]
    cuts = [t0 + (t1 - t0) * k / 4 for k in range(5)]
    spans = []
    for k in range(4):
        inside = [r for r in s if cuts[k] <= r["s"] <= cuts[k + 1]]
        if len(inside) >= 2:
            spans.append((inside[0], inside[-1]))
    return spans


def bounds(rows):
    """One line per bound: what was measured, and whether it held."""
    out, held = [], True
    for room in sorted({r["room"] for r in rows}):
        s = [r for r in rows if r["room"] == room]
        half = [r for r in s if r["s"] >= (s[0]["s"] + s[-1]["s"]) / 2]
        if len(half) < 2:
            continue
        hours = (half[-1]["s"] - half[0]["s"]) / 3600
        growth = (half[-1]["rss"] - half[0]["rss"]) / hours if hours > 0 else 0
        fds = max(r["fds"] for r in half) - min(r["fds"] for r in half)
        threads = max(r["threads"] for r in half) - min(r["threads"] for r in half)
        spans = quarters(s)
        gains = [b["rss"] - a["rss"] for a, b in spans]
        cpu = [100 * (b["cpu"] - a["cpu"]) / (b["s"] - a["s"]) for a, b in spans if b["s"] > a["s"]]
        ok_mem, ok_fds, ok_threads = growth <= MEMORY_KIB_PER_HOUR, fds <= DESCRIPTOR_SPREAD, threads == 0
        ok_cpu = len(cpu) < 4 or cpu[3] <= CPU_CREEP * cpu[1] + 1
        held &= ok_mem and ok_fds and ok_threads and ok_cpu
        out.append(f"- {room}: memory by quarter +{', +'.join(str(g) for g in gains)} KiB; second half {growth:+.0f} KiB/h "
                   f"(bound {MEMORY_KIB_PER_HOUR}: {'met' if ok_mem else 'MISSED'}); descriptors spread {fds} "
                   f"(bound {DESCRIPTOR_SPREAD}: {'met' if ok_fds else 'MISSED'}); threads spread {threads} "
                   f"({'met' if ok_threads else 'MISSED'}); CPU by quarter {' / '.join(f'{c:.1f}' for c in cpu)} % "
                   f"(last at most {CPU_CREEP} x the second + 1: {'met' if ok_cpu else 'MISSED'})")
    talks = [r["m2e"] for r in rows if r["room"] == "roomb" and r["m2e"] is not None]
    if len(talks) >= 20:
        n = len(talks) // 10
        first, last = statistics.median(talks[:n]), statistics.median(talks[-n:])
        ok = abs(last - first) <= DELAY_DRIFT_MS
        held &= ok
        out.append(f"- mouth-to-ear A -> B: first tenth {first:.1f} ms, last tenth {last:.1f} ms "
                   f"(bound {DELAY_DRIFT_MS:.0f} ms apart: {'met' if ok else 'MISSED'})")
    out.insert(0, f"Flat within the bounds: {'yes' if held else 'NO'}")
    return "\n".join(out), held


def svg(rows, path):
    width, height, pad = 760, 460, 50
    panels = [("resident memory, KiB", [(room, [(r["s"], r["rss"]) for r in rows if r["room"] == room])
                                        for room in sorted({r["room"] for r in rows})]),
              ("delay A → B, ms", [("mouth to ear", [(r["s"], r["m2e"]) for r in rows if r["m2e"] is not None]),
                                   ("B's buffer", [(r["s"], r["buffer"]) for r in rows if r["buffer"] is not None])])]
    colours = ["#1f6fb4", "#d9822b", "#2a9d55"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    panel_h = (height - pad) / 2
    t_max = max(r["s"] for r in rows) or 1
    for i, (title, series) in enumerate(panels):
        top = 20 + i * panel_h
        h = panel_h - 40
        values = [v for _, pts in series for _, v in pts]
        lo, hi = min(values), max(values)
        if hi - lo < 1e-9:
            hi = lo + 1
        lo, hi = lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)
        parts.append(f'<text x="{pad}" y="{top - 4}">{title}: {lo:.0f}-{hi:.0f} over {t_max / 60:.0f} min</text>')
        parts.append(f'<rect x="{pad}" y="{top}" width="{width - 2 * pad}" height="{h}" fill="none" stroke="#999"/>')
        for j, (name, pts) in enumerate(series):
            if not pts:
                continue
            xy = " ".join(f"{pad + (width - 2 * pad) * t / t_max:.1f},{top + h - h * (v - lo) / (hi - lo):.1f}" for t, v in pts)
            parts.append(f'<polyline points="{xy}" fill="none" stroke="{colours[j % 3]}" stroke-width="1.2"/>')
            parts.append(f'<text x="{width - pad - 120}" y="{top + 14 + 14 * j}" fill="{colours[j % 3]}">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    samples = load(sys.argv[1])
    if not samples:
        sys.exit(f"{sys.argv[1]}: no samples")
    print(table(samples))
    text, held = bounds(samples)
    print()
    print(text)
    svg(samples, sys.argv[2])
    sys.exit(0 if held else 1)
