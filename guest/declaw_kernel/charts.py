"""Structured data from a matplotlib figure: the `e2b/chart` value of a figure's result.

E2B's code interpreter sends, next to a figure's PNG, what the figure shows (lines and their
points, bars and their values, pie wedges, box statistics) so that a client can redraw or
reason about a chart without reading pixels. This module rebuilds that extraction for the
guest: `chart_figure_to_dict(figure)` returns the same plain dict E2B's `chart_figure_to_dict`
gives (a pydantic `model_dump` there; str/float/int/None/list/dict here, as it goes through
msgpack), and the host turns it into `declaw_wasm.charts` models.

Classification follows E2B (reference §1.7): one axes with data gives one chart, several give a
`superchart`; an axes is a `line` chart if it holds only lines, `box_and_whisker` if only
path patches and lines, then (2-point horizontal or vertical lines set aside) `scatter`, `pie`
or `bar` if only point collections, wedges or rectangles, and `unknown` otherwise. Where E2B's
extraction guesses and gets it wrong, this one reads what matplotlib records instead: a bar
container's own orientation, a bar's tick by its position, every outlier of a box (not just a
lone one), a box plot's orientation from its whiskers. Colorbar axes are not charts of their
own. Every number is rounded to 8 significant digits.

Only the standard library is imported at module level (the module is loaded into the warm
snapshot); matplotlib and numpy are imported when a figure is converted, by which time the
figure's own code has imported them. Nothing here raises: an axes that cannot be read becomes
an `unknown` chart, a figure that cannot be read gives `unknown` too.
"""

from __future__ import annotations

import datetime
import math
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from typing import Any  # matplotlib's and numpy's objects are Any: the host does not have them

__all__ = ["chart_figure_to_dict"]

# E2B's unit pattern: "Time (s)" -> "s", "Speed [m/s]" -> "m/s".
UNIT_PATTERN = re.compile(r"\s\((.*?)\)|\[(.*?)\]")
# matplotlib's automatic labels for unlabelled lines/collections and bar containers.
AUTO_LINE_LABEL = re.compile(r"_child(\d+)")
AUTO_CONTAINER_LABEL = re.compile(r"_container(\d+)")
SIGNIFICANT_DIGITS = 8
NO_LINE_STYLES = ("None", "none", "", " ")


def chart_figure_to_dict(figure: Any) -> dict[str, Any] | None:
    """The chart a figure shows, or None when no axes has data (E2B sends no chart then)."""
    try:
        axes = [ax for ax in figure.get_axes() if not _is_colorbar(ax)]
    except Exception:
        return None
    if not any(_has_data(ax) for ax in axes):
        return None
    try:
        if len(axes) > 1:
            return {
                "type": "superchart",
                "title": _suptitle(figure),
                "elements": [_axes_chart(ax) for ax in axes],
            }
        return _axes_chart(axes[0])
    except Exception:
        return _unknown(title=_suptitle(figure) if len(axes) > 1 else _title(axes[0]))


# ---------------------------------------------------------------------------------------------
# Classification


def _axes_chart(ax: Any) -> dict[str, Any]:
    """One axes as a chart dict; an axes that defeats the extraction is `unknown`, not an error."""
    try:
        kind = _chart_type(ax)
        if kind == "line":
            return _line_chart(ax)
        if kind == "scatter":
            return _scatter_chart(ax)
        if kind == "bar":
            return _bar_chart(ax)
        if kind == "pie":
            return _pie_chart(ax)
        if kind == "box_and_whisker":
            return _box_chart(ax)
    except Exception:
        pass
    return _unknown(title=_title(ax))


