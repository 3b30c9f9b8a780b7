import { request } from "node:http";
import { Writable } from "node:stream";
import type { HandlerDefinition } from "../../src/handler/define-handler.js";
import { startWorker, type Worker } from "../../src/worker/worker.js";
import { waitFor } from "./wait-for.js";

/** A load-balancing worker in this process, on a loopback port of its own. */
export interface LbWorker {
  readonly worker: Worker;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Its log records (JSON lines, parsed). */
  readonly lines: Record<string, unknown>[];
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts `definition` as a load-balancing worker (`mode: "lb"`, PORT=0 on 127.0.0.1); resolves once its port is bound. */
export async function startLbWorker(
  definition: HandlerDefinition,
  options: { env?: Record<string, string>; shutdownGraceMs?: number; handlerModule?: string } = {},
): Promise<LbWorker> {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      callback();
    },
  });
  const worker = await startWorker(definition, {
    mode: "lb",
    env: { PORT: "0", RUNLET_LB_HOST: "127.0.0.1", RUNPOD_ENDPOINT_ID: "lb-test", ...options.env },
    logDestination: destination,
    ...(options.shutdownGraceMs === undefined ? {} : { shutdownGraceMs: options.shutdownGraceMs }),
    ...(options.handlerModule === undefined ? {} : { handlerModule: options.handlerModule }),
  });
  const port = await waitFor("the load-balancing port", () => {
    const line = lines.find(
      (l) => typeof l["port"] === "number" && String(l["message"]).includes("listening"),
    );
    return line === undefined ? undefined : (line["port"] as number);
  });
  return {
    worker,
    url: `http://127.0.0.1:${port}`,
    lines,
    [Symbol.asyncDispose]: () => worker.close(),
  };
}

/** An answer: status, headers and body text. */
export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** One request over node:http (a fresh connection), its answer read whole. */
export function call(
  url: string,
  options: { method?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? "GET", headers: options.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** POST `body` as JSON. */
export function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call(url, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json", ...headers },
  });
}

/** A promise and its resolve, for handlers that wait on the test. */
export function gate(): { readonly promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
