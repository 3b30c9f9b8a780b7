import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { call, post } from "../support/lb-support.js";
import { childEnv, REPO_ROOT, runCli } from "../support/run-cli.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

/**
 * Load-balancing and pod modes as processes: `runlet start` shutting down on SIGTERM with
 * requests in flight, and one built bundle run as a queue worker, a load-balancing worker and a
 * harness on a Pod with no rebuild (docs/load-balancing.md).
 */

/** A child and what it printed, with its exit. */
interface Child {
  readonly process: ChildProcess;
  readonly out: () => string;
  readonly exited: Promise<number | null>;
}

function start(args: readonly string[], env: Record<string, string>, cwd = REPO_ROOT): Child {
  const child = spawn(process.execPath, [...args], {
    cwd,
    env: { ...childEnv(), RUNPOD_NETWORK_CHECK_TARGET: "off", ...env },
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

/** The port a load-balancing worker's JSON log says it bound. */
function boundPort(child: Child): Promise<number> {
  return waitFor("the load-balancing port", () => {
    const match = /"port":(\d+)/.exec(child.out());
    if (child.process.exitCode !== null) throw new Error(`the worker exited: ${child.out()}`);
    return match === null ? undefined : Number(match[1]);
  });
}

const LB_ENV = { PORT: "0", RUNLET_LB_HOST: "127.0.0.1", RUNPOD_ENDPOINT_ID: "lb-process" };

describe("runlet start in load-balancing mode", () => {
  it("on SIGTERM answers 503 to health, finishes the requests in flight, and exits 0", async () => {
    const child = start(["bin/runlet.mjs", "start", "test/fixtures/slow.ts"], LB_ENV);
    try {
      const url = `http://127.0.0.1:${await boundPort(child)}`;
      await waitForAsync("ready", async () => (await call(`${url}/ping`)).status === 200);
      const inFlight = [
        post(`${url}/run`, { input: { ms: 1_000 } }),
        post(`${url}/run`, { input: { ms: 1_200 } }),
      ];
      // Both are running (each sleeps ≥ 1 s) when the signal comes.
      await new Promise((resolve) => setTimeout(resolve, 300));
      child.process.kill("SIGTERM");
      await waitForAsync("health to say stopping", async () => (await call(`${url}/ping`)).status === 503);
      const answers = await Promise.all(inFlight);
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      expect(answers.map((a) => JSON.parse(a.text).output)).toEqual([{ slept: 1_000 }, { slept: 1_200 }]);
      expect(await child.exited).toBe(0);
    } finally {
      if (child.process.exitCode === null) child.process.kill("SIGKILL");
    }
  }, 60_000);

  it("refuses a mode it does not know with exit 2, naming the modes", async () => {
    const r = await runCli(["start", "test/fixtures/slow.ts", "--mode", "sideways"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--mode must be one of queue, lb, pod");
  });
});

describe("runlet dev --mode lb", () => {
  it("serves the handler through a load-balancing endpoint of the harness", async () => {
    const key = "rl_lbdevtest_0123456789abcdef";
    const dev = start(
      ["bin/runlet.mjs", "dev", "examples/echo/handler.ts", "--mode", "lb", "--port", "0", "--api-key", key],
      {},
    );
    try {
      const endpoint = await waitFor("the endpoint line", () => {
        if (dev.process.exitCode !== null) throw new Error(`runlet dev exited: ${dev.out()}`);
        return /endpoint {2}(\S+\/lb\/local)/.exec(dev.out())?.[1];
      });
      await waitFor("a worker ready", () => dev.out().includes("runlet dev: worker w1 ready"), 30_000);
      const answer = await waitForAsync("an answer through the balancer", async () => {
        const a = await post(
          `${endpoint}/runsync`,
          { input: { text: "dev" } },
          { authorization: `Bearer ${key}` },
        );
        return a.status === 200 ? a : undefined;
      });
      expect(answer.headers["x-runpod-worker-id"]).toBe("w1");
      expect(JSON.parse(answer.text).output).toEqual({ echo: "dev" });
    } finally {
      dev.process.kill("SIGINT");
      await dev.exited;
    }
  }, 60_000);
});

describe("one bundle, every mode", () => {
  let tmp: string;
  let dir: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), "runlet-lb-bundle-"));
    dir = join(tmp, "echo");
    await mkdir(dir);
    const r = await runCli(["build", join(REPO_ROOT, "examples/echo/handler.ts"), "--no-verify"], {
      cwd: dir,
    });
    expect(r.code, r.stderr).toBe(0);
  }, 200_000);
  afterAll(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it("runs as a queue worker and as a load-balancing worker with no rebuild", async () => {
    const bundle = join(dir, "dist", "worker.mjs");
    await using harness = await startHarness({ takeTimeoutMs: 500, endpoints: [{ id: "bundle" }] });
    const queue = start([bundle], { ...harness.workerEnv("bundle"), RUNPOD_ENDPOINT_ID: "bundle" }, dir);
    try {
      const id = harness.enqueue("bundle", { input: { text: "queue" } });
      const job = await harness.waitForJob(id, { timeoutMs: 30_000 });
      expect(job.output).toEqual({ echo: "queue" });
    } finally {
      queue.process.kill("SIGTERM");
      await queue.exited;
    }
    const lb = start([bundle], LB_ENV, dir);
    try {
      const url = `http://127.0.0.1:${await boundPort(lb)}`;
      await waitForAsync("ready", async () => (await call(`${url}/ping`)).status === 200);
      const answer = await post(`${url}/runsync`, { input: { text: "balanced", upper: true } });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.text)).toMatchObject({ status: "COMPLETED", output: { echo: "BALANCED" } });
    } finally {
      lb.process.kill("SIGTERM");
      expect(await lb.exited).toBe(0);
    }
  }, 90_000);

  it("serves the job API from the image with MODE_TO_RUN=pod", async () => {
    const bundle = join(dir, "dist", "worker.mjs");
    const pod = start([bundle], { MODE_TO_RUN: "pod", PORT: "0", RUNLET_LB_HOST: "127.0.0.1" }, dir);
    try {
      const url = await waitFor("the job API's address", () => {
        if (pod.process.exitCode !== null) throw new Error(`the pod exited: ${pod.out()}`);
        return /the job API is at (\S+)/.exec(pod.out())?.[1];
      });
      const key = await waitFor("the printed key", () => /shown once\): (\S+)/.exec(pod.out())?.[1]);
      const answer = await waitForAsync(
        "a job through the Pod's harness",
        async () => {
          const a = await post(
            `${url}/runsync`,
            { input: { text: "on a pod" } },
            { authorization: `Bearer ${key}` },
          );
          return a.status === 200 && JSON.parse(a.text).status === "COMPLETED" ? a : undefined;
        },
        60_000,
      );
      expect(JSON.parse(answer.text).output).toEqual({ echo: "on a pod" });
    } finally {
      pod.process.kill("SIGTERM");
      expect(await pod.exited).toBe(0);
    }
  }, 120_000);
});
