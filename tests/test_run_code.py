"""run_code: a stateful Python context per sandbox, E2B code-interpreter's semantics, on the real
guest. One sandbox (and its default context) is shared where the cells do not interfere."""

from __future__ import annotations

import base64
import time
from typing import Any, Callable, Iterator

import anyio
import pytest

from declaw_wasm import testing
from declaw_wasm import AsyncSandbox, Sandbox, TimeoutException
from declaw_wasm.execution import OutputMessage
from declaw_wasm.charts import (BarChart, BoxAndWhiskerChart, Chart, LineChart, PieChart,
                                ScatterChart, SuperChart)
from declaw_wasm._assets import examples_dir

from kernel_chart_cases import CHART_CASES  # noqa: E402 (tests/ is on sys.path)

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHART_CLASSES = {"line": LineChart, "scatter": ScatterChart, "bar": BarChart, "pie": PieChart,
                 "box_and_whisker": BoxAndWhiskerChart, "superchart": SuperChart}


@pytest.fixture(scope="module")
def local_ci(guest_path: str) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=3600, envs={"SANDBOX_WIDE": "yes"})
    yield sandbox
    sandbox.kill()


@pytest.fixture(scope="session")
def served_ci(make_served: Callable[..., Sandbox]) -> Iterator[Sandbox]:
    sandbox = make_served(timeout=3600, envs={"SANDBOX_WIDE": "yes"})
    yield sandbox
    sandbox.kill()


@pytest.fixture(scope="session")
def pool_ci(where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=3600, envs={"SANDBOX_WIDE": "yes"}, **where("processes"))
    yield sandbox
    sandbox.kill()


@pytest.fixture(scope="session")
def ray_ci(where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=3600, envs={"SANDBOX_WIDE": "yes"}, **where("ray"))
    yield sandbox
    sandbox.kill()


@pytest.fixture
def ci(mode: str, request: pytest.FixtureRequest) -> Sandbox:
    """The module's sandbox; tests marked `served` get one on every backend as well."""
    return request.getfixturevalue({"served": "served_ci", "processes": "pool_ci",
                                    "ray": "ray_ci"}.get(mode, "local_ci"))


@pytest.mark.served
def test_state_carries_over_and_cells_are_counted(ci: Sandbox) -> None:
    first = ci.run_code("counter_a = 40")
    second = ci.run_code("counter_a + 2")
    assert (first.text, second.text) == (None, "42")
    assert first.execution_count is not None and second.execution_count == first.execution_count + 1
    failed = ci.run_code("1 / 0")
    assert failed.execution_count == second.execution_count + 1


@pytest.mark.served
def test_code_errors_fill_error_and_do_not_raise(ci: Sandbox) -> None:
    execution = ci.run_code("def f():\n    return undefined_name\nf()")
    error = execution.error
    assert error is not None and error.name == "NameError"
    assert "undefined_name" in error.value
    assert "return undefined_name" in error.traceback and "NameError" in error.traceback
    assert "declaw" not in error.traceback  # no frames of ours
    assert ci.run_code("'still alive'").text == "still alive"


def test_a_cell_that_exits_with_a_status_reports_it_and_the_context_goes_on(ci: Sandbox) -> None:
    execution = ci.run_code("counter_exit = 1\nimport sys\nsys.exit(3)")
    assert execution.error is not None and execution.error.name == "SystemExit"
    assert execution.error.value == "3"
    assert ci.run_code("sys.exit(0)").error is None  # a zero status is no error, as in IPython
    assert ci.run_code("counter_exit + 1").text == "2"


@pytest.mark.served
def test_logs_and_streaming_callbacks(ci: Sandbox) -> None:
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    execution = ci.run_code(
        "import sys, time\nprint('one')\nprint('warn', file=sys.stderr)\ntime.sleep(1)\nprint('two')",
        on_stdout=lambda m: seen.append((time.monotonic() - start, m.line)))
    assert execution.logs.stdout == ["one\n", "two\n"] and execution.logs.stderr == ["warn\n"]
    assert [line for _, line in seen] == ["one\n", "two\n"]
    assert seen[1][0] - seen[0][0] > 0.7  # delivered while the cell ran


@pytest.mark.served
def test_results_errors_callbacks_and_indentation(ci: Sandbox) -> None:
    results: list[Any] = []
    errors: list[Any] = []
    execution = ci.run_code("""
        value = 6 * 7
        display('shown')
        value
    """, on_result=results.append, on_error=errors.append)
    assert [r.is_main_result for r in execution.results] == [False, True]
    assert execution.text == "42" and execution.results[0].text == "shown"  # quotes stripped
    assert len(results) == 2 and not errors
    ci.run_code("raise ValueError('bad')", on_error=errors.append)
    assert errors and errors[0].name == "ValueError" and errors[0].value == "bad"


@pytest.mark.served
def test_envs_last_one_cell_and_sandbox_envs_are_seen(ci: Sandbox) -> None:
    code = "import os; (os.environ.get('PER_RUN'), os.environ.get('SANDBOX_WIDE'))"
    assert ci.run_code(code, envs={"PER_RUN": "1"}).text == "('1', 'yes')"
    assert ci.run_code(code).text == "(None, 'yes')"


