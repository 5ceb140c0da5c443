"""Charts extracted from matplotlib figures (`Result.chart`), with E2B code-interpreter's names.

Class and field names as in `e2b_code_interpreter.charts`, so code that inspects E2B charts ports
unchanged.

The guest's kernel (`declaw_kernel.charts`) sends each figure's chart as a plain dict; the host
turns it into these models with `deserialize_chart`, choosing the class by `type`. E2B's client
classes are plain objects whose `to_dict()` returns the raw payload; here they are pydantic
models, so `model_dump()` gives the fields (`to_dict()` stays as an alias for ported code).
"""

from __future__ import annotations

import threading
from enum import Enum
from typing import Any, Optional, Union

from pydantic import ConfigDict, Field, SerializeAsAny, ValidationError, field_validator

from ._model import Model

MAX_CHART_DEPTH = 8  # superchart levels kept (a figure of figures); deeper ones keep their title only
_nesting = threading.local()  # how deep the superchart being read is, on this thread


class ChartType(str, Enum):
    """What kind of chart a figure's axes holds (E2B's values)."""

    LINE = "line"
    SCATTER = "scatter"
    BAR = "bar"
    PIE = "pie"
    BOX_AND_WHISKER = "box_and_whisker"
    SUPERCHART = "superchart"
    UNKNOWN = "unknown"


class ScaleType(str, Enum):
    """How an axis maps values to positions: matplotlib's scale names plus E2B's `datetime` and
    `categorical`; anything else reads as `unknown` rather than failing."""

    LINEAR = "linear"
    DATETIME = "datetime"
    CATEGORICAL = "categorical"
    LOG = "log"
    SYMLOG = "symlog"
    LOGIT = "logit"
    FUNCTION = "function"
    FUNCTIONLOG = "functionlog"
    ASINH = "asinh"
    UNKNOWN = "unknown"


def _chart_type(value: Any) -> ChartType:
    if isinstance(value, ChartType):
        return value
    try:
        return ChartType(value)
    except ValueError:
        return ChartType.UNKNOWN


def _scale_type(value: Any) -> ScaleType:
    if isinstance(value, ScaleType):
        return value
    try:
        return ScaleType(value)
    except ValueError:
        return ScaleType.UNKNOWN


class Chart(Model):
    """A chart whose kind is not known (or any chart's common part): its type and title."""

    # A field typed `Chart` (Result.chart) holds a LineChart etc.: dump the subclass' fields too
    # (pydantic >= 2.13; older versions ignore the key, use SerializeAsAny[Chart] there).
    model_config = ConfigDict(polymorphic_serialization=True)

    type: ChartType = ChartType.UNKNOWN
    title: Optional[str] = None
    elements: list[Any] = Field(default_factory=list)

    @field_validator("type", mode="before")
    @classmethod
    def _known_type(cls, value: Any) -> ChartType:
        """A type this client does not know (a newer server) reads as `unknown`."""
        return _chart_type(value)

    def to_dict(self) -> dict:
        """E2B's accessor: the chart as plain JSON-able data (enums as strings, points as lists)."""
        return self.model_dump(mode="json")


class Chart2D(Chart):
    """A chart on x/y axes. `x_unit`/`y_unit` come from the labels: "Time (s)" gives "s"."""

    x_label: Optional[str] = None
    y_label: Optional[str] = None
    x_unit: Optional[str] = None
    y_unit: Optional[str] = None


class PointData(Model):
    """One line or scatter series. Coordinates are numbers, or strings for dates (ISO) and
    categories."""

    label: str
    points: list[tuple[Union[float, str], Union[float, str]]]


class PointChart(Chart2D):
    """A chart of points (lines or scatter), with each axis' ticks, tick labels and scale."""

    x_ticks: list[Union[float, str]] = Field(default_factory=list)
    x_tick_labels: list[str] = Field(default_factory=list)
    x_scale: ScaleType = ScaleType.LINEAR

    y_ticks: list[Union[float, str]] = Field(default_factory=list)
    y_tick_labels: list[str] = Field(default_factory=list)
    y_scale: ScaleType = ScaleType.LINEAR

    elements: list[PointData] = Field(default_factory=list)

    @field_validator("x_scale", "y_scale", mode="before")
    @classmethod
    def _known_scale(cls, value: Any) -> ScaleType:
        return _scale_type(value)


