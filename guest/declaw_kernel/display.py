"""Rich results: an object's Jupyter MIME bundle, as IPython's display formatter builds it.

No IPython shell runs in the guest (the code-interpreter's bundle has IPython as a library:
`patch_ipython` sends its `display()` here), so this is the part of its formatter the
code-interpreter needs: `_repr_*_` and `_repr_mimebundle_` hooks, matplotlib figures (PNG plus
the extracted `e2b/chart`), pandas DataFrames (`e2b/data`: column -> list), Pillow images
(`Image.show()` too), SymPy's LaTeX; `plt.show()` and figures left open at the end of a cell
become display results, one per figure. Binary formats travel as base64 text, as in Jupyter.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import sys

from declaw_shell import door

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Container, Iterator
    from typing import Any

REPR_METHODS = [
    ("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
    ("application/pdf", "_repr_pdf_"), ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"), ("application/javascript", "_repr_javascript_"),
]
BINARY = {"image/png", "image/jpeg", "application/pdf"}


def display(*objects: object, main: bool = False, **_options: object) -> None:
    """Send each object's bundle to the host as a result (`main`: the cell's value)."""
    for obj in objects:
        bundle = mime_bundle(obj)
        if bundle:
            send_bundle(bundle, main=main)


_captures: list[list[dict[str, Any]]] = []  # `%%capture` cells running, innermost last


def send_bundle(bundle: dict[str, Any], main: bool = False) -> None:
    """A result to the host, or into the `%%capture` that is running."""
    if _captures:
        _captures[-1].append(bundle)
    else:
        door.call("result", data=bundle, main=main)


@contextlib.contextmanager
def captured(into: list[dict[str, Any]] | None) -> Iterator[None]:
    """Results kept in `into` while the block runs (None: sent as usual)."""
    if into is None:
        yield
        return
    _captures.append(into)
    try:
        yield
    finally:
        _captures.pop()


def patch_plotly(pio: Any) -> None:
    """A figure's result carries its JSON (`application/vnd.plotly.v1+json`, in `Result.extra`),
    as Jupyter's plotly renderer sends it, and HTML that loads plotly.js from its CDN (the
    library inline would add 3.5 MB to every figure). Not plotly's notebook renderers: they
    display an extra set-up script first. `fig.show()` displays the figure."""
    import plotly.basedatatypes as basedatatypes

    pio.renderers.default = "plotly_mimetype"
    figure = basedatatypes.BaseFigure
    original = figure._repr_mimebundle_

    def with_html(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(original(self, *args, **kwargs) or {})
        bundle.setdefault("text/html", self.to_html(full_html=False, include_plotlyjs="cdn"))
        return bundle

    figure._repr_mimebundle_ = with_html
    # `fig.show()` / `pio.show(fig)` display the figure, as in Jupyter (plotly's own mimetype
    # renderer wants nbformat to validate it, which the bundle does not have)
    figure.show = lambda self, *args, **kwargs: display(self)
    pio.show = lambda fig, *args, **kwargs: display(fig)


def patch_ipython(display_functions: Any) -> None:
    """`IPython.display.display` (and everything that imports it) sends results here: with no
    IPython shell running, IPython's own would only print the object's repr."""

    def ipython_display(*objects: object, raw: bool = False, include: Container[str] | None = None,
                        exclude: Container[str] | None = None, **_options: object) -> None:
        for obj in objects:
            if raw and isinstance(obj, dict):
                bundle: dict[str, Any] = {k: v for k, v in obj.items() if isinstance(k, str)}
            else:
                bundle = mime_bundle(obj)
            if include:
                bundle = {k: v for k, v in bundle.items() if k in include}
            if exclude:
                bundle = {k: v for k, v in bundle.items() if k not in exclude}
            if bundle:
                send_bundle(bundle)

    display_functions.display = ipython_display
    display_functions.clear_output = lambda wait=False: None


def mime_bundle(obj: object) -> dict[str, Any]:
    figure_class = _class("matplotlib.figure", "Figure")
    if figure_class is not None and isinstance(obj, figure_class):
        return _figure_bundle(obj)
    bundle: dict[str, Any] = {"text/plain": _plain(obj)}
    hook = getattr(obj, "_repr_mimebundle_", None)
    if callable(hook) and not isinstance(obj, type):
        try:
            data = hook()
            if isinstance(data, tuple):
                data = data[0]
            if isinstance(data, dict):
                bundle.update({k: _encode(k, v) for k, v in data.items() if v is not None})
        except Exception:
            pass
    for mime, name in REPR_METHODS:
        method = getattr(obj, name, None)
        if mime in bundle or not callable(method) or isinstance(obj, type):
            continue
        try:
            value = method()
        except Exception:
            continue
        if isinstance(value, tuple):
            value = value[0]
        if value is not None:
            bundle[mime] = _encode(mime, value)
    frame_class = _class("pandas", "DataFrame")
    if frame_class is not None and isinstance(obj, frame_class):
        bundle["e2b/data"] = _frame_data(obj)
    return bundle


def _class(module: str, name: str) -> Any:
    loaded = sys.modules.get(module)  # cost nothing unless the user imported it
    return getattr(loaded, name, None) if loaded is not None else None


def _plain(obj: object) -> str:
    try:
        import pprint

        return pprint.pformat(obj) if isinstance(obj, (dict, list, tuple, set)) else repr(obj)
    except Exception as exc:
        return "<unprintable %s: %s>" % (type(obj).__name__, exc)


def _encode(mime: str, value: Any) -> Any:
    if mime in BINARY and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if mime == "application/json" and not isinstance(value, (dict, list)):
        return value
    return value


def _frame_data(frame: Any) -> dict[str, list[Any]] | None:
    try:
        data = frame.to_dict(orient="list")
        return {str(key): [_jsonable(v) for v in values] for key, values in data.items()}
    except Exception:
        return None


def _jsonable(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        try:
            return value.item()
        except Exception:
            pass
    if isinstance(value, float) and value != value:
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _figure_bundle(figure: Any) -> dict[str, Any]:
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    width, height = figure.get_size_inches() * figure.dpi
    bundle: dict[str, Any] = {
        "text/plain": "<Figure size %dx%d with %d Axes>" % (width, height, len(figure.axes)),
        "image/png": base64.b64encode(buffer.getvalue()).decode(),
    }
    try:
        from . import charts

        chart = charts.chart_figure_to_dict(figure)
    except Exception:
        chart = {}
    if chart is not None:
        bundle["e2b/chart"] = chart
    return bundle


def flush_figures() -> None:
    """Figures still open at the end of a cell (or at `plt.show()`): one result each, closed."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        try:
            display(figure)
        finally:
            pyplot.close(figure)


