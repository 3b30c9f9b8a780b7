import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { cp, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RunletError } from "../errors.js";
import { FITNESS_ENV } from "../protocol/index.js";
import { settle } from "../task-sink.js";
import { BUNDLE_FILE } from "./bundle.js";
import { WORKER_NODE_FLAGS } from "./dockerfile.js";
import { EXTERNALS_KEY, packageOfSpecifier } from "./externals.js";
import { HUB_TESTS_FILE, type HubTest, readHubTests } from "./hub-tests.js";
import { readJobs } from "./test-jobs.js";
import { inheritedEnv } from "./worker-pool.js";

/**
 * The verify step of `runlet build` (docs/images.md, "The verify step"): the built dist/, copied
 * alone into an empty folder (as the image's final stage holds it: no node_modules above it, no
 * project files), is started as the image starts it, against an in-process harness: it must load
 * the handler, run setup, complete test_input.json's job(s), and stop cleanly on SIGTERM (teardown
 * included). What a bundle misses at run time (a package whose files the handler reads, found
 * through a path the build could not see) fails the build here, naming the package and the line
 * to add, instead of failing the first worker in production.
 */

/** What {@link verifyBundle} saw. */
export interface VerifyReport {
  /** Start to `worker ready`, ms (the worker's own phases summed: runlet, fitness, setup, ...). */
  readonly readyMs: number;
  /** Each job's status and its execution time (ms), in test_input.json's order; empty without one. */
  readonly jobs: readonly { readonly status: string; readonly ms: number | undefined }[];
  /** Whether test_input.json was there (without it only load, setup and teardown are checked). */
  readonly hadInput: boolean;
  /** `.runpod/tests.json`'s cases, run after test_input.json's job(s): each name, status and time (ms). */
  readonly hubTests: readonly {
    readonly name: string;
    readonly status: string;
    readonly ms: number | undefined;
  }[];
}

/**
 * How far the verify step goes, from package.json's `"runlet": {"verify": ...}`: `"job"` (the
 * default) runs test_input.json's job; `"setup"` stops after load and setup (a job that needs
 * what a build has not: an S3 store, a GPU); `"off"` skips the step, as `--no-verify` does.
 */
export type VerifyMode = "job" | "setup" | "off";

/** The package.json key of {@link VerifyMode}. */
export const VERIFY_KEY = "runlet.verify";

/** The project's {@link VerifyMode}: `"job"` without a package.json or the field; a bad value is an error naming it. */
export async function declaredVerifyMode(projectDir: string): Promise<VerifyMode> {
  let pkg: { runlet?: { verify?: unknown } };
  try {
    pkg = JSON.parse(await readFile(join(projectDir, "package.json"), "utf8")) as typeof pkg;
  } catch {
    return "job"; // No package.json, or not JSON (declaredExternals says so first).
  }
  const value = pkg.runlet?.verify;
  if (value === undefined) return "job";
  if (value === "job" || value === "setup" || value === "off") return value;
  throw new RunletError(
    "RUNLET_BUILD_FAILED",
    `package.json's "runlet": {"verify": ...} must be "job", "setup" or "off", got ${JSON.stringify(value).slice(0, 100)}`,
  );
}

/** Options of {@link verifyBundle}. */
export interface VerifyOptions {
  /** The project folder: test_input.json and package.json are read there. */
  readonly projectDir: string;
  /** The built folder (dist/). */
  readonly distDir: string;
  /** Packages the project declares external (to print the line to add). */
  readonly declared: readonly string[];
  /** Longest the whole step may take. */
  readonly timeoutMs: number;
  /** `"setup"`: no job, only load, setup and the stop. @default "job" */
  readonly mode?: "job" | "setup";
  /** How long the worker has to stop after SIGTERM, in ms (tests shorten it). @default 30_000 */
  readonly stopGraceMs?: number;
}

/** How long the worker has to stop after SIGTERM by default, in ms. */
export const STOP_GRACE_MS = 30_000;

const ENDPOINT_ID = "verify";
/** Lines of the worker's log kept for an error message, and the longest kept of each. */
const KEPT_LINES = 40;
const KEPT_LINE_CHARS = 2_000;
/** Longest unterminated line held while it is being written. */
const MAX_PENDING_CHARS = 1_048_576;

