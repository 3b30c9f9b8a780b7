import { describe, expect, it } from "vitest";
import { ManualClock, realClock } from "../../src/clock.js";
import { createLogger } from "../../src/log/index.js";
import { checkSidecars } from "../../src/sidecar/options.js";
import { SidecarProcess } from "../../src/sidecar/sidecar-process.js";
import {
  alive,
  eventsOf,
  FIXTURE_SERVER,
  fixtureSidecar,
  freePort,
  scratch,
} from "../support/sidecar-rig.js";
import { logSink, waitFor } from "../support/workers.js";

// Real child processes (the fixture model server), no mocks: the supervisor starts it through its
// guard, waits for it, reads its lines and stops it.

function start(
  options: Parameters<typeof fixtureSidecar>[2] & { env: Record<string, string>; port: number },
  clock = realClock(),
) {
  const sink = logSink();
  const log = createLogger({ platform: true, destination: sink.stream, secrets: ["the-worker-api-key"] });
  const { env, port, ...more } = options;
  const [settings] = checkSidecars(fixtureSidecar(port, env, more));
  const proc = new SidecarProcess({ settings: settings!, log, clock, baseEnv: process.env });
  return { proc, sink };
}

describe("a sidecar process", () => {
  it("is ready once its health URL answers 2xx, not while it answers 503", async () => {
    using tmp = scratch();
    const port = await freePort();
    const { proc, sink } = start({ port, env: { READY_AFTER_MS: "600", EVENTS_FILE: tmp.events } });
    try {
      await proc.waitReady(new AbortController().signal);
      const started = eventsOf(tmp.events).find((e) => e.event === "started");
      // It was probed while loading (a 503 is "not yet") and was ready only after READY_AFTER_MS.
      const readyLine = sink.lines.find((l) => l["message"] === 'sidecar "llm" is ready')!;
      expect(readyLine["sidecar"]).toBe("llm");
      expect(Date.now() - (started!["at"] as number)).toBeGreaterThanOrEqual(600);
      const res = await fetch(`http://127.0.0.1:${port}/health`);
      expect(res.status).toBe(200);
    } finally {
      await proc.stop();
    }
  });

  it("is ready on a port once it accepts a connection", async () => {
    const port = await freePort();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    const { proc } = start({ port, env: { LISTEN_AFTER_MS: "600" }, ready: { port } });
    try {
      await proc.waitReady(new AbortController().signal);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      // Some 30 refused probes at 20 ms on one wait signal: none may leave a listener on it.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await proc.stop();
    }
  });

  it("fails at once with its exit code and last lines when it dies while starting", async () => {
    const port = await freePort();
    // A ready timeout far beyond the test's: only the death can end the wait.
    const { proc } = start({ port, env: { CRASH_AT_START: "7" }, readyTimeoutMs: 600_000 });
    const err = await proc.waitReady(new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "RUNLET_SIDECAR_FAILED" });
    expect((err as Error).message).toBe(
      'sidecar "llm" exited with code 7 while starting; its last lines: fatal: model file not found: /models/missing.gguf',
    );
  });

  it("fails when readyTimeoutMs passes on the worker's clock (a ManualClock here)", async () => {
    const port = await freePort();
    const clock = new ManualClock();
    // An hour: real time cannot end this wait within the test, only the clock can.
    const { proc, sink } = start(
      { port, env: { READY_AFTER_MS: "7200000" }, readyTimeoutMs: 3_600_000 },
      clock,
    );
    try {
      const failed = proc.waitReady(new AbortController().signal).then(
        () => new Error("ready"),
        (e: unknown) => e as Error,
      );
      await waitFor("its first line", () => sink.lines.some((l) => l["message"] === "model loading"));
      clock.advance(3_600_000);
      const err = await failed;
      expect(err.message).toMatch(
        /^sidecar "llm" did not answer within 3600000 ms \(readyTimeoutMs\) at http:\/\/127\.0\.0\.1:\d+\/health; its last lines: .*model loading/,
      );
      expect(proc.exit).toBeUndefined();
    } finally {
      await proc.stop();
    }
  });

  it("logs its stdout and stderr as worker lines with a sidecar field, secrets scrubbed", async () => {
    const port = await freePort();
    const { proc, sink } = start({
      port,
      env: { SECRET_TOKEN: "hf_abcdefghijkl", HF_TOKEN: "hf_abcdefghijkl" },
    });
    try {
      await proc.waitReady(new AbortController().signal);
      await waitFor("its lines", () => sink.lines.some((l) => l["message"] === "a line on stderr"));
      const mine = sink.lines.filter((l) => l["sidecar"] === "llm" && l["stream"] !== undefined);
      expect(mine).toContainEqual({
        level: "INFO",
        requestId: null,
        sidecar: "llm",
        stream: "stdout",
        message: "loading with token [redacted]",
      });
      expect(mine).toContainEqual({
        level: "INFO",
        requestId: null,
        sidecar: "llm",
        stream: "stderr",
        message: "a line on stderr",
      });
      expect(sink.text()).not.toContain("hf_abcdefghijkl");
    } finally {
      await proc.stop();
    }
  });

  it("stops with SIGTERM, and its whole process group goes", async () => {
    using tmp = scratch();
    const port = await freePort();
    const { proc } = start({ port, env: { EVENTS_FILE: tmp.events, GRANDCHILD: "1" } });
    await proc.waitReady(new AbortController().signal);
    const started = eventsOf(tmp.events).find((e) => e.event === "started")!;
    const pids = [started["pid"] as number, started["grandchild"] as number];
    expect(pids.every(alive)).toBe(true);
    const exit = await proc.stop();
    expect(eventsOf(tmp.events).map((e) => e.event)).toContain("sigterm");
    expect(exit.lastLines).toContain("stopping on SIGTERM");
    await waitFor("the group to be gone", () => !pids.some(alive), 5_000);
  });

  it("gets SIGKILL after stopGraceMs when it ignores SIGTERM", async () => {
    using tmp = scratch();
    const port = await freePort();
    const { proc } = start({ port, env: { EVENTS_FILE: tmp.events, IGNORE_TERM: "1" }, stopGraceMs: 300 });
    await proc.waitReady(new AbortController().signal);
    const pid = eventsOf(tmp.events).find((e) => e.event === "started")!["pid"] as number;
    await proc.stop();
    expect(eventsOf(tmp.events).map((e) => e.event)).toContain("sigterm");
    await waitFor("the server to be gone", () => !alive(pid), 5_000);
  });

  it("relays its exit code when it dies on its own", async () => {
    const port = await freePort();
    const { proc } = start({ port, env: {} });
    try {
      await proc.waitReady(new AbortController().signal);
      await fetch(`http://127.0.0.1:${port}/crash?code=5`, { method: "POST" });
      const exit = await proc.exited;
      expect(exit).toMatchObject({ code: 5, signal: null });
      expect(proc.reasonFor(exit, " while the worker ran")).toMatch(
        /^sidecar "llm" exited with code 5 while the worker ran; its last lines: .*crashing on request with code 5$/,
      );
    } finally {
      await proc.stop();
    }
  });

  it("reports a program that does not exist", async () => {
    const [settings] = checkSidecars({ command: ["/nonexistent/llama-server"], ready: { port: 1 } });
    const sink = logSink();
    const proc = new SidecarProcess({
      settings: settings!,
      log: createLogger({ platform: true, destination: sink.stream }),
      clock: realClock(),
      baseEnv: process.env,
    });
    const err = (await proc.waitReady(new AbortController().signal).catch((e: unknown) => e)) as Error;
    expect(err.message).toBe(
      'sidecar "sidecar" exited with code 127 while starting; its last lines: runlet sidecar guard: cannot start "/nonexistent/llama-server": spawn /nonexistent/llama-server ENOENT',
    );
  });
});

