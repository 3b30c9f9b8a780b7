import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { MAX_WEBHOOK_ATTEMPT_BYTES, MAX_WEBHOOK_URL_BYTES } from "../../src/harness/jobs/webhooks.js";
import { inMemoryHarness } from "../support/inject.js";
import { send } from "../support/raw-http.js";
import { waitFor } from "../support/workers.js";

// Issue 32, item 4: webhook attempts were kept for ever and not counted; 150 jobs with 2 MiB
// webhook URLs left 305 MiB on the harness's heap. Now the URL is bounded (400 naming the limit)
// and the attempts list is bounded in count and bytes, and counted in memory().

describe("webhooks are bounded (issue 32)", () => {
  it("refuses a webhook URL over the limit with a 400 naming it, and takes one at the limit", async () => {
    await using h = inMemoryHarness();
    const base = "https://hooks.example.com/";
    const post = (webhook: string) =>
      send(h.url, {
        method: "POST",
        path: "/v2/local/run",
        headers: { authorization: h.apiKey, "content-type": "application/json" },
        body: JSON.stringify({ input: {}, webhook }),
        connect: () => h.connect(),
      });
    const huge = await post(base + "a".repeat(2 * 1_048_576));
    expect(huge.status).toBe(400);
    expect(huge.text).toContain(`over the limit of ${MAX_WEBHOOK_URL_BYTES} bytes for a webhook URL`);
    const fits = await post(base + "a".repeat(MAX_WEBHOOK_URL_BYTES - base.length));
    expect(fits.status).toBe(200);
    expect(() =>
      h.enqueue("local", { input: {}, webhook: base + "a".repeat(MAX_WEBHOOK_URL_BYTES) }),
    ).toThrow(`over the limit of ${MAX_WEBHOOK_URL_BYTES} bytes`);
  });

  it("keeps the attempts within their byte bound, oldest dropped, and counts them in memory()", async () => {
    let received = 0;
    const receiver = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        received += 1;
        res.writeHead(200).end();
      });
    });
    receiver.listen(0, "127.0.0.1");
    await once(receiver, "listening");
    const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
    try {
      await using h = inMemoryHarness();
      const jobs = 150;
      for (let i = 0; i < jobs; i++) {
        // ~8 KiB URLs: 150 attempts are over the byte bound.
        const webhook = `${hook}${i}/${"p".repeat(MAX_WEBHOOK_URL_BYTES - hook.length - 10)}`;
        h.stopJob(h.enqueue("local", { input: {}, webhook }));
      }
      await waitFor("every webhook to arrive", () => received === jobs, 20_000);
      const newest = (a: { url: string }) => a.url.startsWith(`${hook}149/`);
      await waitFor("the last attempt to be recorded", () => h.webhookAttempts().some(newest));
      const memory = h.memory();
      expect(memory.webhookAttemptBytes).toBeLessThanOrEqual(MAX_WEBHOOK_ATTEMPT_BYTES);
      expect(memory.webhookAttempts).toBeLessThan(jobs);
      const attempts = h.webhookAttempts();
      expect(attempts).toHaveLength(memory.webhookAttempts);
      // The oldest went first.
      expect(attempts.some((a) => a.url.startsWith(`${hook}0/`))).toBe(false);
    } finally {
      receiver.close();
    }
  });
});
