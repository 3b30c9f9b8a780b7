/**
 * The bare undici loop of a ceiling (bench/ceiling.ts): posts the same body `count` times to one
 * URL with `inFlight` posts at once, reading each answer to its end, and prints
 * `{"perSecond": n}`. A tenth of the posts (at least 20) run first as warm-up and are not timed.
 *
 * Run: `node bin/run-ts.mjs bench/ceiling-client.ts` with the CeilingLoad as JSON on stdin.
 */

import { text } from "node:stream/consumers";
import { Agent, request } from "undici";
import type { CeilingLoad } from "./ceiling.js";

const load = JSON.parse(await text(process.stdin)) as CeilingLoad;
const dispatcher = new Agent({ connections: load.inFlight, pipelining: 1 });
const headers = { authorization: "bench", "content-type": "application/json" };

async function loop(count: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      next++;
      const res = await request(load.url, { method: "POST", headers, body: load.body, dispatcher });
      await res.body.text();
      if (res.statusCode !== 200) throw new Error(`ceiling server answered ${res.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: load.inFlight }, lane));
}

await loop(Math.max(20, Math.floor(load.count / 10)));
const started = performance.now();
await loop(load.count);
const ms = performance.now() - started;
await dispatcher.close();
process.stdout.write(JSON.stringify({ perSecond: load.count / (ms / 1000) }));