describe("the sidecar option", () => {
  it("names what is wrong", () => {
    const bad: Array<[unknown, string]> = [
      [{ command: [], ready: { port: 8080 } }, "defineHandler: sidecar: command must be a non-empty array"],
      [{ command: ["x"], ready: {} }, "defineHandler: sidecar: ready must be { url } or { port }"],
      [
        { command: ["x"], ready: { port: 70_000 } },
        "ready.port must be an integer from 1 to 65535, got 70000",
      ],
      [
        { command: ["x"], ready: { url: "ftp://h/x" } },
        "ready.url must be an http:// or https:// URL, got ftp:",
      ],
      [
        { command: ["x"], ready: { port: 1 }, readyTimeoutMs: 0 },
        "readyTimeoutMs must be an integer ≥ 1, got 0",
      ],
      [{ command: ["x"], ready: { port: 1 }, env: { A: 1 } }, "env.A must be a string"],
      [{ command: ["x"], ready: { port: 1 }, name: "a b" }, "name must be 1 to 64 letters"],
      [
        [
          { command: ["x"], ready: { port: 1 } },
          { command: ["y"], ready: { port: 2 } },
        ],
        'two sidecars are named "sidecar"',
      ],
    ];
    for (const [value, message] of bad) {
      expect(() => checkSidecars(value)).toThrow(message);
    }
  });

  it("gives the base URL from the ready URL's origin or the port, or the url option", () => {
    expect(checkSidecars({ command: ["x"], ready: { url: "http://127.0.0.1:8080/health" } })[0]!.url).toBe(
      "http://127.0.0.1:8080",
    );
    expect(checkSidecars({ command: ["x"], ready: { port: 11434 } })[0]!.url).toBe("http://127.0.0.1:11434");
    expect(
      checkSidecars({ command: ["x"], ready: { port: 1 }, url: "http://localhost:1/api/" })[0]!.url,
    ).toBe("http://localhost:1/api");
    expect(FIXTURE_SERVER).toMatch(/sidecar-server\.mjs$/);
  });
});
