"""The declaw code-interpreter example as declaw's users write it: declaw's own SDK (PyPI `declaw`),
against `declaw-wasm serve` (see README.md)."""

from declaw import Sandbox

SNIPPETS = [
    # 1. SymPy: solve a linear system
    """
from sympy import symbols, Eq, solve
x, y = symbols("x y")
print("solution:", solve([Eq(x + 2*y, 5), Eq(3*x - y, 4)], [x, y]))
""",
    # 2. pandas: group and sum
    """
import io
import pandas as pd
df = pd.read_csv(io.StringIO("region,sales\\nNA,120\\nEU,80\\nAPAC,150\\nNA,60"))
print(df.groupby("region")["sales"].sum().to_dict())
""",
    # 3. matplotlib: save a chart
    """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3, 4], [1, 4, 9, 16], marker="o")
plt.title("squares")
plt.savefig("/tmp/chart.png", dpi=120)
print("wrote /tmp/chart.png")
""",
]


def main() -> None:
    sbx = Sandbox.create(template="code-interpreter", timeout=180)
    try:
        for i, code in enumerate(SNIPPETS):
            path = f"/tmp/snip_{i}.py"
            sbx.files.write(path, code)
            r = sbx.commands.run(f"python3 {path}", timeout=30)
            print(f"--- snippet {i}: exit {r.exit_code}")
            print(r.stdout, end="")
            if r.exit_code != 0:
                print(r.stderr, end="")
        print("chart.png size:", sbx.files.get_info("/tmp/chart.png").size, "bytes")
    finally:
        sbx.kill()


if __name__ == "__main__":
    main()
