// The declaw code-interpreter example in TypeScript, as declaw's users write it: declaw's own SDK
// (npm `@declaw/sdk`) against `declaw-wasm serve`, with DECLAW_DOMAIN and DECLAW_API_KEY set
// (or in a .env file): see README.md.

import "dotenv/config";
import { Sandbox } from "@declaw/sdk";

const SNIPPETS = [
  // 1. SymPy: solve a linear system
  `
from sympy import symbols, Eq, solve
x, y = symbols("x y")
print("solution:", solve([Eq(x + 2*y, 5), Eq(3*x - y, 4)], [x, y]))
`,
  // 2. pandas: group and sum
  `
import io
import pandas as pd
df = pd.read_csv(io.StringIO("region,sales\\nNA,120\\nEU,80\\nAPAC,150\\nNA,60"))
print(df.groupby("region")["sales"].sum().to_dict())
`,
  // 3. matplotlib: save a chart
  `
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3, 4], [1, 4, 9, 16], marker="o")
plt.title("squares")
plt.savefig("/tmp/chart.png", dpi=120)
print("wrote /tmp/chart.png")
`,
];

async function main(): Promise<void> {
  const sbx = await Sandbox.create({ template: "code-interpreter", timeout: 180 });
  try {
    for (const [i, code] of SNIPPETS.entries()) {
      const path = `/tmp/snip_${i}.py`;
      await sbx.files.write(path, code);
      const r = await sbx.commands.run(`python3 ${path}`, { timeout: 30 });
      console.log(`--- snippet ${i}: exit ${r.exitCode}`);
      process.stdout.write(r.stdout);
      if (r.exitCode !== 0) process.stdout.write(r.stderr);
    }
    console.log("chart.png size:", (await sbx.files.getInfo("/tmp/chart.png")).size, "bytes");
  } finally {
    await sbx.kill();
  }
}

await main();
