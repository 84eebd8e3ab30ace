"""The comparison report as one self-contained HTML page: the figures' tables and three plots
drawn here as inline SVG (score against cost, tokens per action through a game, the share of
cached input).

The page fetches nothing: inline styles, no script, no external resource, and a
Content-Security-Policy saying so. Every text from the records is escaped, so an id holding
markup shows as the text it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from satchel.harness.report import (
    COLUMNS,
    Runs,
    by_config,
    by_game,
    formatted,
    tokens_per_step,
)

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""Inline styles and nothing else: no script, no fetch, no image, no font, no frame."""

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 370, 16, 244
"""The plotting area inside each plot; the legend is right of it."""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
figure { display: inline-block; margin: 0 2em 2em 0; vertical-align: top; }
svg text { font-size: 11px; fill: #222; }
.axis { stroke: #444; }
"""


def report_page(runs: Runs) -> str:
    """The whole page for `runs`."""
    configs = runs.configs
    colour = {config: PALETTE[i % len(PALETTE)] for i, config in enumerate(configs)}
    per_config = by_config(runs)
    sections = [
        "<h2>Per config</h2>",
        _table("config", per_config),
        *(
            f"<h2>{escape(game)}</h2>" + _table("config", rows)
            for game, rows in by_game(runs).items()
        ),
        "<h2>Plots</h2>",
        _figure("Score against cost per config", _score_against_cost(per_config, colour)),
        _figure(
            "Tokens per action through a game (mean over the config's games)",
            _tokens_per_action(tokens_per_step(runs), colour),
        ),
        _figure("Share of input tokens read from the cache", _cached_share(per_config, colour)),
    ]
    if runs.skipped:
        items = "".join(f"<li>{escape(line)}</li>" for line in runs.skipped)
        sections.append(f"<h2>Skipped</h2><ul>{items}</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        "<title>satchel report</title>"
        f"<style>{STYLE}</style></head><body><h1>satchel report</h1>"
        + "".join(sections)
        + "</body></html>\n"
    )


def _table(label: str, rows: Mapping[str, Mapping[str, Any]]) -> str:
    head = "".join(f"<th>{escape(name)}</th>" for name in (label, *COLUMNS))
    body = "".join(
        f"<tr><td>{escape(name)}</td>"
        + "".join(f"<td>{escape(formatted(column, row[column]))}</td>" for column in COLUMNS)
        + "</tr>"
        for name, row in rows.items()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(title: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(title)}</figcaption>{svg}</figure>"


def _svg(title: str, body: str) -> str:
    return (
        f'<svg width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{escape(title)}</title>{body}</svg>'
    )


def _scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    """Maps `low..high` onto `start..end` (a flat range onto its middle)."""
    if high <= low:
        return lambda _value: (start + end) / 2
    return lambda value: start + (value - low) / (high - low) * (end - start)


def _axes(
    x_label: str, y_label: str, x_range: tuple[str, str] | None, y_range: tuple[str, str]
) -> str:
    """The two axes with their labels, and the ends of each range (`x_range` None: no x ends)."""
    middle = (TOP + BOTTOM) / 2
    x_ends = (
        f'<text x="{LEFT}" y="{BOTTOM + 16}">{escape(x_range[0])}</text>'
        f'<text x="{RIGHT}" y="{BOTTOM + 16}" text-anchor="end">{escape(x_range[1])}</text>'
        if x_range is not None
        else ""
    )
    return (
        f'<line class="axis" x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}"/>'
        f'<line class="axis" x1="{LEFT}" y1="{BOTTOM}" x2="{LEFT}" y2="{TOP}"/>'
        + x_ends
        + f'<text x="{(LEFT + RIGHT) / 2}" y="{BOTTOM + 36}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text x="{LEFT - 4}" y="{BOTTOM}" text-anchor="end">{escape(y_range[0])}</text>'
        f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{escape(y_range[1])}</text>'
        f'<text x="14" y="{middle}" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle})">{escape(y_label)}</text>'
    )


def _legend(colour: Mapping[str, str]) -> str:
    return "".join(
        f'<rect x="{RIGHT + 16}" y="{TOP + 4 + 14 * i}" width="10" height="10" fill="{fill}"/>'
        f'<text x="{RIGHT + 30}" y="{TOP + 13 + 14 * i}">{escape(config)}</text>'
        for i, (config, fill) in enumerate(colour.items())
    )


def _score_against_cost(
    per_config: Mapping[str, Mapping[str, Any]], colour: Mapping[str, str]
) -> str:
    """A point per config: its total cost against its mean score."""
    points = {
        config: (float(row["cost"] or 0.0), float(row["mean score"] or 0.0))
        for config, row in per_config.items()
    }
    top_cost = max((cost for cost, _ in points.values()), default=0.0)
    top_score = max([115.0, *(score for _, score in points.values())])
    x = _scale(0.0, top_cost, LEFT, RIGHT)
    y = _scale(0.0, top_score, BOTTOM, TOP)
    marks = "".join(
        f'<circle cx="{x(cost):.1f}" cy="{y(score):.1f}" r="5" fill="{colour[config]}">'
        f"<title>{escape(config)}: score {score:.2f}, cost ${cost:.4f}</title></circle>"
        for config, (cost, score) in points.items()
    )
    axes = _axes("cost (USD)", "mean score", ("0", f"{top_cost:.4f}"), ("0", f"{top_score:.0f}"))
    return _svg("score against cost", axes + marks + _legend(colour))


def _tokens_per_action(series: Mapping[str, Sequence[float]], colour: Mapping[str, str]) -> str:
    """A line per config: mean tokens at each step index."""
    longest = max((len(values) for values in series.values()), default=0)
    top = max((value for values in series.values() for value in values), default=0.0)
    x = _scale(1.0, float(max(longest, 1)), LEFT, RIGHT)
    y = _scale(0.0, top, BOTTOM, TOP)
    lines = "".join(
        f'<polyline fill="none" stroke="{colour[config]}" stroke-width="2" points="'
        + " ".join(f"{x(i + 1.0):.1f},{y(value):.1f}" for i, value in enumerate(values))
        + f'"><title>{escape(config)}</title></polyline>'
        for config, values in series.items()
        if values
    )
    axes = _axes("step", "tokens", ("1", str(longest)), ("0", f"{top:,.0f}"))
    return _svg("tokens per action", axes + lines + _legend(colour))


def _cached_share(per_config: Mapping[str, Mapping[str, Any]], colour: Mapping[str, str]) -> str:
    """A bar per config: cached input tokens over all input tokens."""
    count = max(len(per_config), 1)
    slot = (RIGHT - LEFT) / count
    y = _scale(0.0, 1.0, BOTTOM, TOP)
    bars = []
    for i, (config, row) in enumerate(per_config.items()):
        share = row["cached tokens"] / row["input tokens"] if row["input tokens"] else 0.0
        left = LEFT + i * slot + slot * 0.15
        bars.append(
            f'<rect x="{left:.1f}" y="{y(share):.1f}" width="{slot * 0.7:.1f}" '
            f'height="{y(0.0) - y(share):.1f}" fill="{colour[config]}">'
            f"<title>{escape(config)}: {share:.1%} cached</title></rect>"
            f'<text x="{left + slot * 0.35:.1f}" y="{y(share) - 4:.1f}" '
            f'text-anchor="middle">{share:.0%}</text>'
        )
    axes = _axes("config", "cached share of input", None, ("0%", "100%"))
    return _svg("cached input share", axes + "".join(bars) + _legend(colour))
