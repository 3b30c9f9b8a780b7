/**
 * The ceiling of a figure, measured in the same bench run: what a bare `node:http` server and a
 * bare undici loop on the same loopback manage with the same routes and bodies. A figure divided by
 * its ceiling says how close runlet comes to what this machine allows at that moment, which an
 * absolute figure on a shared machine cannot.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { ROOT } from "./worker-process.js";

/** A bare HTTP server: every request is read to its end and answered 200 with a fixed body. */
export interface CeilingServer {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the bare server on 127.0.0.1, port 0. The body is what the harness answers a post with. */
export async function startCeilingServer(body = '{"ok":true}'): Promise<CeilingServer> {
  const answer = Buffer.from(body);
  const server: Server = createServer((req, res) => {
    req.resume();
    req.once("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": answer.length });
      res.end(answer);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What one ceiling loop posts. */
export interface CeilingLoad {
  /** Full URL of each post. */
  readonly url: string;
  /** JSON body of each post. */
  readonly body: string;
  /** Posts in all. */
  readonly count: number;
  /** Posts in flight at once: 1 is a sequential loop. */
  readonly inFlight: number;
}

/**
 * Runs the bare undici loop in its own process (as the worker is its own process, so the two cores
 * are shared the same way) and returns posts per second.
 */
export function measureCeiling(load: CeilingLoad): Promise<number> {
  return new Promise((resolve, reject) => {
    // The load goes through stdin: a large item's 1 MiB body is too long for an argument.
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin", "run-ts.mjs"), join(ROOT, "bench", "ceiling-client.ts")],
      { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      out += text;
    });
    child.stderr.setEncoding("utf8").on("data", (text: string) => {
      err = (err + text).slice(-8_192);
    });
    child.once("error", reject);
    child.once("exit", (code) => {
      if (code !== 0) {
        reject(new Error(`ceiling client exited ${code}:\n${err}`));
        return;
      }
      resolve((JSON.parse(out) as { perSecond: number }).perSecond);
    });
    child.stdin.end(JSON.stringify(load));
  });
}

/**
 * Runs `run` between two measurements of its ceiling and returns its result with their mean: on
 * a shared machine the load drifts within seconds, and a ceiling taken on both sides of the run
 * follows the drift better than one taken after it.
 */
export async function bracketed<T>(
  load: CeilingLoad,
  run: () => Promise<T>,
): Promise<{ result: T; ceiling: number }> {
  const before = await measureCeiling(load);
  const result = await run();
  const after = await measureCeiling(load);
  return { result, ceiling: (before + after) / 2 };
}

/** Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on every Linux Node runs on). */
const USER_HZ = 100;

/** CPU time (user + system) a process has used so far, ms; undefined where `/proc` does not say. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start at the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
  } catch {
    // Not Linux, or the process is gone: the figure is simply unavailable.
    return undefined;
  }
}

/** This process's CPU time (user + system) so far, ms. */
export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