def _chart_type(ax: Any) -> str:
    """E2B's rules, applied to the axes' own artists (texts never count, nor pie shadows)."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Shadow, Wedge
    from matplotlib.text import Text

    artists = [a for a in _artists(ax) if not isinstance(a, (Text, Shadow))]
    if all(isinstance(a, Line2D) for a in artists):
        # a default `boxplot` (patch_artist=False) draws its boxes as closed rectangles of lines
        return "box_and_whisker" if any(_is_box_outline(a) for a in artists) else "line"
    if all(isinstance(a, (PathPatch, Line2D)) for a in artists):
        return "box_and_whisker"
    artists = [a for a in artists if not (isinstance(a, Line2D) and _is_grid_line(a))]
    if all(isinstance(a, PathCollection) for a in artists):
        return "scatter"
    if all(isinstance(a, Wedge) for a in artists):
        return "pie"
    if all(isinstance(a, Rectangle) for a in artists):
        return "bar"
    return "unknown"


def _artists(ax: Any) -> list[Any]:
    """What was drawn into the axes, in order (`_children` is private, so fall back if gone)."""
    children = getattr(ax, "_children", None)
    if children is not None:
        return list(children)
    return [*ax.lines, *ax.patches, *ax.collections, *ax.images, *ax.texts, *ax.tables,
            *ax.artists]


def _is_grid_line(line: Any) -> bool:
    """A 2-point horizontal or vertical line (axhline, axvline, a reference line): E2B sets these
    aside as grid lines rather than data."""
    try:
        x, y = list(line.get_xdata()), list(line.get_ydata())
        return len(x) == 2 and len(y) == 2 and bool(x[0] == x[1] or y[0] == y[1])
    except Exception:
        return False


def _has_data(ax: Any) -> bool:
    try:
        return bool(ax.has_data())
    except Exception:
        return False


def _is_colorbar(ax: Any) -> bool:
    """A colorbar's axes is a legend for another axes, not a chart (E2B makes it one more
    element of a superchart)."""
    return getattr(ax, "_colorbar", None) is not None


# ---------------------------------------------------------------------------------------------
# Chart kinds


def _unknown(title: str | None = None) -> dict[str, Any]:
    return {"type": "unknown", "title": title, "elements": []}


def _chart(ax: Any, kind: str) -> dict[str, Any]:
    return {"type": kind, "title": _title(ax), "elements": []}


def _chart2d(ax: Any, kind: str) -> dict[str, Any]:
    chart = _chart(ax, kind)
    x_label, y_label = _text_or_none(ax.get_xlabel()), _text_or_none(ax.get_ylabel())
    chart.update(x_label=x_label, y_label=y_label, x_unit=_unit(x_label), y_unit=_unit(y_label))
    return chart


def _swap_axes(chart: dict[str, Any]) -> None:
    """Horizontal bars and boxes: report the category axis as x and the value axis as y."""
    chart["x_label"], chart["y_label"] = chart["y_label"], chart["x_label"]
    chart["x_unit"], chart["y_unit"] = chart["y_unit"], chart["x_unit"]


def _point_chart(ax: Any, kind: str) -> dict[str, Any]:
    chart = _chart2d(ax, kind)
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        axis_kind = _axis_kind(ax, axis)
        ticks = [_coordinate(t, axis_kind, ax, dates_as_ticks=True) for t in _tolist(axis.get_ticklocs())]
        labels = [str(label.get_text()) for label in axis.get_ticklabels()]
        chart[name + "_ticks"] = ticks
        chart[name + "_tick_labels"] = labels
        chart[name + "_scale"] = _scale(axis, axis_kind, ticks, labels)
    return chart


def _line_chart(ax: Any) -> dict[str, Any]:
    chart = _point_chart(ax, "line")
    x_kind, y_kind = _axis_kind(ax, ax.xaxis), _axis_kind(ax, ax.yaxis)
    for line in ax.get_lines():
        if _is_grid_line(line):
            continue
        xs = _coordinates(line.get_xdata(), x_kind, ax)
        ys = _coordinates(line.get_ydata(), y_kind, ax)
        chart["elements"].append({"label": _series_label(line.get_label()),
                                  "points": [[x, y] for x, y in zip(xs, ys, strict=False)]})
    return chart


def _scatter_chart(ax: Any) -> dict[str, Any]:
    from matplotlib.collections import PathCollection

    chart = _point_chart(ax, "scatter")
    x_kind, y_kind = _axis_kind(ax, ax.xaxis), _axis_kind(ax, ax.yaxis)
    for collection in ax.collections:
        if not isinstance(collection, PathCollection):
            continue
        offsets = _offsets(collection)
        xs = _coordinates([p[0] for p in offsets], x_kind, ax, axis=ax.xaxis)
        ys = _coordinates([p[1] for p in offsets], y_kind, ax, axis=ax.yaxis)
        chart["elements"].append({"label": _series_label(collection.get_label()),
                                  "points": [[x, y] for x, y in zip(xs, ys, strict=False)]})
    return chart


def _bar_chart(ax: Any) -> dict[str, Any]:
    """One element per bar: its category (tick label), its series (container label), its
    length. Horizontal bars are reported with the category axis as x, as E2B does."""
    from matplotlib.patches import Rectangle

    chart = _chart2d(ax, "bar")
    # (group, [(low, high, value)]) per bar container, on the category axis
    series: list[tuple[str, list[tuple[float, float, float]]]] = []
    horizontal_votes = 0
    for container in ax.containers:
        bars = [bar for bar in container if isinstance(bar, Rectangle)]
        if not bars:
            continue
        horizontal = _bars_horizontal(container, bars)
        horizontal_votes += 1 if horizontal else -1
        entries = []
        for bar in bars:
            if horizontal:
                start, size, value = bar.get_y(), bar.get_height(), bar.get_width()
            else:
                start, size, value = bar.get_x(), bar.get_width(), bar.get_height()
            entries.append((min(start, start + size), max(start, start + size), value))
        series.append((_group_label(container.get_label()), entries))
    horizontal = horizontal_votes > 0
    if horizontal:
        _swap_axes(chart)
    category_axis = ax.yaxis if horizontal else ax.xaxis
    labels = _category_labels(ax, category_axis, [entries for _, entries in series])
    for (group, entries), names in zip(series, labels, strict=False):
        for (_, _, value), name in zip(entries, names, strict=False):
            chart["elements"].append({"label": name, "group": group, "value": _number(value)})
    return chart


def _bars_horizontal(container: Any, bars: list[Any]) -> bool:
    orientation = getattr(container, "orientation", None)
    if orientation in ("horizontal", "vertical"):
        return orientation == "horizontal"
    # No recorded orientation (a hand-made container): E2B's guess, equal heights mean barh.
    heights = [bar.get_height() for bar in bars]
    return len(heights) > 1 and all(h == heights[0] for h in heights)


def _pie_chart(ax: Any) -> dict[str, Any]:
    from matplotlib.patches import Wedge

    chart = _chart(ax, "pie")
    for wedge in ax.patches:
        if isinstance(wedge, Wedge):
            chart["elements"].append({
                "label": str(wedge.get_label()),
                "angle": _number(abs(float(wedge.theta2) - float(wedge.theta1))),
                "radius": _number(wedge.r),
            })
    return chart


def _box_chart(ax: Any) -> dict[str, Any]:
    """Boxes from the box patches (quartiles), whiskers from the lines that leave a box's end,
    medians from the line across it, outliers from marker-only lines beyond the whiskers."""
    from matplotlib.patches import PathPatch

    chart = _chart2d(ax, "box_and_whisker")
    patches = [p for p in ax.patches if isinstance(p, PathPatch)]
    outlines = [line for line in ax.get_lines() if _is_box_outline(line)]
    shapes: list[tuple[float, float, float, float]] = []  # per box: the (x, y) extremes of its outline
    for vertices in [_tolist(p.get_path().vertices) for p in patches] + [_tolist(o.get_xydata()) for o in outlines]:
        xs = [float(v[0]) for v in vertices]
        ys = [float(v[1]) for v in vertices]
        if xs and ys:
            shapes.append((min(xs), max(xs), min(ys), max(ys)))
    lines = [_line_points(line) for line in ax.get_lines() if line not in outlines]
    vertical = _boxes_vertical(shapes, lines)
    if not vertical:
        _swap_axes(chart)
    boxes: list[dict[str, Any]] = []
    for x0, x1, y0, y1 in shapes:
        low, high, q1, q3 = (x0, x1, y0, y1) if vertical else (y0, y1, x0, x1)
        boxes.append({"low": low, "high": high, "q1": q1, "q3": q3, "median": None,
                      "median_width": -1.0, "min": None, "max": None, "cap_min": None,
                      "cap_max": None, "points": []})
    _read_box_lines(boxes, lines, vertical)

    labels = _category_labels(ax, ax.xaxis if vertical else ax.yaxis,
                              [[(b["low"], b["high"], None) for b in boxes]])[0]
    for box, label in zip(boxes, labels, strict=False):
        low = _first(box["min"], box["cap_min"], box["q1"])
        high = _first(box["max"], box["cap_max"], box["q3"])
        outliers = [v for v in box["points"]
                    if v < low - _eps(low) or v > high + _eps(high)]
        chart["elements"].append({
            "label": label,
            "min": _number(low),
            "first_quartile": _number(box["q1"]),
            "median": None if box["median"] is None else _number(box["median"]),
            "third_quartile": _number(box["q3"]),
            "max": _number(high),
            "outliers": [_number(v) for v in outliers],
        })
    return chart


def _read_box_lines(boxes: list[dict[str, Any]], lines: list[tuple[list[tuple[float, float]], bool]],
                    vertical: bool) -> None:
    """Give each box what the lines over it say: outlier points (marker-only lines), its median
    and caps (2-point lines across it), its whiskers (2-point lines along the value axis)."""
    seen_fliers: set[tuple[tuple[float, float], ...]] = set()
    for points, markers_only in lines:
        if not vertical:
            points = [(y, x) for x, y in points]  # (category coordinate, value)
        if markers_only:
            if tuple(points) in seen_fliers:  # the same box plot drawn twice
                continue
            seen_fliers.add(tuple(points))
            for c, v in points:
                box = _box_at(boxes, c)
                if box is not None:
                    box["points"].append(v)
            continue
        if len(points) != 2:
            continue
        (c0, v0), (c1, v1) = points
        box = _box_at(boxes, c0, c1)
        if box is not None:
            _read_box_segment(box, c0, v0, c1, v1)


def _read_box_segment(box: dict[str, Any], c0: float, v0: float, c1: float, v1: float) -> None:
    """One 2-point line over a box, from (c0, v0) to (c1, v1) in (category, value) coordinates."""
    if _close(v0, v1) and not _close(c0, c1):  # across the box: a median or a cap
        width = abs(c1 - c0)
        if box["q1"] - _eps(box["q1"]) <= v0 <= box["q3"] + _eps(box["q3"]):
            if width > box["median_width"]:
                box["median"], box["median_width"] = v0, width
        elif v0 < box["q1"]:
            box["cap_min"] = v0 if box["cap_min"] is None else min(box["cap_min"], v0)
        else:
            box["cap_max"] = v0 if box["cap_max"] is None else max(box["cap_max"], v0)
    elif _close(c0, c1):  # along the value axis: a whisker
        low, high = min(v0, v1), max(v0, v1)
        if _close(high, box["q1"]):
            box["min"] = low
        elif _close(low, box["q3"]):
            box["max"] = high


def _is_box_outline(line: Any) -> bool:
    """A closed, axis-aligned rectangle drawn as one line: a box of a default box plot."""
    try:
        points = [(float(x), float(y)) for x, y in _tolist(line.get_xydata())]
    except Exception:
        return False
    if len(points) != 5 or points[0] != points[-1]:
        return False
    xs = {round(x, 9) for x, _ in points}
    ys = {round(y, 9) for _, y in points}
    return len(xs) == 2 and len(ys) == 2 and all(
        (a[0] == b[0]) != (a[1] == b[1]) for a, b in zip(points, points[1:], strict=False))


def _line_points(line: Any) -> tuple[list[tuple[float, float]], bool]:
    """A line's points in display-independent data numbers, and whether it is markers only."""
    try:
        points = [(float(x), float(y)) for x, y in _tolist(line.get_xydata())]
    except Exception:
        points = []
    markers_only = line.get_linestyle() in NO_LINE_STYLES and line.get_marker() not in NO_LINE_STYLES
    return points, markers_only