def install_hooks() -> None:
    """`plt.show()` and `Image.show()` display instead of opening windows; an image saved to a
    file is displayed too (as E2B's kernel does); `boxplot(labels=...)` still works."""
    pyplot: Any = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.show = lambda *args, **kwargs: flush_figures()
        patch_boxplot(pyplot)
    axes = sys.modules.get("matplotlib.axes")
    if axes is not None:
        patch_boxplot(axes.Axes)
    image = sys.modules.get("PIL.Image")
    if image is not None:
        patch_pil(image)


_displaying: list[bool] = []  # non-empty while an image is being displayed (its PNG is made by `save`)


def patch_pil(module: Any) -> None:
    cls = module.Image
    cls.show = lambda self, *args, **kwargs: display(self)
    if getattr(cls.save, "_declaw", False):
        return
    original = cls.save

    def save(self: Any, fp: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, fp, *args, **kwargs)
        if isinstance(fp, (str, os.PathLike)) and not _displaying:
            _displaying.append(True)
            try:
                display(self)
            except Exception:  # the file is saved; a display problem is not the cell's
                pass
            finally:
                _displaying.pop()
        return result

    save._declaw = True  # type: ignore[attr-defined]  # marks the replacement as ours
    cls.save = save


def patch_boxplot(owner: Any) -> None:
    """matplotlib 3.9 renamed boxplot's `labels` to `tick_labels` and later removed the old
    name, which generated code (and E2B's own tests) still use."""
    original = getattr(owner, "boxplot", None)
    if original is None or getattr(original, "_declaw", False):
        return

    @functools.wraps(original)
    def boxplot(*args: Any, **kwargs: Any) -> Any:
        if "labels" in kwargs and "tick_labels" not in kwargs:
            kwargs["tick_labels"] = kwargs.pop("labels")
        return original(*args, **kwargs)

    boxplot._declaw = True  # type: ignore[attr-defined]  # marks the replacement as ours
    owner.boxplot = boxplot
