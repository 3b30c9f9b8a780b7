import { type ChildProcess, spawn } from "node:child_process";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { call, post } from "../support/lb-support.js";
import { childEnv, REPO_ROOT, runCli } from "../support/run-cli.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

/**
 * `runlet deploy --type lb` against `runlet dev`: the endpoint the harness's management copy
 * creates is a real load-balancing endpoint — its printed `requestUrls.base` reaches workers that
 * `runlet dev` starts in load-balancing mode (`runlet start` children), through plain fetch and the
 * official `openai` client; `workers` answers from them; deleting the endpoint removes its route.
 * And `runlet dev --mode lb` prints the load-balancing routes to try (issue 52).
 */

const HANDLER = "examples/openai-chat/handler.ts";
const KEY = "rl_lbdeploytest_0123456789abcdef";

interface Child {
  readonly process: ChildProcess;
  readonly out: () => string;
  readonly exited: Promise<number | null>;
}

function start(args: readonly string[]): Child {
  const child = spawn(process.execPath, [...args], {
    cwd: REPO_ROOT,
    env: { ...childEnv(), RUNPOD_NETWORK_CHECK_TARGET: "off" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return { process: child, out: () => out, exited };
}

const auth = { authorization: `Bearer ${KEY}` };

describe("runlet deploy --type lb against runlet dev --mode lb", () => {
  it("prints the load-balancing try-lines, and a deployed lb endpoint serves the handler at its printed URL until deleted", async () => {
    const dev = start(["bin/runlet.mjs", "dev", HANDLER, "--mode", "lb", "--port", "0", "--api-key", KEY]);
    try {
      const endpoint = await waitFor("the endpoint line", () => {
        if (dev.process.exitCode !== null) throw new Error(`runlet dev exited: ${dev.out()}`);
        return /endpoint {2}(\S+\/lb\/local)\n/.exec(dev.out())?.[1];
      });
      const origin = endpoint.slice(0, -"/lb/local".length);
      // Item 2: the OpenAI try-lines name the worker's own /v1 routes on the LB route, not the queue's /openai/v1.
      // Both lines, whole: the second may come in a later chunk of output than the first.
      const [, openaiLine, tryUrl] = await waitFor(
        "the openai try-lines",
        () =>
          /\n {2}openai {4}(\S+) .*\n {2}try {7}curl -s (\S+) -H 'Authorization: Bearer /.exec(dev.out()) ??
          undefined,
        30_000,
      );
      expect(openaiLine).toBe(`${endpoint}/v1`);
      expect(tryUrl).toBe(`${endpoint}/v1/chat/completions`);
      expect(dev.out()).not.toContain("/openai/v1");

      const deployed = await runCli(
        [
          "deploy",
          HANDLER,
          "--image",
          "me/chat:1",
          "--type",
          "lb",
          "--cpu",
          "cpu3c:2",
          "--base-url",
          origin,
          "--json",
        ],
        { env: { ...childEnv(), RUNPOD_API_KEY: KEY } },
      );
      expect(deployed.code, deployed.stderr).toBe(0);
      const result = JSON.parse(deployed.stdout) as {
        endpointId: string;
        type: string;
        requestUrls: Record<string, string>;
        curl: string;
      };
      expect(result.type).toBe("LOAD_BALANCER");
      // "Try it" posts the sample input to the worker's /runsync, not a health check.
      expect(result.curl).toBe(
        `curl -X POST '${origin}/lb/${result.endpointId}/runsync' -H "Authorization: Bearer $RUNPOD_API_KEY" -H 'Content-Type: application/json' -d '{"input":{}}'`,
      );
      const base = result.requestUrls["base"]!;
      expect(base).toBe(`${origin}/lb/${result.endpointId}`);
      expect(result.requestUrls["health"]).toBe(`${base}/ping`);

      // Plain fetch: the first request waits while the harness starts a worker for it.
      const answer = await fetch(`${base}/runsync`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ input: { text: "plain" } }),
        signal: AbortSignal.timeout(60_000),
      });
      expect(answer.status).toBe(200);
      const workerId = answer.headers.get("x-runpod-worker-id");
      expect(workerId).toMatch(new RegExp(`^${result.endpointId}-`));
      expect(await answer.json()).toMatchObject({ status: "COMPLETED", output: { echo: { text: "plain" } } });

      // The official openai client, streaming, from <printed base>/v1.
      const client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: "echo-1",
        messages: [{ role: "user", content: "hello there" }],
        stream: true,
      });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      expect(text).toBe("You said: hello there");

      // workers answers from the workers the harness started for it.
      const workers = await call(`${origin}/v2/serverless/${result.endpointId}/workers`, { headers: auth });
      expect(workers.status).toBe(200);
      const listed = JSON.parse(workers.text) as { workers: { id: string; status: string }[] };
      expect(listed.workers.map((w) => w.id)).toEqual([workerId]);
      expect(["IDLE", "RUNNING"]).toContain(listed.workers[0]!.status);
      // The deployed workers are the handler in load-balancing mode, logged under their endpoint.
      expect(dev.out()).toContain(`[${result.endpointId}/w1]`);

      // Deleting the endpoint removes its route and stops its workers.
      const removed = await call(`${origin}/v2/serverless/${result.endpointId}`, {
        method: "DELETE",
        headers: auth,
      });
      expect(removed.status).toBe(204);
      expect((await call(`${base}/ping`, { headers: auth })).status).toBe(404);
      // The dev endpoint's own route still serves.
      await waitForAsync("the dev endpoint to serve", async () => {
        const a = await post(`${endpoint}/runsync`, { input: { text: "dev" } }, auth);
        return a.status === 200 ? a : undefined;
      });
    } finally {
      dev.process.kill("SIGINT");
      await dev.exited;
    }
  }, 120_000);

  it("prints a /runsync curl on the LB route for a plain handler, and that call answers", async () => {
    const dev = start([
      "bin/runlet.mjs",
      "dev",
      "examples/echo/handler.ts",
      "--mode",
      "lb",
      "--port",
      "0",
      "--api-key",
      KEY,
    ]);
    try {
      const line = await waitFor(
        "the try-line",
        () => {
          if (dev.process.exitCode !== null) throw new Error(`runlet dev exited: ${dev.out()}`);
          return (
            /\n {2}try {7}curl -s -X POST (\S+) -H 'Authorization: Bearer (\S+)' -H 'Content-Type: application\/json' -d '(.*)'\n/.exec(
              dev.out(),
            ) ?? undefined
          );
        },
        30_000,
      );
      const [, url, key, body] = line;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/lb\/local\/runsync$/);
      expect(key).toBe(KEY);
      // The body is an example of the handler's input schema; the call, made as printed, is served.
      const answer = await waitForAsync("the printed call to answer", async () => {
        const a = await fetch(url!, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: body!,
        });
        return a.status === 200 ? a : undefined;
      });
      expect(await answer.json()).toMatchObject({
        status: "COMPLETED",
        output: { echo: expect.any(String) },
      });
    } finally {
      dev.process.kill("SIGINT");
      await dev.exited;
    }
  }, 60_000);
});
