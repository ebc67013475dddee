// bench/api's E2B figure: the stock SDK's commands.run('true') round trip
// on one sandbox, N times after a warm-up; prints one JSON line
// {"e2b_exec_ms": median, "runs": N}.
import { Sandbox } from "e2b";

const n = Number(process.argv[2] || 30);
const sbx = await Sandbox.create({ timeoutMs: 600_000 });
await sbx.commands.run("true");
const ms = [];
for (let i = 0; i < n; i++) {
  const t = performance.now();
  await sbx.commands.run("true");
  ms.push(performance.now() - t);
}
await sbx.kill();
ms.sort((a, b) => a - b);
console.log(JSON.stringify({ e2b_exec_ms: ms[Math.floor(n / 2)], runs: n }));
