import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  createManagementRoutes,
  type ManagementRoutes,
  type ManagementRoutesOptions,
  mountManagementRoutes,
} from "../../src/harness/management-api/index.js";

/** One request a recording server saw. */
export interface Recorded {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string[]>;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** What a recording server answers. */
export interface Reply {
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly body?: unknown;
}

export interface Running {
  readonly url: string;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

async function listen(server: Server): Promise<Running> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
    return closing;
  };
  return { url: `http://127.0.0.1:${port}`, close, [Symbol.asyncDispose]: close };
}

/**
 * A node:http server that records every request and answers with `respond` (default: 200 `{}`).
 * `body` objects are sent as JSON; strings as they are.
 */
export async function startRecorder(
  respond: (request: Recorded, index: number) => Reply = () => ({ status: 200, body: {} }),
): Promise<Running & { readonly requests: Recorded[] }> {
  const requests: Recorded[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x");
      const query: Record<string, string[]> = {};
      for (const [k, v] of url.searchParams) {
        query[k] = [...(query[k] ?? []), v];
      }
      const recorded: Recorded = {
        method: req.method ?? "",
        path: url.pathname,
        query,
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      const reply = respond(recorded, requests.length - 1);
      const text =
        reply.body === undefined
          ? ""
          : typeof reply.body === "string"
            ? reply.body
            : JSON.stringify(reply.body);
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      res.end(text);
    });
  });
  return { ...(await listen(server)), requests };
}

/** A node:http server serving only the harness's management routes (everything else 404). */
export async function startManagementServer(
  options: ManagementRoutesOptions,
): Promise<Running & { readonly routes: ManagementRoutes }> {
  const routes = createManagementRoutes(options);
  const mounted = mountManagementRoutes(routes);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    mounted(req, res, url).then(
      (answered) => {
        if (!answered) {
          res.writeHead(404, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: "not a management path" }));
        }
      },
      (err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      },
    );
  });
  return { ...(await listen(server)), routes };
}

/** What a rejected management call threw, for assertions on its code, message and details. */
export interface CaughtError {
  code: string;
  message: string;
  details: Record<string, unknown>;
}

/** Awaits `promise`, which must reject, and returns what it threw; fails the test if it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<CaughtError> {
  try {
    await promise;
  } catch (err) {
    return err as CaughtError;
  }
  throw new Error("expected the call to fail");
}
