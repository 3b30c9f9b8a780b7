/**
 * CPU per call of the harness's per-request parts, from a checkout's TypeScript sources: routing a
 * worker request (`requestOf` + `decide`, job-done and job-take-batch alternating), a keyed wait
 * and its wake, a real-clock timer set and cleared. One JSON line, ns per call. Run it on two
 * checkouts alternately (docs/benchmarks.md, "Issue 35's redesign of the harness, before and after").
 *
 *   node bin/run-ts.mjs bench/harness-parts.ts [--root <checkout>]
 */
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

/** ns of CPU per call of `fn`, after a tenth as many calls to warm it. */
function cpuNs(count: number, fn: (i: number) => void): number {
  for (let i = 0; i < count / 10; i++) fn(i);
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) fn(i);
  const used = process.cpuUsage(before);
  return Math.round(((used.user + used.system) * 1_000) / count);
}

/** ns of CPU per awaited call of `fn`. */
async function cpuNsAsync(count: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < count / 10; i++) await fn(i);
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) await fn(i);
  const used = process.cpuUsage(before);
  return Math.round(((used.user + used.system) * 1_000) / count);
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { root: { type: "string" } } });
  const root = resolve(values.root ?? resolve(fileURLToPath(import.meta.url), "../.."));
  const load = (path: string) => import(pathToFileURL(resolve(root, path)).href);
  const table = await load("src/harness/http/route-table.ts");
  const router = await load("src/harness/http/router.ts");
  const workerRoutes = await load("src/harness/routes/worker-routes.ts");
  const wait = await load("src/wait.ts");
  const clocks = await load("src/clock.ts");
  const family = {
    name: "worker",
    mount: "/v2/:endpoint/",
    claims: "named",
    context: {},
    routes: table.routesOf(workerRoutes.WORKER_ROUTE_TABLE),
    defaultAccess: "worker",
    authorize: () => "ok",
    hasEndpoint: () => true,
    refuse: () => {},
  };
  const urls = [
    new URL("http://127.0.0.1:1/v2/local/job-done/pod-1/job-123-e1?gpu=LOCAL&isStream=false"),
    new URL("http://127.0.0.1:1/v2/local/job-take-batch/pod-1?batch_size=8&job_in_progress=1"),
  ];
  const headers = { authorization: "key" };
  let served = 0;
  const routeNs = cpuNs(400_000, (i) => {
    const found = router.requestOf(family, i & 1 ? "GET" : "POST", headers, urls[i & 1]!);
    if (table.decide(family, found.request, found.malformed).ok) served++;
  });
  if (served === 0) throw new Error("no request was routed");
  const waiters = new wait.KeyedWaiters(clocks.realClock());
  const waitWakeNs = await cpuNsAsync(200_000, (i) => {
    const waiting = waiters.wait(i, 300_000);
    waiters.wake(i);
    return waiting;
  });
  const clock = clocks.realClock();
  const timerNs = cpuNs(400_000, () => clock.clearTimeout(clock.setTimeout(() => {}, 300_000)));
  process.stdout.write(`${JSON.stringify({ root, routeNs, waitWakeNs, timerNs })}\n`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
}
