#!/usr/bin/python3
"""Draws the ratio tables of a `make bench` report as bar charts (python3-matplotlib).

    /usr/bin/python3 bench/plot.py build/bench.md docs/img

Every Markdown table whose line of text before it speaks of ratios ("Speed ratios, ...") becomes
OUTDIR/bench-<heading>.svg, named after the nearest heading above it: one group of bars per row
(a size, a layer), one bar per column (nest against a peer) from 1 to the ratio, on a logarithmic
axis (up: nest is faster). Tables other benchmarks add later are drawn the same way. The
report is rewritten with a link to each picture under its table (`![...](img/bench-....svg)`,
the path docs/performance.md uses), so that the pasted report shows them. The SVG files are
byte-stable for the same report.
"""
import os
import re
import sys

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams["svg.hashsalt"] = "nest-bench"
matplotlib.rcParams["font.size"] = 9


def slug(text):
    """The name of a heading's picture: its words before any colon."""
    s = re.sub(r"[^a-z0-9]+", "-", text.split(":")[0].lower()).strip("-")
    return s[:60].rstrip("-") or "table"


def number(cell):
    """The figure of a cell ('1.06', '**0.89**', '31.47x', '4.82 (differs)'), or None."""
    m = re.search(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", cell.replace("**", ""))
    return float(m.group(0)) if m and not cell.strip().startswith("-" * 2) else None


def tables(lines):
    """(first line, last line, heading, header cells, rows) of each ratio table: a table whose
    line of text before it speaks of ratios."""
    heading, before = "", ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            start = i
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            if "ratio" in before.lower() and len(rows) > 2 and set(rows[1][0]) <= set("-: "):
                yield start, i - 1, heading, rows[0], rows[2:]
            before = ""
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            before = ""
        elif line.strip() and not line.startswith("!["):
            before = line
        i += 1


def draw(path, heading, header, rows):
    series = header[1:]
    cats = [r[0] for r in rows]
    vals = [[number(r[k + 1]) if k + 1 < len(r) else None for r in rows] for k in range(len(series))]
    if not any(v for col in vals for v in col if v):
        return False
    fig, ax = plt.subplots(figsize=(7.2, 3.8), dpi=100)
    width = 0.8 / max(1, len(series))
    colors = plt.get_cmap("tab10").colors
    for k, name in enumerate(series):
        xs = [j + (k - (len(series) - 1) / 2) * width for j in range(len(cats))]
        # each bar runs from 1 to its ratio: up when nest is faster, down when it is slower
        ys = [v - 1 if v and v > 0 else 0 for v in vals[k]]
        ax.bar(xs, ys, width * 0.92, bottom=1, label=name, color=colors[k % len(colors)])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats)
    ax.set_xlabel(header[0], labelpad=1)
    ax.set_ylabel("ratio (above 1: nest is faster)")
    ax.set_title(heading, fontsize=10)
    ax.grid(axis="y", which="both", linewidth=0.3, alpha=0.5)
    ax.legend(fontsize=7, ncol=min(3, len(series)), loc="upper center",
              bbox_to_anchor=(0.5, -0.17), frameon=False)
    fig.tight_layout()
    if path.endswith(".svg"):
        fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None})
    else:
        fig.savefig(path)
    plt.close(fig)
    return True


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: plot.py REPORT.md OUTDIR")
    report, outdir = argv[1], argv[2]
    with open(report) as f:
        lines = f.read().split("\n")
    os.makedirs(outdir, exist_ok=True)
    links = {}
    names = set()
    for start, end, heading, header, rows in tables(lines):
        name = "bench-" + slug(heading)
        while name in names:
            name += "-2"
        names.add(name)
        if draw(os.path.join(outdir, name + ".svg"), heading, header, rows):
            links[end] = "![%s: speed ratios](img/%s.svg)" % (heading, name)
            print("plot.py: %s/%s.svg" % (outdir, name))
    out = []
    for i, line in enumerate(lines):
        if line.startswith("![") and "](img/bench-" in line:
            if out and out[-1] == "":
                out.pop()  # a link of an earlier run, and the blank line before it
            continue
        out.append(line)
        if i in links:
            out += ["", links[i]]
    with open(report, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main(sys.argv)
