import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { LOG_BACKLOG_BYTES } from "../../src/sidecar/sidecar-process.js";

// Issue 42, item 3: a chatty sidecar while the worker's stdout is not read. Real processes: the
// worker side (test/fixtures/chatty-sidecar-worker.ts, a SidecarProcess logging to its real
// stdout), its sidecar (coreutils' yes | head through the guard), and a stdout pipe this test
// does not read until the sidecar has ended, so the worker's writes really wait.

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const FLOOD_LINES = 40_000; // 40 MB of output: ten times the bound
const LINE = "0".repeat(1_000);

interface Report {
  readonly backlog: number;
  readonly rssGrowth: number;
  readonly exit: { code: number | null; signal: string | null; lastLines: string[] };
}

describe("a chatty sidecar beside a stalled log (issue 42, item 3)", () => {
  it("holds at most LOG_BACKLOG_BYTES of unwritten log, dropping and counting the lines past it", async () => {
    const child = spawn(process.execPath, ["bin/run-ts.mjs", "test/fixtures/chatty-sidecar-worker.ts"], {
      cwd: ROOT,
      env: { ...process.env, FLOOD_LINES: String(FLOOD_LINES) },
      stdio: ["ignore", "pipe", "inherit", "ipc"],
    });
    try {
      // Nothing reads child.stdout yet: past the pipe's few kilobytes, its writes wait in the worker.
      const [report] = (await once(child, "message")) as [Report];
      expect(report.exit).toEqual({
        code: 0,
        signal: null,
        lastLines: [...Array(19).fill(`${LINE.slice(0, 500)}…`), "flood done"],
      });
      // One line's JSON (and pino's own write) over the bound at most; on main it held all 40 MB.
      expect(report.backlog, `rss grew ${report.rssGrowth} bytes`).toBeLessThan(LOG_BACKLOG_BYTES + 16_384);
      // Now read it all: every line was either logged or counted in the one report of dropped lines.
      let text = "";
      child.stdout!.setEncoding("utf8");
      child.stdout!.on("data", (d: string) => {
        text += d;
      });
      await once(child, "exit");
      const logged = text
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const output = logged.filter((l) => l["sidecar"] === "chatty" && l["stream"] === "stdout");
      const reports = logged.filter((l) => l["droppedLines"] !== undefined);
      expect(reports).toHaveLength(1);
      const dropped = reports[0]!["droppedLines"] as number;
      expect(dropped).toBeGreaterThan(0);
      expect(reports[0]).toMatchObject({
        level: "WARN",
        sidecar: "chatty",
        message: `sidecar "chatty": ${dropped} lines of its output were not logged: the worker's log output was not draining (over ${LOG_BACKLOG_BYTES} bytes or 4096 lines waiting)`,
      });
      expect(output.length + dropped).toBe(FLOOD_LINES + 1);
      expect(output.slice(0, -1).every((l) => l["message"] === LINE)).toBe(true);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  }, 60_000);
});