def _boxes_vertical(shapes: list[tuple[float, float, float, float]],
                    lines: list[tuple[list[tuple[float, float]], bool]]) -> bool:
    """Boxes stand upright when their medians and caps (across) outnumber their whiskers
    (along); with no lines to go by, when the boxes share a width rather than a height."""
    across = along = 0
    for points, markers_only in lines:
        if markers_only or len(points) != 2:
            continue
        (x0, y0), (x1, y1) = points
        if _close(y0, y1) and not _close(x0, x1):
            across += 1
        elif _close(x0, x1) and not _close(y0, y1):
            along += 1
    if across != along:
        return across > along
    widths = {round(s[1] - s[0], 9) for s in shapes}
    heights = {round(s[3] - s[2], 9) for s in shapes}
    return not (len(heights) == 1 and len(widths) > 1)


def _box_at(boxes: list[dict[str, Any]], *coordinates: float) -> dict[str, Any] | None:
    for box in boxes:
        if all(box["low"] - _eps(box["low"]) <= c <= box["high"] + _eps(box["high"])
               for c in coordinates):
            return box
    return None


# ---------------------------------------------------------------------------------------------
# Category labels (bars and boxes)


def _category_labels(ax: Any, axis: Any, series: list[list[tuple[float, float, Any]]]) -> list[list[str]]:
    """The tick label of each item, found by position: the one tick inside the item's span (for
    grouped bars, the span of the item and its namesakes in the other series). Falls back to
    the item's centre (category name, date or number) when ticks do not name the items one to
    one, as for a histogram."""
    ticks: list[tuple[float, str]] = []
    try:
        for location, label in zip(_tolist(axis.get_ticklocs()), axis.get_ticklabels(), strict=False):
            tick = (float(location), str(label.get_text()))
            if tick not in ticks:  # a second boxplot() on the same axes repeats its ticks
                ticks.append(tick)
    except Exception:
        ticks = []
    lengths = {len(entries) for entries in series}
    if len(series) > 1 and len(lengths) == 1:
        # Series of equal length: item i of each series shares a category (grouped/stacked).
        slots = [(min(entries[i][0] for entries in series), max(entries[i][1] for entries in series))
                 for i in range(lengths.pop())]
        slot_of = [list(range(len(entries))) for entries in series]
    else:
        slots, slot_of = [], []
        for entries in series:
            slot_of.append([len(slots) + i for i in range(len(entries))])
            slots.extend((low, high) for low, high, _ in entries)

    names: list[str] = []
    named_by_ticks = True
    used = set()
    for low, high in slots:
        centre = (low + high) / 2
        inside = [(abs(loc - centre), index) for index, (loc, text) in enumerate(ticks)
                  if low - _eps(low) <= loc <= high + _eps(high) and text]
        if len(inside) != 1 or inside[0][1] in used:
            named_by_ticks = False
            break
        used.add(inside[0][1])
        names.append(ticks[inside[0][1]][1])
    if not named_by_ticks:
        kind = _axis_kind(ax, axis)
        names = [_centre_label((low + high) / 2, kind, ax, axis) for low, high in slots]
    return [[names[slot] for slot in slots_of_series] for slots_of_series in slot_of]