@pytest.mark.served
def test_shell_escape_runs_in_the_sandbox(ci: Sandbox) -> None:
    execution = ci.run_code("!pwd\n!echo $((6*7)) | tr 4 X")
    assert execution.logs.stdout == ["/home/user\n", "X2\n"] or "".join(execution.logs.stdout) == "/home/user\nX2\n"


@pytest.mark.served
def test_matplotlib_gives_png_and_chart_per_figure(ci: Sandbox) -> None:
    execution = ci.run_code("""
        import matplotlib.pyplot as plt
        plt.figure(); plt.plot([1, 2, 3], [4, 5, 6], label='up'); plt.title('first')
        plt.show()
        plt.figure(); plt.bar(['a', 'b'], [3, 5]); plt.title('second')
    """)
    assert execution.error is None
    figures = [r for r in execution.results if r.png]
    assert len(figures) == 2
    assert base64.b64decode(figures[0].png or "").startswith(PNG_MAGIC)
    assert (figures[0].text or "").startswith("<Figure size")
    assert isinstance(figures[0].chart, LineChart) and figures[0].chart.title == "first"
    assert isinstance(figures[1].chart, BarChart) and figures[1].chart.title == "second"
    assert "png" in figures[0].formats() and "chart" in figures[0].formats()
    assert ci.run_code("import matplotlib.pyplot as plt; len(plt.get_fignums())").text == "0"


@pytest.mark.parametrize("name, source, check", CHART_CASES, ids=[c[0] for c in CHART_CASES])
@pytest.mark.served
def test_chart_extraction(ci: Sandbox, name: str, source: str, check: Callable[[dict], None]) -> None:
    execution = ci.run_code(source)
    assert execution.error is None, execution.error and execution.error.traceback
    charts = [r.chart for r in execution.results if r.png]
    assert len(charts) == 1 and charts[0] is not None
    chart = charts[0]
    assert isinstance(chart, CHART_CLASSES.get(name, Chart))
    check(chart.model_dump(mode="json"))


@pytest.mark.served
def test_dataframe_gives_html_and_data(ci: Sandbox) -> None:
    execution = ci.run_code("""
        import pandas as pd
        pd.DataFrame({'region': ['EU', 'APAC'], 'amount': [30, 100],
                      'day': pd.to_datetime(['2024-01-01', '2024-01-02'])})
    """)
    main = execution.results[0]
    assert main.is_main_result and "<table" in (main.html or "")
    assert main.data == {"region": ["EU", "APAC"], "amount": [30, 100],
                         "day": ["2024-01-01T00:00:00", "2024-01-02T00:00:00"]}


@pytest.mark.served
def test_pillow_image_gives_png(ci: Sandbox) -> None:
    execution = ci.run_code("from PIL import Image\nimg = Image.new('RGB', (8, 4), 'red')\nimg")
    assert base64.b64decode(execution.results[0].png or "").startswith(PNG_MAGIC)
    shown = ci.run_code("img.show()")
    assert len(shown.results) == 1 and not shown.results[0].is_main_result
    assert base64.b64decode(shown.results[0].png or "").startswith(PNG_MAGIC)


@pytest.mark.served
def test_sympy_gives_latex_and_text(ci: Sandbox) -> None:
    execution = ci.run_code("import sympy as sp\nx = sp.symbols('x')\nsp.Integral(x**2, x)")
    main = execution.results[0]
    assert main.text == "Integral(x**2, x)" and "\\int" in (main.latex or "")


def test_plotly_figure_gives_html_and_its_json(ci: Sandbox) -> None:
    execution = ci.run_code("import plotly.express as px\npx.line(x=[1, 2], y=[3, 4])")
    main = execution.results[0]
    assert "plotly-graph-div" in (main.html or "") and main.extra is not None
    figure = main.extra["application/vnd.plotly.v1+json"]
    assert figure["data"][0]["type"] == "scatter" and figure["data"][0]["mode"] == "lines"


def test_plotly_show_displays_the_figure(ci: Sandbox) -> None:
    """`fig.show()` (and `pio.show`) give the figure as a display result, as in Jupyter; plotly's
    own mimetype renderer raised for want of nbformat."""
    execution = ci.run_code("import plotly.express as px, plotly.io as pio\nfig = px.bar(x=['a'], y=[1])\n"
                            "fig.show()\npio.show(fig)")
    assert execution.error is None, execution.error
    assert [bool(r.extra and "application/vnd.plotly.v1+json" in r.extra) for r in execution.results] == [True, True]


