import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import type { HandlerDefinition } from "../../src/handler/index.js";
import type { WorkerSpawner } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";

/**
 * A handler for tests of endpoints and their workers: each job (or load-balancing request) with
 * input `{ms}` sleeps `ms` — ending early when its signal aborts — or, with `ms: -1`, waits until
 * the test opens the gate ({@link SlowHandler.closeGate} then {@link SlowHandler.release}).
 */
export interface SlowHandler {
  readonly definition: ReturnType<typeof defineHandler>;
  /** From now on, jobs sent with `ms: -1` wait until {@link release}. */
  closeGate(): void;
  /** Lets the jobs waiting on the gate end. */
  release(): void;
}

/** A {@link SlowHandler} of `concurrency` jobs at once. */
export function slowHandler(concurrency = 1): SlowHandler {
  let hold = Promise.resolve();
  let open: () => void = () => undefined;
  const definition = defineHandler({
    concurrency,
    handler: async ({ input, signal }) => {
      const { ms } = input as { ms: number };
      if (ms === -1) await hold;
      else await sleep(ms, undefined, { signal }).catch(() => undefined);
      return { slept: ms };
    },
  });
  return {
    definition,
    closeGate() {
      hold = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
    release: () => open(),
  };
}

/** A log destination that drops every line. */
export function quietSink(): Writable {
  return new Writable({ write: (_chunk, _encoding, callback) => callback() });
}

/** A spawner of in-process workers of `definition` that notes each start and stop by pod id. */
export function recordingSpawner(definition: HandlerDefinition): {
  spawn: WorkerSpawner;
  started: string[];
  stopped: string[];
} {
  const started: string[] = [];
  const stopped: string[] = [];
  const spawn: WorkerSpawner = async (env) => {
    const worker = await startWorker(definition, {
      mode: env["RUNLET_MODE"] === "lb" ? "lb" : "queue",
      env,
      logDestination: quietSink(),
      takeTimeoutMs: 1_000,
      shutdownGraceMs: 1_000,
    });
    const pod = env["RUNPOD_POD_ID"] ?? "?";
    started.push(pod);
    return {
      close: async () => {
        await worker.close();
        stopped.push(pod);
      },
      exited: worker.stopped,
    };
  };
  return { spawn, started, stopped };
}
