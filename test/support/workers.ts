import { Writable } from "node:stream";
import type { HandlerDefinition } from "../../src/handler/index.js";
import { type Harness, startHarness } from "../../src/harness/index.js";
import { startWorker, type Worker, type WorkerOptions } from "../../src/worker/index.js";
import { inMemoryHarness, isInMemory } from "./inject.js";

export { turn, waitFor } from "./wait-for.js";

/** Log lines a worker wrote (platform JSON mode), parsed. */
export interface LogSink {
  readonly stream: Writable;
  readonly lines: Array<Record<string, unknown>>;
  readonly text: () => string;
}

/** A destination that keeps every JSON log line. */
export function logSink(): LogSink {
  const lines: Array<Record<string, unknown>> = [];
  let raw = "";
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, callback) {
      const text = chunk.toString();
      raw += text;
      for (const line of text.split("\n")) {
        if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      callback();
    },
  });
  return { stream, lines, text: () => raw };
}

/** A harness on loopback with short long polls, for tests whose subject is the socket (or a process). */
export function testHarness(takeTimeoutMs = 300): Promise<Harness> {
  return startHarness({ takeTimeoutMs });
}

/**
 * A harness in memory with short long polls (Harness.inMemory): {@link workerFor} connects its
 * workers through `Harness.connect`, so neither side opens a socket. The workers have no heartbeat
 * thread (nothing listens for pings); a test of pings or the watchdog uses {@link testHarness}.
 */
export function memoryHarness(takeTimeoutMs = 300): Harness {
  return inMemoryHarness({ takeTimeoutMs });
}

/**
 * Starts a worker for `definition` against endpoint "local" of `h`, logging JSON lines into `sink`;
 * over memory when `h` is a {@link memoryHarness}, over loopback otherwise.
 */
export function workerFor(
  h: Harness,
  definition: HandlerDefinition,
  options: Partial<WorkerOptions> & { podId?: string; pingIntervalMs?: number; sink?: LogSink } = {},
): Promise<Worker> {
  const { podId, pingIntervalMs, sink, ...rest } = options;
  const env = {
    ...h.workerEnv("local", {
      ...(podId === undefined ? {} : { podId }),
      ...(pingIntervalMs === undefined ? {} : { pingIntervalMs }),
    }),
    RUNPOD_ENDPOINT_ID: "local",
  };
  return startWorker(definition, {
    env,
    logDestination: (sink ?? logSink()).stream,
    shutdownGraceMs: 2_000,
    flushTimeoutMs: 2_000,
    retryBaseMs: 20,
    retryCapMs: 200,
    ...(isInMemory(h) ? { connect: () => h.connect() } : {}),
    ...rest,
  });
}

/** A promise with its resolver, for a handler the test lets go. */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