/** How long the worker's output pipes may stay open after it exited before the step looks for who holds them, ms. */
const PIPES_CLOSE_MS = 1_000;
/** How long the step waits for a SIGKILLed worker to be gone, ms. */
const KILL_WAIT_MS = 5_000;

/** A process left running in the worker's process group. */
interface LeftProcess {
  readonly pid: number;
  readonly command: string;
}

/**
 * The processes in process group `pgid` (Linux: from /proc; elsewhere an empty list). Each with
 * its command line, shortened.
 */
export function processGroupMembers(pgid: number): LeftProcess[] {
  const out: LeftProcess[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== pgid) continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
      const command = cmdline === "" ? stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) : cmdline;
      out.push({ pid: Number(entry), command: command.length > 200 ? `${command.slice(0, 200)}…` : command });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return out;
}

/** Sends `signal` to the process group `pgid`; false when there is none left. */
function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolves with true when `promise` settles within `ms` (a rejection, owned here, counts as
 * settled), false otherwise. Never rejects; its timer is cleared either way.
 */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise.then(settled, settled), bound]);
  } finally {
    clearTimeout(timer);
  }
}

const settled = (): true => true;

/**
 * The package a worker's log says it could not find (`Cannot find module 'x/package.json'`,
 * `Cannot find package 'x' imported from ...`), if any.
 */
export function missingPackageIn(text: string): string | undefined {
  for (const m of text.matchAll(/Cannot find (?:module|package) ['"]([^'"]+)['"]/g)) {
    const name = packageOfSpecifier(m[1] ?? "");
    if (name !== undefined) return name;
  }
  return undefined;
}

/** The message of one JSON log line (pino's `msg`, runlet's `message`) with its error's, if any. */
function describeLine(line: string): string {
  try {
    const record = JSON.parse(line) as {
      msg?: unknown;
      message?: unknown;
      reason?: unknown;
      err?: { message?: unknown };
    };
    // The unfit line's reason holds the error (a setup that threw); its message says the same, longer.
    const msg = String(record.reason ?? record.msg ?? record.message ?? "");
    const err = typeof record.err?.message === "string" ? `: ${record.err.message}` : "";
    return `${msg}${err}`;
  } catch {
    return line;
  }
}

/**
 * Runs the verify step; resolves with what it saw, or rejects with RUNLET_BUILD_FAILED saying
 * what failed, with the worker's last log lines.
 */