@pytest.mark.served
def test_contexts_are_independent(ci: Sandbox) -> None:
    one = ci.create_code_context()
    two = ci.create_code_context(cwd="/tmp")
    ci.run_code("where = 'one'", context=one)
    ci.run_code("where = 'two'", context=two)
    assert ci.run_code("where", context=one).text == "one"
    assert ci.run_code("import os; os.getcwd()", context=two).text == "/tmp"
    ids = {c.id for c in ci.list_code_contexts()}
    assert {one.id, two.id} <= ids
    ci.restart_code_context(one)
    error = ci.run_code("where", context=one).error
    assert error is not None and error.name == "NameError"
    ci.remove_code_context(two)
    assert two.id not in {c.id for c in ci.list_code_contexts()}


@pytest.mark.parametrize("how", ["restarted", "removed"])
def test_a_cell_running_when_its_context_is_restarted_or_removed_ends_with_that_error(how: str,
                                                                                      guest_path: str) -> None:
    """Not 'the sandbox was killed' (TimeoutException), which it was not: the sandbox goes on."""
    import threading

    with Sandbox.create() as sandbox:
        context = sandbox.create_code_context()
        sandbox.run_code("kept = 1", context=context)
        ended: list[Any] = []
        started = threading.Event()

        def cell() -> None:
            try:
                ended.append(sandbox.run_code("print('started', flush=True); import time; time.sleep(60)",
                                              context=context, timeout=120, on_stdout=lambda _m: started.set()))
            except Exception as exc:  # noqa: BLE001 -- the test looks at what it was
                ended.append(exc)

        thread = threading.Thread(target=cell)
        thread.start()
        assert started.wait(60), "the cell did not start"
        if how == "restarted":
            sandbox.restart_code_context(context)
        else:
            sandbox.remove_code_context(context)
        thread.join(30)
        assert ended, "the cell did not end"
        execution = ended[0]
        assert not isinstance(execution, Exception), execution
        assert execution.error is not None
        assert execution.error.name == f"Context{how.capitalize()}"
        assert f"the code context was {how} while the cell ran" in execution.error.value
        assert sandbox.is_running()
        if how == "restarted":  # the context goes on, fresh
            error = sandbox.run_code("kept", context=context).error
            assert error is not None and error.name == "NameError"
        assert sandbox.run_code("1 + 1").text == "2"


def test_timeout_raises_promptly_and_the_context_comes_back(guest_path: str) -> None:
    sandbox = Sandbox.create()
    try:
        sandbox.run_code("kept = 1")
        start = time.monotonic()
        with pytest.raises(TimeoutException):
            sandbox.run_code("import time; time.sleep(300)", timeout=3)
        assert 2.9 < time.monotonic() - start < 4.5
        after = sandbox.run_code("1 + 1")
        assert after.text == "2"
        assert "restarted" in "".join(after.logs.stderr)
        error = sandbox.run_code("kept").error
        assert error is not None and error.name == "NameError"
        with pytest.raises(TimeoutException):
            sandbox.run_code("while True: pass", timeout=1)
        assert sandbox.run_code("2 + 2").text == "4"
    finally:
        sandbox.kill()


@pytest.mark.served
def test_seed_snippets_as_cells_of_one_context(ci: Sandbox) -> None:
    namespace: dict[str, Any] = {}
    source = (examples_dir() / "code_interpreter.py").read_text()
    exec(compile(source, "code_interpreter.py", "exec"), namespace)
    context = ci.create_code_context()
    outputs = [ci.run_code(snippet, context=context) for snippet in namespace["SNIPPETS"]]
    assert all(o.error is None for o in outputs), [o.error for o in outputs]
    assert "solution: {x: 13/7, y: 11/7}" in "".join(outputs[0].logs.stdout)
    assert "{'APAC': 150, 'EU': 80}" in "".join(outputs[1].logs.stdout)
    assert ci.files.get_info("/tmp/chart.png").size > 1000


def test_async_run_code() -> None:
    async def main() -> None:
        sandbox = await AsyncSandbox.create()
        try:
            lines: list[str] = []

            async def on_stdout(message: OutputMessage) -> None:
                lines.append(message.line)

            await sandbox.run_code("a = 20")
            execution = await sandbox.run_code("print('hi'); a + 1", on_stdout=on_stdout)
            assert (execution.text, lines) == ("21", ["hi\n"])
            context = await sandbox.create_code_context()
            error = (await sandbox.run_code("a", context=context)).error
            assert error is not None
            assert error.name == "NameError"
        finally:
            await sandbox.kill()

    anyio.run(main)


def test_huge_output_is_capped_and_the_context_goes_on(ci: Sandbox) -> None:
    execution = ci.run_code("for _ in range(40):\n    print('x' * (1 << 20))")  # 40 MiB
    kept = "".join(execution.logs.stdout)
    assert len(kept) <= testing.limits_of(ci).output_limit + 200 and kept.endswith("output limit\n")
    assert ci.run_code("'fine'").text == "fine"


def test_killing_the_sandbox_ends_a_running_cell() -> None:
    import threading

    from declaw_wasm import SandboxException

    sandbox = Sandbox.create()
    sandbox.run_code("ready = True")
    threading.Timer(1.0, sandbox.kill).start()
    with pytest.raises(SandboxException):
        sandbox.run_code("while True: pass")
