import * as childProcess from "node:child_process";
import { spawn } from "node:child_process";
import { createServer as createHttpServer } from "node:http";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { inMemoryHarness, send } from "../support/inject.js";

// The unit lane's guard (test/support/unit-guard.ts, the lane's setup file; not imported here, so
// these pass only where the setup installed it): a test here that opens a socket or starts a
// process fails with a line saying where it belongs. Without the guard each of these calls would
// bind, connect or start a process, and the expectations below fail (run once so, by hand).

const UNIT_LANE_REFUSAL =
  "the unit lane opens no sockets and starts no processes: move this test to the integration or process lane";

describe("the unit lane's guard", () => {
  it("fails a test that listens on a socket", () => {
    expect(() => net.createServer().listen(0, "127.0.0.1")).toThrow(UNIT_LANE_REFUSAL);
    expect(() => createHttpServer().listen(0, "127.0.0.1")).toThrow(
      /net\.Server\.prototype\.listen: the unit lane/,
    );
  });

  it("fails a test that connects a socket, fetch included", async () => {
    expect(() => net.connect({ host: "127.0.0.1", port: 9 })).toThrow(UNIT_LANE_REFUSAL);
    expect(() => net.createConnection({ host: "127.0.0.1", port: 9 })).toThrow(UNIT_LANE_REFUSAL);
    expect(() => new net.Socket().connect({ host: "127.0.0.1", port: 9 })).toThrow(UNIT_LANE_REFUSAL);
    const failed = await fetch("http://127.0.0.1:1027/").catch((err: unknown) => err);
    expect(String((failed as Error).cause)).toContain(UNIT_LANE_REFUSAL);
  });

  it("fails a test that starts a process, in every form", () => {
    expect(() => spawn(process.execPath, ["-e", ""])).toThrow(/child_process\.spawn: the unit lane/);
    expect(() => childProcess.execFileSync(process.execPath, ["-e", ""])).toThrow(UNIT_LANE_REFUSAL);
    expect(() => childProcess.exec("true")).toThrow(UNIT_LANE_REFUSAL);
    expect(() => childProcess.fork("nothing.js")).toThrow(UNIT_LANE_REFUSAL);
    expect(() => childProcess.spawnSync("true")).toThrow(UNIT_LANE_REFUSAL);
    expect(() => childProcess.execSync("true")).toThrow(UNIT_LANE_REFUSAL);
    expect(() => childProcess.execFile("true")).toThrow(UNIT_LANE_REFUSAL);
  });

  it("leaves the harness's routes in memory working", async () => {
    const h = inMemoryHarness();
    try {
      const answer = await send(h, "/v2/nothing-here/health");
      expect(answer.status).toBeGreaterThanOrEqual(200);
    } finally {
      await h.close();
    }
  });
});