export async function verifyBundle(options: VerifyOptions): Promise<VerifyReport> {
  const { projectDir, distDir, declared, timeoutMs } = options;
  const hadInput = options.mode !== "setup" && existsSync(join(projectDir, "test_input.json"));
  const read = hadInput ? await readJobs(undefined, projectDir) : [];
  const jobs = Array.isArray(read) ? read : [read];
  // The template hub's cases run too, so a stale one fails the build instead of the hub's run.
  const hubTests: HubTest[] = options.mode === "setup" ? [] : ((await readHubTests(projectDir)) ?? []);
  const { startHarness } = await import("../harness/index.js");
  const lonely = await mkdtemp(join(tmpdir(), "runlet-verify-"));
  try {
    // Links as they are (fs.cp would point a relative one back into distDir): the image's COPY
    // keeps them relative, so one that leads out of dist/ must dangle here as it does there.
    await cp(distDir, lonely, { recursive: true, verbatimSymlinks: true });
    await using harness = await startHarness({ takeTimeoutMs: 1_000, endpoints: [{ id: ENDPOINT_ID }] });
    const ids = jobs.map((job) => harness.enqueue(ENDPOINT_ID, job as Parameters<typeof harness.enqueue>[1]));
    const hubIds = hubTests.map((test) => harness.enqueue(ENDPOINT_ID, { input: test.input }));
    const env: NodeJS.ProcessEnv = {
      ...inheritedEnv(),
      ...harness.workerEnv(ENDPOINT_ID),
      // One short run, as `runlet test`'s: no built-in fitness checks (the build machine is not the
      // worker's), and nothing from the build's own module paths.
      [FITNESS_ENV.skipAutoSystemChecks]: "true",
      [FITNESS_ENV.skipGpuCheck]: "true",
      NODE_PATH: "",
      NODE_ENV: "production",
    };
    const started = performance.now();
    // Its own process group (POSIX), so the step can end whatever the worker started: a process
    // from setup that inherited its output pipes kept them open after the worker exited, and the
    // step waited on them for ever (issue 51, item 6).
    const group = process.platform !== "win32";
    const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, join(lonely, BUNDLE_FILE)], {
      cwd: lonely,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: group,
    });
    const lines: string[] = [];
    let readyMs: number | undefined;
    let failure: string | undefined;
    // Each stream's unterminated last line.
    const pending = ["", ""];
    const onLine = (whole: string) => {
      const line = whole.length > KEPT_LINE_CHARS ? `${whole.slice(0, KEPT_LINE_CHARS)}…` : whole;
      lines.push(line);
      if (lines.length > KEPT_LINES) lines.shift();
      if (line.includes('"worker ready"') && readyMs === undefined) readyMs = performance.now() - started;
      // A setup (or another start-up phase) that failed, or a teardown that did.
      if (failure === undefined && /"RUNLET_WORKER_UNFIT"|"phaseState":"failed"|teardown failed/.test(line)) {
        failure = describeLine(line);
      }
    };
    for (const [at, stream] of [child.stdout, child.stderr].entries()) {
      stream.setEncoding("utf8").on("data", (chunk: string) => {
        const parts = (pending[at] + chunk).split("\n");
        let rest = parts.pop() ?? "";
        for (const part of parts) onLine(part);
        if (rest.length > MAX_PENDING_CHARS) {
          onLine(rest);
          rest = "";
        }
        pending[at] = rest;
      });
    }
    // A worker that could not be started at all (no such Node, a folder it may not run in): the
    // child says so with 'error' and no process; without a listener that would end the CLI.
    let spawnError: Error | undefined;
    // The worker's own end ('exit'), and its pipes' ('close'): a process it started may hold them.
    const exited = new Promise<number | null>((resolve) => {
      child.once("exit", (code) => resolve(code));
      child.on("error", (err) => {
        spawnError ??= err;
        if (child.pid === undefined) resolve(null);
      });
    });
    const closed = new Promise<void>((resolve) => {
      child.once("close", () => resolve());
      child.once("error", () => {
        if (child.pid === undefined) resolve();
      });
    });
    /**
     * Once the worker has exited: waits a moment for its pipes to close; if something still holds
     * them, or still runs in its process group, that is named, the group is ended and the pipes
     * let go, so the step never waits on them. Returns what was left running.
     */
    let swept: Promise<LeftProcess[]> | undefined;
    const sweep = (): Promise<LeftProcess[]> => {
      // Once: after that the group's id may in time name another process's group.
      swept ??= sweepOnce();
      return swept;
    };
    const sweepOnce = async (): Promise<LeftProcess[]> => {
      const pid = child.pid;
      if (pid === undefined) return [];
      const pipesClosed = await within(closed, PIPES_CLOSE_MS);
      const left = group ? processGroupMembers(pid) : [];
      if (group && (left.length > 0 || !pipesClosed)) signalGroup(pid, "SIGKILL");
      if (!pipesClosed) {
        child.stdout.destroy();
        child.stderr.destroy();
      }
      return pipesClosed && left.length === 0
        ? []
        : left.length === 0
          ? [{ pid: -1, command: "a process outside the worker's process group" }]
          : left;
    };
    const describeLeft = (left: readonly LeftProcess[]): string =>
      left.map((p) => (p.pid < 0 ? p.command : `pid ${p.pid} (${p.command})`)).join(", ");
    let exitCode: number | null | undefined;
    // Read as exited once its output is read too (its last lines name what failed), or a moment later.
    settle(
      exited.then(async (code) => {
        await within(closed, PIPES_CLOSE_MS);
        exitCode = code;
      }),
      (err) => {
        // Neither wait rejects; were one to, the step fails saying so rather than the CLI.
        failure ??= `reading the worker's exit failed: ${err instanceof Error ? err.message : String(err)}`;
      },
    );
    const deadline = Date.now() + timeoutMs;
    const log = () => {
      for (const rest of pending) if (rest !== "") onLine(rest);
      pending.fill("");
      return lines.length === 0 ? "" : `\nThe worker's last log lines:\n${lines.join("\n")}`;
    };
    const fail = (what: string): RunletError => {
      const text = `${what}${lines.join("\n")}`;
      const found = missingPackageIn(text);
      // A package that is there but lacks the file: the project's own mistake, no line to add.
      const missing =
        found === undefined || existsSync(join(distDir, "node_modules", found, "package.json"))
          ? undefined
          : found;
      const fix =
        missing === undefined
          ? ""
          : `\n${missing} is needed at run time but is not in dist/node_modules: add it to package.json as ` +
            `"runlet": {"externals": ${JSON.stringify([...declared.filter((d) => d !== missing), missing])}} ` +
            `(${EXTERNALS_KEY}; docs/images.md, "What cannot be bundled") and build again`;
      return new RunletError(
        "RUNLET_BUILD_FAILED",
        `the verify step (dist/ alone in an empty folder) failed: ${what}${fix}${log()}`,
      );
    };
    try {
      for (;;) {
        if (spawnError !== undefined && child.pid === undefined) {
          throw fail(`the worker could not be started (${process.execPath}): ${spawnError.message}`);
        }
        if (failure !== undefined) throw fail(failure);
        if (exitCode !== undefined) throw fail(`the worker exited with code ${exitCode} before it was done`);
        const snaps = [...ids, ...hubIds].map((id) => harness.job(id));
        const done = snaps.every(
          (s) => s !== undefined && s.status !== "IN_QUEUE" && s.status !== "IN_PROGRESS",
        );
        if (readyMs !== undefined && done) break;
        if (Date.now() > deadline) {
          throw fail(
            `not done within ${Math.round(timeoutMs / 1000)} s (${readyMs === undefined ? "the worker never became ready" : "a job did not end"}; --verify-timeout sets the limit)`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      const report = ids.map((id) => harness.job(id)!);
      const bad = report.find((s) => s.status !== "COMPLETED");
      if (bad !== undefined) {
        const error = typeof bad.error === "string" ? bad.error : JSON.stringify(bad.error ?? null);
        throw fail(`test_input.json's job ended ${bad.status}: ${error.slice(0, 2_000)}`);
      }
      const hubReport = hubIds.map((id) => harness.job(id)!);
      const staleAt = hubReport.findIndex((snap) => snap.status !== "COMPLETED");
      if (staleAt >= 0) {
        const snap = hubReport[staleAt]!;
        const error = typeof snap.error === "string" ? snap.error : JSON.stringify(snap.error ?? null);
        throw fail(
          `${HUB_TESTS_FILE}'s test "${hubTests[staleAt]!.name}" ended ${snap.status}: ${error.slice(0, 2_000)}; ` +
            "the template hub runs this file's cases against the endpoint: update the case to the handler's input " +
            `(test_input.json's job ${report.length === 0 ? "is not there" : "passed"})`,
        );
      }
      child.kill("SIGTERM");
      // The stop has its own bound, whatever is left of the step's: the one the message names.
      const graceMs = options.stopGraceMs ?? STOP_GRACE_MS;
      const code = await Promise.race([
        exited,
        new Promise<"late">((r) => setTimeout(() => r("late"), graceMs).unref()),
      ]);
      if (code === "late") throw fail(`the worker did not stop within ${graceMs / 1000} s of SIGTERM`);
      const left = await sweep();
      if (left.length > 0) {
        throw fail(
          `the worker exited, but what it started was left running, holding its output: ${describeLeft(left)}; the verify step ended its process group (a process that setup starts must end with teardown)`,
        );
      }
      if (failure !== undefined) throw fail(failure);
      if (code !== 0) throw fail(`the worker stopped with exit code ${code} (0 expected after SIGTERM)`);
      return {
        readyMs: readyMs ?? 0,
        jobs: report.map((s) => ({ status: s.status, ms: s.executionTime })),
        hadInput,
        hubTests: hubReport.map((snap, i) => ({
          name: hubTests[i]!.name,
          status: snap.status,
          ms: snap.executionTime,
        })),
      };
    } finally {
      // Bounded, whatever the worker left: the worker and its group are killed, the pipes let go.
      if (child.exitCode === null && child.signalCode === null) {
        if (!(group && child.pid !== undefined && signalGroup(child.pid, "SIGKILL"))) child.kill("SIGKILL");
      }
      await within(exited, KILL_WAIT_MS);
      await sweep();
    }
  } finally {
    await rm(lonely, { recursive: true, force: true });
  }
}