def _centre_label(value: float, kind: str | None, ax: Any, axis: Any) -> str:
    if kind == "category":
        name = _category_name(axis, value)
        if name is not None:
            return name
    if kind in ("datetime", "period"):
        converted = _date_from_number(value, kind, ax, as_tick=False)
        if isinstance(converted, str):
            return converted
    number = _number(value)
    return str(int(number)) if math.isfinite(number) and number == int(number) else repr(number)


# ---------------------------------------------------------------------------------------------
# Axes, labels, scales


def _title(ax: Any) -> str | None:
    try:
        for location in ("center", "left", "right"):
            title = _text_or_none(ax.get_title(loc=location))
            if title is not None:
                return title
    except Exception:
        pass
    return None


def _suptitle(figure: Any) -> str | None:
    try:
        if hasattr(figure, "get_suptitle"):
            return _text_or_none(figure.get_suptitle())
        suptitle = getattr(figure, "_suptitle", None)
        return None if suptitle is None else _text_or_none(suptitle.get_text())
    except Exception:
        return None


def _text_or_none(text: object) -> str | None:
    return str(text) if text else None


def _unit(label: str | None) -> str | None:
    if not label:
        return None
    match = UNIT_PATTERN.search(label)
    return (match.group(1) or match.group(2)) if match else None


