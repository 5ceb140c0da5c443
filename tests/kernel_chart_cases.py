"""Chart extraction cases for `run_code`: (name, cell source, checker).

Each cell builds one matplotlib figure with pyplot and leaves it open (no `savefig`, no
`show`), so the kernel displays it at the end of the cell: a PNG plus the `e2b/chart` dict made
by `declaw_kernel.charts`. The checker gets that chart as the host sees it,
`chart.model_dump(mode="json")`, and asserts the facts E2B's extraction would give. Every
source works in a fresh namespace.
"""

from __future__ import annotations

from typing import Callable


def _check_line(chart: dict) -> None:
    assert chart["type"] == "line"
    assert chart["title"] == "Plot of sin(x) and cos(x)"
    assert chart["x_label"] == "Time (s)" and chart["x_unit"] == "s"
    assert chart["y_label"] == "Amplitude (Hz)" and chart["y_unit"] == "Hz"
    assert chart["x_scale"] == "datetime" and chart["y_scale"] == "linear"
    assert chart["x_ticks"] and all(isinstance(tick, str) for tick in chart["x_ticks"])
    assert all(isinstance(tick, float) for tick in chart["y_ticks"])
    assert len(chart["x_tick_labels"]) == len(chart["x_ticks"])
    assert [line["label"] for line in chart["elements"]] == ["sin(x)", "cos(x)"]
    sin = chart["elements"][0]["points"]
    assert len(sin) == 100 and len(chart["elements"][1]["points"]) == 100
    assert sin[0] == ["2023-09-01T00:00:00", 0.0]
    assert sin[25][0] == "2023-09-01T00:00:25" and abs(sin[25][1] - 0.99987413) < 1e-8


def _check_scatter(chart: dict) -> None:
    assert chart["type"] == "scatter"
    assert chart["title"] is None
    assert chart["x_label"] == "A" and chart["y_label"] == "B"
    assert chart["x_scale"] == "linear" and chart["y_scale"] == "log"
    assert [series["label"] for series in chart["elements"]] == ["Dataset 1", "Line 1"]
    assert chart["elements"][0]["points"] == [[1.0, 10.0], [2.0, 100.0], [3.0, 1000.0]]
    assert chart["elements"][1]["points"] == [[0.5, 20.0], [1.5, 200.0]]


def _check_bar(chart: dict) -> None:
    assert chart["type"] == "bar"
    assert chart["title"] == "Book Sales by Authors"
    assert chart["x_label"] == "Authors" and chart["y_label"] == "Number of Books Sold"
    assert chart["x_unit"] is None and chart["y_unit"] is None
    bars = chart["elements"]
    assert [bar["label"] for bar in bars] == ["Author A", "Author B", "Author C"] * 2
    assert [bar["group"] for bar in bars] == ["2023"] * 3 + ["Group 1"] * 3
    assert [bar["value"] for bar in bars] == [100.0, 200.0, 300.0, 150.0, 250.0, 50.0]


def _check_horizontal_bar(chart: dict) -> None:
    assert chart["type"] == "bar"
    assert chart["title"] == "Fruit"
    # The category axis is reported as x, the value axis as y (axes swapped, as in E2B).
    assert chart["x_label"] == "Kind" and chart["y_label"] == "Weight (kg)"
    assert chart["x_unit"] is None and chart["y_unit"] == "kg"
    assert [(bar["label"], bar["group"], bar["value"]) for bar in chart["elements"]] == [
        ("apple", "harvest", 3.5), ("pear", "harvest", 2.25), ("plum", "harvest", 7.0)]


def _check_pie(chart: dict) -> None:
    assert chart["type"] == "pie"
    assert chart["title"] == "Will I wake up early tomorrow?"
    assert [(w["label"], w["angle"], w["radius"]) for w in chart["elements"]] == [
        ("No", 324.0, 1.0), ("No, in blue", 36.0, 1.0)]


def _check_box(chart: dict) -> None:
    assert chart["type"] == "box_and_whisker"
    assert chart["title"] == "Exam Scores Distribution"
    assert chart["x_label"] == "Class" and chart["y_label"] == "Score"
    boxes = chart["elements"]
    assert [box["label"] for box in boxes] == ["Class A", "Class B", "Class C"]
    a = boxes[0]
    assert (a["min"], a["first_quartile"], a["median"], a["third_quartile"], a["max"]) == (
        78.0, 85.0, 88.0, 90.0, 92.0)
    assert a["outliers"] == []
    assert sorted(boxes[1]["outliers"]) == [40.0, 140.0]
    assert boxes[2]["outliers"] == [30.0]


