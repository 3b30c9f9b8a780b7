import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { SidecarOptions } from "../../src/sidecar/options.js";

/** The fixture model server (a real process; see the file for its settings). */
export const FIXTURE_SERVER = fileURLToPath(new URL("../fixtures/sidecar-server.mjs", import.meta.url));

/** A port that was free a moment ago (the fixture server listens on a fixed port, as real ones do). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
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
