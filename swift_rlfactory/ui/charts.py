"""The Live metrics charts as Vega-Lite specs: one pure function from metric points to a chart.

A line and a dot per value (so a lone first step is visible), non-finite values left out, long series
thinned to :data:`MAX_POINTS`; why each: docs/ui.md#live-metrics-charts.
"""

from __future__ import annotations

import math
from typing import Any

MAX_POINTS = 500  # per metric; a 10 000-step run would otherwise send ~10^5 points a refresh
MAX_DOTS = 60  # a series this short gets a dot per value; a longer one is a line alone (a dot smear)
EMPTY = "no values logged yet"  # what a chart without points says


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def thin(points: list[dict[str, Any]], limit: int = MAX_POINTS) -> tuple[list[dict[str, Any]], int]:
    """At most ``limit`` points per metric (every ``stride``-th step and the last one), and the stride."""
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for point in points:
        by_metric.setdefault(point["metric"], []).append(point)
    stride = max(math.ceil(len(series) / limit) for series in by_metric.values()) if by_metric else 1
    if stride == 1:
        return points, 1
    kept = []
    for series in by_metric.values():
        kept.extend(series[::stride])
        if (len(series) - 1) % stride:
            kept.append(series[-1])
    return kept, stride


def _padded(low: float, high: float, pad: float) -> list[float] | None:
    """An explicit domain around a single value (vega draws a zero-width domain as one bare tick)."""
    return [low - pad, high + pad] if low == high else None


def line_chart(title: str, points: list[dict[str, Any]], height: int = 200) -> dict[str, Any]:
    """A Vega-Lite spec drawing ``points`` (``{"step", "metric", "value"}``, finite numbers) as one line with
    dots per metric; without points, the chart's title over "no values logged yet".
    """
    if not points:
        return {
            "title": title,
            "height": height,
            "data": {"values": [{}]},
            "layer": [
                {
                    "mark": {
                        "type": "text",
                        "text": EMPTY,
                        "fill": "#5f6b7a",
                        "strokeOpacity": 0,
                        "fontSize": 13,
                    },
                    # centred on axes that are not drawn; gradio's theming reads each layer's encoding
                    "encoding": {
                        axis: {"datum": 0, "type": "quantitative", "scale": {"domain": [-1, 1]}, "axis": None}
                        for axis in ("x", "y")
                    },
                }
            ],
            "usermeta": {"embedOptions": {"renderer": "svg"}},
        }
    clean, stride = thin(points)
    lengths: dict[str, int] = {}
    for point in clean:
        lengths[point["metric"]] = lengths.get(point["metric"], 0) + 1
    clean = [{**p, "dot": lengths[p["metric"]] <= MAX_DOTS} for p in clean]
    metrics = list(lengths)
    steps = [p["step"] for p in clean]
    values = [p["value"] for p in clean]
    x_scale: dict[str, Any] = {"zero": False, "nice": False, "padding": 8}  # px: edge dots whole
    if domain := _padded(min(steps), max(steps), 1):
        x_scale["domain"] = domain
    span = max(steps) - min(steps) or 2
    y_scale: dict[str, Any] = {"zero": False}
    if domain := _padded(min(values), max(values), abs(values[0]) * 0.1 or 0.5):
        y_scale["domain"] = domain
    encoding = {
        "x": {
            "field": "step",
            "type": "quantitative",
            "title": "step",
            "scale": x_scale,
            "axis": {"format": "d", "tickCount": min(span, 10)},  # whole steps: no "1 1 2 2" labels
        },
        "y": {"field": "value", "type": "quantitative", "title": "value", "scale": y_scale},
        # gradio swaps the range for its theme's palette; it needs one entry per metric to do so
        "color": {
            "field": "metric",
            "type": "nominal",
            "title": "metric",
            "scale": {"domain": metrics, "range": ["#000000"] * len(metrics)},
            "legend": {"orient": "bottom", "columns": 4},
        },
    }
    dots = {
        **encoding,
        "tooltip": [
            {"field": "metric", "type": "nominal"},
            {"field": "step", "type": "quantitative"},
            {"field": "value", "type": "quantitative", "format": ".4g"},
        ],
    }
    layers: list[dict[str, Any]] = [{"mark": {"type": "line"}, "encoding": encoding}]
    if any(p["dot"] for p in clean):  # an empty layer would log vega warnings about its extent
        layers.append(
            {
                "mark": {"type": "point", "filled": True, "size": 40, "strokeWidth": 0},
                "transform": [{"filter": "datum.dot"}],
                "encoding": dots,
            }
        )
    return {
        "title": title if stride == 1 else f"{title} (1 step in {stride} shown)",
        "height": height,
        "data": {"values": clean},
        "layer": layers,
        "usermeta": {"embedOptions": {"renderer": "svg"}},  # drawn as DOM nodes: small, and testable
    }