def _series_label(label: object) -> str:
    match = AUTO_LINE_LABEL.fullmatch(str(label))
    return "Line %s" % match.group(1) if match else str(label)


def _group_label(label: object) -> str:
    match = AUTO_CONTAINER_LABEL.fullmatch(str(label))
    return "Group %s" % match.group(1) if match else str(label)


def _axis_kind(ax: Any, axis: Any) -> str | None:
    """How the axis maps data to numbers: "datetime" (matplotlib date numbers), "period"
    (pandas period ordinals), "category" (string categories) or None (plain numbers)."""
    try:
        converter = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    except Exception:
        return None
    if converter is None:
        return None
    try:
        if type(converter).__name__ == "PeriodConverter" and getattr(ax, "freq", None) is not None:
            return "period"
        import matplotlib.dates as mdates
        from matplotlib.category import StrCategoryConverter

        date_converters = tuple(c for c in (getattr(mdates, "DateConverter", None),
                                            getattr(mdates, "_SwitchableDateConverter", None))
                                if isinstance(c, type))
        if date_converters and isinstance(converter, date_converters):
            return "datetime"
        if isinstance(converter, StrCategoryConverter):
            return "category"
    except Exception:
        pass
    return None


def _scale(axis: Any, kind: str | None, ticks: list[Any], labels: list[str]) -> str:
    """E2B's ScaleType: datetime for date axes, the scale name when not linear, categorical for
    string categories or ticks 0..n-1 labelled by something else than their numbers."""
    if kind in ("datetime", "period"):
        return "datetime"
    try:
        scale = str(axis.get_scale())
    except Exception:
        scale = "linear"
    if scale != "linear":
        return scale
    if kind == "category":
        return "categorical"
    pairs = list(zip(ticks, labels, strict=False))
    if pairs and all(isinstance(tick, float) and tick == i and label != str(i)
                     for i, (tick, label) in enumerate(pairs)):
        return "categorical"
    return "linear"


