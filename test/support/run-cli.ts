import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The repository root and the CLI's entry, as a user's `npx runlet` would run it. */
export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const CLI = fileURLToPath(new URL("../../bin/runlet.mjs", import.meta.url));

/** What a finished CLI run printed and how it exited. */
export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Options of {@link runCli}. */
export interface RunCliOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Killed (SIGKILL) after this long; the test then fails on the missing exit code. @default 60000 */
  readonly timeoutMs?: number;
  /** Node binary. @default the one running the tests */
  readonly node?: string;
}

/** Runs `node bin/runlet.mjs ...args` to completion and returns what it printed. */
export function runCli(args: readonly string[], options: RunCliOptions = {}): Promise<CliResult> {
  return runNode([CLI, ...args], options);
}

/** Runs `node ...args` to completion and returns what it printed. */
export function runNode(args: readonly string[], options: RunCliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(options.node ?? process.execPath, [...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: options.env ?? childEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The test process's environment without the platform's variables (a child must not think it runs on the platform). */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // RUNPOD_SKIP_*: the test run turns the built-in fitness checks off (vitest.config.ts).
    const platform = k.startsWith("RUNPOD_") && !k.startsWith("RUNPOD_SKIP_");
    if (!platform && !k.startsWith("BUCKET_") && !k.startsWith("VITEST")) env[k] = v;
  }
  return { ...env, NO_COLOR: "1", ...extra };
}

/** A long-running CLI process whose output is collected as it comes. */
export interface RunningCli {
  readonly child: ChildProcess;
  output(): string;
  /** Resolves with the first match of `pattern` in stdout+stderr; rejects after `timeoutMs` or on exit. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** SIGTERM, then SIGKILL after 5 s; resolves with the exit code. Idempotent. */
  stop(): Promise<number | null>;
}

/** Starts `node bin/runlet.mjs ...args` and leaves it running. */
export function startCli(args: readonly string[], options: RunCliOptions = {}): RunningCli {
  const child = spawn(options.node ?? process.execPath, [CLI, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? childEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const waiters = new Set<() => void>();
  const onData = (d: string) => {
    out += d;
    for (const w of waiters) w();
  };
  child.stdout?.setEncoding("utf8").on("data", onData);
  child.stderr?.setEncoding("utf8").on("data", onData);
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  exited.then(() => {
    for (const w of waiters) w();
  });
  let stopping: Promise<number | null> | undefined;
  return {
    child,
    output: () => out,
    waitFor(pattern, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = out.match(pattern);
          if (m !== null) {
            done();
            resolve(m);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(
              new Error(`process exited (${child.exitCode ?? child.signalCode}) before ${pattern}:\n${out}`),
            );
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${pattern}:\n${out}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        try {
          return await exited;
        } finally {
          clearTimeout(timer);
        }
      })();
      return stopping;
    },
  };
}

/**
 * Proves that a restart `runlet dev`'s worker pool could have scheduled at a worker's exit has
 * begun, without a pause: its harness holds this /runsync for 1.5 s on a timer armed now, after
 * the exit, in the same process as the pool, so a restart timer armed at the exit (the pool's
 * first back-off, 1 s) fires first, and the replacement is reported to the harness as starting
 * at once. Returns the endpoint's `/health` workers as they are then.
 */
export async function afterRestartWindow(endpoint: string, apiKey: string): Promise<Record<string, number>> {
  const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
  const held = await fetch(`${endpoint}/runsync?wait=1500`, {
    method: "POST",
    headers,
    body: '{"input": {}}',
  });
  const { status } = (await held.json()) as { status: string };
  if (status !== "IN_QUEUE") throw new Error(`the held /runsync answered ${status}, not IN_QUEUE`);
  const health = await fetch(`${endpoint}/health`, { headers });
  return ((await health.json()) as { workers: Record<string, number> }).workers;
}
