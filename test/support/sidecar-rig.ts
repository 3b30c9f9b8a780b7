import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { SidecarOptions } from "../../src/sidecar/options.js";

/** The fixture model server (a real process; see the file for its settings). */
export const FIXTURE_SERVER = fileURLToPath(new URL("../fixtures/sidecar-server.mjs", import.meta.url));

/**
 * Ports below Linux's default ephemeral range (32768–60999): the kernel never hands one of these
 * to a `listen(0)` or to an outgoing connection, so between the check below and the fixture's own
 * listen only another test's explicit pick could take it (a port from `listen(0)` could be taken by
 * any of the suite's hundreds of loopback connections, and once was).
 */
const PICK_FROM = 20_000;
const PICK_TO = 32_767;

/** A port that was free a moment ago (the fixture server listens on a fixed port, as real ones do). */
export async function freePort(): Promise<number> {
  for (let tries = 0; ; tries++) {
    const port = PICK_FROM + Math.floor(Math.random() * (PICK_TO - PICK_FROM + 1));
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (bound) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      return port;
    }
    if (tries >= 50) throw new Error(`freePort: no free port in ${PICK_FROM}–${PICK_TO} after 50 tries`);
  }
}

/** A temporary folder for one test's events file, removed by `[Symbol.dispose]`. */
export function scratch(): { dir: string; events: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), "runlet-sidecar-"));
  return {
    dir,
    events: join(dir, "events.jsonl"),
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The fixture's recorded events. */
export function eventsOf(file: string): Array<Record<string, unknown> & { event: string }> {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown> & { event: string });
}

/** Sidecar options running the fixture with `env`. */
export function fixtureSidecar(
  port: number,
  env: Record<string, string>,
  more: Partial<SidecarOptions> = {},
): SidecarOptions {
  return {
    name: "llm",
    command: [process.execPath, FIXTURE_SERVER],
    env: { PORT: String(port), ...env },
    ready: { url: `http://127.0.0.1:${port}/health` },
    readyIntervalMs: 20,
    stopGraceMs: 2_000,
    ...more,
  };
}

/** True while a process with this id exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
