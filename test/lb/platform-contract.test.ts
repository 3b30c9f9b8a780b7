import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/handler/index.js";
import { LOAD_BALANCER } from "../../src/protocol/limits.js";
import { readLbSettings } from "../../src/worker/lb/lb-config.js";
import { call, gate, post, startLbWorker } from "../support/lb-support.js";
import { waitForAsync } from "../support/wait-for.js";

/**
 * runlet's load-balancing worker and limits against the platform's published page
 * (platform-docs/serverless/load-balancing/overview.mdx, a verbatim copy; platform-docs/README.md
 * says from where): the values come from the page's own tables, not from numbers written here.
 */

const PAGE_PATH = fileURLToPath(
  new URL("../../platform-docs/serverless/load-balancing/overview.mdx", import.meta.url),
);
const PAGE = readFileSync(PAGE_PATH, "utf8");
const README = readFileSync(new URL("../../platform-docs/README.md", import.meta.url), "utf8");

/** The rows of the page's table whose header row is `header` (cells trimmed, backticks and bold removed). */
function tableAfter(header: RegExp): string[][] {
  const lines = PAGE.split("\n");
  const at = lines.findIndex((line) => header.test(line));
  if (at < 0) throw new Error(`the page has no table headed ${header}`);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim().replace(/[`*]/g, "")),
    );
  }
  return rows;
}

/** "2 min", "5.5 min" → ms. */
function minutes(text: string): number {
  const match = /^([\d.]+) min\b/.exec(text);
  if (match === null) throw new Error(`not a time in minutes: ${text}`);
  return Number(match[1]) * 60_000;
}

const health = new Map(tableAfter(/^\| Response code \| Status \|/).map(([code, status]) => [status, code]));
const env = new Map(
  tableAfter(/^\| Variable \| Default \| Description \|/).map(([name, value]) => [name, value]),
);
const limits = new Map(tableAfter(/^\| Limit \| Value \|/).map(([name, value]) => [name, value!]));

describe("the platform's load-balancing page", () => {
  it("is the copy the README names, unchanged", () => {
    const sha = createHash("sha256").update(readFileSync(PAGE_PATH)).digest("hex");
    expect(README).toContain(sha);
  });

  it("gives the defaults the worker reads its environment with", () => {
    expect(env.get("PORT")).toBe(String(LOAD_BALANCER.defaultPort));
    expect(env.get("HEALTH_CHECK_PATH")).toBe(LOAD_BALANCER.healthPath);
    expect(env.get("PORT_HEALTH")).toBe("Same as PORT");
    // The worker's own reading of an environment that sets none of them.
    const settings = readLbSettings({});
    expect([settings.port, settings.healthPort, settings.healthPath]).toEqual([
      Number(env.get("PORT")),
      Number(env.get("PORT")),
      env.get("HEALTH_CHECK_PATH"),
    ]);
    expect(readLbSettings({ PORT: "8123" }).healthPort).toBe(8123);
  });

  it("gives the timeouts and the size limit the worker and the harness's load balancer hold to", () => {
    expect(minutes(limits.get("Request timeout")!)).toBe(LOAD_BALANCER.waitMs);
    expect(minutes(limits.get("Processing timeout")!)).toBe(LOAD_BALANCER.maxRequestMs);
    // The page's "30 MB", read as MiB (docs/load-balancing.md, "Limits": 31 457 280 bytes).
    const payload = /^(\d+) MB\b/.exec(limits.get("Payload limit")!);
    expect(Number(payload?.[1]) * 1_048_576).toBe(LOAD_BALANCER.maxBodyBytes);
  });

  it("names the health codes a worker answers while it starts, once ready, and once it stops", async () => {
    expect([...health.keys()].sort()).toEqual(["Healthy", "Initializing", "Unhealthy"]);
    const listed = [health.get("Healthy"), health.get("Initializing")].map(Number);
    const setup = gate();
    const started = gate();
    const running = gate();
    const release = gate();
    await using lb = await startLbWorker(
      defineHandler({
        setup: async () => {
          started.open();
          await setup.promise;
        },
        handler: async () => {
          running.open();
          await release.promise;
          return "ok";
        },
      }),
    );
    await started.promise;
    const path = LOAD_BALANCER.healthPath;
    expect(String((await call(`${lb.url}${path}`)).status)).toBe(health.get("Initializing"));
    setup.open();
    const healthy = Number(health.get("Healthy"));
    await waitForAsync(
      "health to say ready",
      async () => (await call(`${lb.url}${path}`)).status === healthy,
    );
    // Stopping: the page's "Other", any code it does not list, so the load balancer takes the
    // worker out of routing.
    expect(health.get("Unhealthy")).toBe("Other");
    // A request in flight keeps the stopping worker serving (with nothing in flight it may close
    // its port at once: docs/load-balancing.md, "Ports and health").
    const inFlight = post(`${lb.url}/run`, { input: {} });
    await running.promise;
    const closing = lb.worker.close();
    const stopping = await waitForAsync("a code the page does not list", async () => {
      const status = await call(`${lb.url}${path}`).then(
        (answer) => answer.status,
        () => undefined,
      );
      return status !== undefined && !listed.includes(status) ? status : undefined;
    });
    expect(listed).not.toContain(stopping);
    release.open();
    expect((await inFlight).status).toBe(200);
    await closing;
  });
});
