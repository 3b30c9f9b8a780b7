/**
 * The bare worker of the per-job overhead's floor (bench/relay.ts): a loop that holds a GET on
 * `<base>/take`, posts the job's input back as its output to `<base>/done/<id>`, and asks again,
 * until the take is answered with anything but 200. It parses nothing it does not need, logs
 * nothing, validates nothing: the least a worker can do per job.
 *
 * Run: `node bin/run-ts.mjs bench/relay-worker.ts <base URL>`.
 */
import { Agent, request } from "undici";

const base = process.argv[2];
if (base === undefined) throw new Error("usage: relay-worker.ts <base URL>");
const dispatcher = new Agent({ connections: 2 });
const headers = { "content-type": "application/json" };
for (;;) {
  const take = await request(`${base}/take`, { dispatcher });
  const text = await take.body.text();
  if (take.statusCode !== 200) break;
  const job = JSON.parse(text) as { id: string; input: unknown };
  const done = await request(`${base}/done/${job.id}`, {
    method: "POST",
    headers,
    body: JSON.stringify({ output: job.input }),
    dispatcher,
  });
  await done.body.text();
}
await dispatcher.close();