def _category_name(axis: Any, value: float) -> str | None:
    try:
        mapping = axis.units._mapping  # matplotlib.category.UnitData: name -> index
    except Exception:
        return None
    if not math.isfinite(value) or value != round(value):
        return None
    for name, index in mapping.items():
        if index == round(value):
            return str(name)
    return None


# ---------------------------------------------------------------------------------------------
# Values


def _coordinates(values: Any, kind: str | None, ax: Any, axis: Any = None) -> list[Any]:
    """A line's or collection's values on one axis, as JSON-able floats or strings: dates in
    ISO form, categories (scatter offsets are indices) by name, numbers to 8 digits."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            array = numpy.asarray(values)
            if array.dtype.kind == "M":  # datetime64: seconds precision, as E2B
                return [str(v) for v in array.astype("datetime64[s]").astype(str)]
            if array.ndim == 1 and array.dtype.kind in "fiub":
                if kind is None:  # plain numbers: the common, large case
                    return [_number(v) for v in array.tolist()]
                values = array.tolist()
        except Exception:
            pass
    out = []
    for value in _tolist(values):
        coordinate = _coordinate(value, kind, ax)
        if kind == "category" and axis is not None and isinstance(coordinate, float):
            name = _category_name(axis, coordinate)
            if name is not None:
                coordinate = name
        out.append(coordinate)
    return out


def _coordinate(value: Any, kind: str | None, ax: Any, dates_as_ticks: bool = False) -> str | float:
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):  # also datetime, pandas Timestamp
        try:
            return value.isoformat()
        except Exception:
            return str(value)
    if type(value).__name__ == "Period" and hasattr(value, "to_timestamp"):  # pandas
        try:
            return value.to_timestamp().isoformat()
        except Exception:
            return str(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(value, numpy.datetime64):
            return "NaT" if numpy.isnat(value) else str(value.astype("datetime64[s]"))
        if value is numpy.ma.masked:
            return math.nan
    if value is None:
        return math.nan
    try:
        number = float(value)
    except Exception:
        return str(value)
    if kind in ("datetime", "period") and math.isfinite(number):
        return _date_from_number(number, kind, ax, as_tick=dates_as_ticks)
    return _number(number)


def _date_from_number(number: float, kind: str | None, ax: Any, as_tick: bool) -> str | float:
    """A date axis' number in ISO form: matplotlib date numbers through `num2date` (aware, UTC,
    as E2B's ticks), pandas period ordinals through `Period` (pandas' own period plots)."""
    try:
        if kind == "period":
            pandas = sys.modules.get("pandas")
            if pandas is not None:
                period = pandas.Period(ordinal=int(round(number)), freq=ax.freq)
                return period.to_timestamp().isoformat()
        import matplotlib.dates as mdates

        moment = mdates.num2date(number)
        if not as_tick and moment.utcoffset() == datetime.timedelta(0):
            moment = moment.replace(tzinfo=None)
        return moment.isoformat()
    except Exception:
        return _number(number)


def _number(value: Any) -> float:
    """A float rounded to 8 significant digits (E2B's `dynamic_round` intent)."""
    try:
        number = float(value)
    except Exception:
        return math.nan
    if number == 0 or not math.isfinite(number):
        return number + 0.0  # -0.0 -> 0.0
    return float("%.*g" % (SIGNIFICANT_DIGITS, number))


def _offsets(collection: Any) -> list[Any]:
    offsets = collection.get_offsets()
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(offsets, numpy.ma.MaskedArray):
        offsets = offsets.filled(numpy.nan)
    return [row for row in _tolist(offsets) if len(row) >= 2]


def _tolist(values: Any) -> list[Any]:
    tolist = getattr(values, "tolist", None)
    if callable(tolist):
        try:
            result = tolist()
            if isinstance(result, list):
                return result
        except Exception:
            pass
    try:
        return list(values)
    except Exception:
        return []


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-12)


def _eps(value: float) -> float:
    return max(abs(value) * 1e-7, 1e-12)


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None