def _check_superchart(chart: dict) -> None:
    assert chart["type"] == "superchart"
    assert chart["title"] == "Multiple Charts Example"
    first, second = chart["elements"]
    assert first["type"] == "line" and first["title"] == "Sine Wave"
    assert first["x_label"] is None and len(first["elements"]) == 1
    assert first["elements"][0]["label"] == "Line 0" and len(first["elements"][0]["points"]) == 100
    assert second["type"] == "bar" and second["title"] == "Counts"
    assert [(bar["label"], bar["value"]) for bar in second["elements"]] == [("x", 1.0), ("y", 4.0)]


def _check_unknown(chart: dict) -> None:
    assert chart["type"] == "unknown"
    assert chart["title"] == "Identity"
    assert chart["elements"] == []


LINE = """
    import datetime
    import matplotlib.pyplot as plt
    import numpy as np

    dates = [datetime.datetime(2023, 9, 1) + datetime.timedelta(seconds=i) for i in range(100)]
    x = np.linspace(0, 2 * np.pi, 100)
    plt.figure(figsize=(10, 6))
    plt.plot(dates, np.sin(x), label="sin(x)")
    plt.plot(dates, np.cos(x), label="cos(x)")
    plt.xlabel("Time (s)")
    plt.ylabel("Amplitude (Hz)")
    plt.title("Plot of sin(x) and cos(x)")
"""

SCATTER = """
    import matplotlib.pyplot as plt

    plt.figure()
    plt.scatter([1, 2, 3], [10, 100, 1000], label="Dataset 1")
    plt.scatter([0.5, 1.5], [20, 200])
    plt.yscale("log")
    plt.xlabel("A")
    plt.ylabel("B")
"""

BAR = """
    import matplotlib.pyplot as plt
    import numpy as np

    authors = ["Author A", "Author B", "Author C"]
    x = np.arange(len(authors))
    fig, ax = plt.subplots(figsize=(10, 6))
    ax.bar(x - 0.2, [100, 200, 300], width=0.4, label="2023")
    ax.bar(x + 0.2, [150, 250, 50], width=0.4)
    ax.set_xticks(x, authors)
    ax.set_xlabel("Authors")
    ax.set_ylabel("Number of Books Sold")
    ax.set_title("Book Sales by Authors")
    ax.legend()
"""

HORIZONTAL_BAR = """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.barh(["apple", "pear", "plum"], [3.5, 2.25, 7], label="harvest")
    ax.set_xlabel("Weight (kg)")
    ax.set_ylabel("Kind")
    ax.set_title("Fruit")
"""

PIE = """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 8))
    ax.pie([90, 10], labels=["No", "No, in blue"], autopct="%1.1f%%", startangle=90)
    ax.axis("equal")
    plt.title("Will I wake up early tomorrow?")
"""

BOX_AND_WHISKER = """
    import matplotlib.pyplot as plt

    data = {
        "Class A": [85, 90, 78, 92, 88],
        "Class B": [95, 89, 76, 91, 84, 87, 140, 40],
        "Class C": [75, 82, 88, 79, 86, 30],
    }
    fig, ax = plt.subplots(figsize=(10, 6))
    ax.boxplot(list(data.values()), tick_labels=list(data.keys()), patch_artist=True)
    ax.set_title("Exam Scores Distribution")
    ax.set_xlabel("Class")
    ax.set_ylabel("Score")
"""

SUPERCHART = """
    import matplotlib.pyplot as plt
    import numpy as np

    x = np.linspace(0, 10, 100)
    fig, axs = plt.subplots(1, 2, figsize=(10, 5))
    fig.suptitle("Multiple Charts Example")
    axs[0].plot(x, np.sin(x), "r")
    axs[0].set_title("Sine Wave")
    axs[0].grid(True)
    axs[1].bar(["x", "y"], [1, 4])
    axs[1].set_title("Counts")
"""

UNKNOWN = """
    import matplotlib.pyplot as plt
    import numpy as np

    plt.figure()
    plt.imshow(np.eye(4))
    plt.title("Identity")
"""

CHART_CASES: list[tuple[str, str, Callable[[dict], None]]] = [
    ("line", LINE, _check_line),
    ("scatter", SCATTER, _check_scatter),
    ("bar", BAR, _check_bar),
    ("horizontal_bar", HORIZONTAL_BAR, _check_horizontal_bar),
    ("pie", PIE, _check_pie),
    ("box_and_whisker", BOX_AND_WHISKER, _check_box),
    ("superchart", SUPERCHART, _check_superchart),
    ("unknown", UNKNOWN, _check_unknown),
]
