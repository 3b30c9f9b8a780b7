import { Session } from "node:inspector/promises";
import { Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { ROOT } from "./worker-process.js";

/**
 * The files one job's path really enters (docs/architecture.md, "One job's path"): an in-process
 * worker and the harness in this process, from a tree's sources, three warm-up jobs, then V8's
 * precise coverage (call counts) around one more plain job, from its take to its report. Prints
 * every file under src/ (the harness's left out) with a function called meanwhile, and the count.
 *
 *   node bin/run-ts.mjs bench/job-path.ts [--tree <checkout>]
 *
 * `--tree`: another checkout's sources (its node_modules installed), e.g. main's, to compare.
 */

const { values } = parseArgs({ options: { tree: { type: "string" } } });
const tree = values.tree ?? ROOT;
const from = (path: string) => import(pathToFileURL(`${tree}/src/${path}`).href);
const { startHarness } = await from("harness/index.ts");
const { defineHandler, startWorker } = await from("index.ts");

const h = await startHarness({ takeTimeoutMs: 1_000 });
const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });
const worker = await startWorker(
  defineHandler({ handler: ({ input }: { input: unknown }) => ({ echo: input }) }),
  {
    env: {
      ...h.workerEnv("local", { podId: "pod-path", pingIntervalMs: 60_000 }),
      RUNPOD_ENDPOINT_ID: "local",
    },
    logDestination: quiet,
  },
);
for (let i = 0; i < 3; i += 1)
  await h.waitForJob(h.enqueue("local", { input: { warm: i } }), { timeoutMs: 20_000 });
await new Promise((resolve) => setTimeout(resolve, 200));

const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.startPreciseCoverage", { callCount: true, detailed: false });
// Taking the coverage resets the counts: what follows is the job's alone.
await session.post("Profiler.takePreciseCoverage");
await h.waitForJob(h.enqueue("local", { input: { n: 1 } }), { timeoutMs: 20_000 });
// The report is delivered and the slot freed within this (nothing else runs meanwhile).
await new Promise((resolve) => setTimeout(resolve, 300));
const { result } = await session.post("Profiler.takePreciseCoverage");
session.disconnect();

const src = `${pathToFileURL(tree).href}/src/`;
const entered = result
  .filter((script) => script.url.startsWith(src) && !script.url.startsWith(`${src}harness/`))
  .filter((script) => script.functions.some((fn) => (fn.ranges[0]?.count ?? 0) > 0))
  .map((script) => script.url.slice(src.length))
  .sort();
for (const file of entered) console.log(file);
const inWorker = entered.filter((file) => file.startsWith("worker/")).length;
console.log(`${entered.length} files under src/ (${inWorker} in worker/), harness left out`);
await worker.close();
await h.close();