class LineChart(PointChart):
    type: ChartType = ChartType.LINE


class ScatterChart(PointChart):
    type: ChartType = ChartType.SCATTER


class BarData(Model):
    """One bar: its category (`label`, the tick label), its series (`group`) and its value."""

    label: str
    group: str
    value: float


class BarChart(Chart2D):
    """Bars; for horizontal bars x is still the category axis, as in E2B."""

    type: ChartType = ChartType.BAR
    elements: list[BarData] = Field(default_factory=list)


class PieData(Model):
    """One wedge: its label, its angle in degrees and its radius."""

    label: str
    angle: float
    radius: float


class PieChart(Chart):
    type: ChartType = ChartType.PIE
    elements: list[PieData] = Field(default_factory=list)


class BoxAndWhiskerData(Model):
    """One box: whisker ends (`min`, `max`), quartiles, median and the outliers beyond the
    whiskers. A statistic the figure does not draw (say, no median line) is None."""

    label: str
    min: Optional[float] = None
    first_quartile: Optional[float] = None
    median: Optional[float] = None
    third_quartile: Optional[float] = None
    max: Optional[float] = None
    outliers: list[float] = Field(default_factory=list)


class BoxAndWhiskerChart(Chart2D):
    type: ChartType = ChartType.BOX_AND_WHISKER
    elements: list[BoxAndWhiskerData] = Field(default_factory=list)


class SuperChart(Chart):
    """A figure with several axes: the figure's suptitle and one chart per axes."""

    type: ChartType = ChartType.SUPERCHART
    # SerializeAsAny: dump each element with its own class' fields, not just Chart's.
    elements: list[SerializeAsAny[Chart]] = Field(default_factory=list)

    @field_validator("elements", mode="before")
    @classmethod
    def _charts(cls, value: Any) -> Any:
        """Each element is itself a chart payload: pick its class as `deserialize_chart` does.
        Supercharts nest at most `MAX_CHART_DEPTH` deep: a deeper one keeps no elements (reading
        one recurses, and a payload from elsewhere — a hostile worker's answer — could nest a
        thousand deep; a guest's door keeps its own 64 levels of nesting)."""
        if not isinstance(value, (list, tuple)):
            return value
        depth = getattr(_nesting, "depth", 0)
        if depth >= MAX_CHART_DEPTH:
            return []
        _nesting.depth = depth + 1
        try:
            charts = []
            for item in value:
                chart = deserialize_chart(item) if isinstance(item, dict) else item
                if chart is not None:
                    charts.append(chart)
            return charts
        finally:
            _nesting.depth = depth


ChartTypes = Union[LineChart, ScatterChart, BarChart, PieChart, BoxAndWhiskerChart, SuperChart, Chart]

CHART_CLASSES: dict[ChartType, type[Chart]] = {
    ChartType.LINE: LineChart,
    ChartType.SCATTER: ScatterChart,
    ChartType.BAR: BarChart,
    ChartType.PIE: PieChart,
    ChartType.BOX_AND_WHISKER: BoxAndWhiskerChart,
    ChartType.SUPERCHART: SuperChart,
}


def deserialize_chart(data: Optional[dict]) -> Optional[Chart]:
    """The model for a chart payload, by its `type`; None for no chart (None or `{}`, which
    E2B sends when extraction failed). An unknown type gives a plain `Chart`, and so does a
    payload that does not fit its class: a chart should never make a whole result unreadable."""
    if isinstance(data, Chart):
        return data
    if not data or not isinstance(data, dict):
        return None
    kind = _chart_type(data.get("type"))
    model = CHART_CLASSES.get(kind, Chart)
    try:
        return model.model_validate(data)
    except ValidationError:
        if model is Chart:
            return Chart(type=ChartType.UNKNOWN, title=_title_or_none(data.get("title")))
        elements = data.get("elements")
        return Chart(type=kind, title=_title_or_none(data.get("title")),
                     elements=elements if isinstance(elements, list) else [])


def _title_or_none(title: Any) -> Optional[str]:
    return title if isinstance(title, str) else None


__all__ = [
    "ChartType", "ScaleType", "Chart", "Chart2D", "PointData", "PointChart", "LineChart",
    "ScatterChart", "BarData", "BarChart", "PieData", "PieChart", "BoxAndWhiskerData",
    "BoxAndWhiskerChart", "SuperChart", "ChartTypes", "deserialize_chart",
]
