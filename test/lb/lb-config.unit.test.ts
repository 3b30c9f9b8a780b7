import { describe, expect, it } from "vitest";
import { chooseServeMode, readLbSettings } from "../../src/worker/lb/lb-config.js";

/** Which mode a process serves in, and which setting wins (docs/load-balancing.md, "Choosing the mode"). */
describe("chooseServeMode", () => {
  const queue = { RUNPOD_WEBHOOK_GET_JOB: "http://platform/v2/e/job-take/$RUNPOD_POD_ID" };

  it("reads the platform's environment when nothing is explicit", () => {
    expect(chooseServeMode(queue)).toBe("queue");
    expect(chooseServeMode({ PORT: "8080" })).toBe("lb");
    expect(chooseServeMode({ ...queue, PORT: "8080" })).toBe("queue");
    expect(chooseServeMode({})).toBeUndefined();
    expect(chooseServeMode({ MODE_TO_RUN: "serverless", PORT: "8080" })).toBe("lb");
  });

  it("lets --mode win over RUNLET_MODE, RUNLET_MODE over MODE_TO_RUN, and both over the environment", () => {
    expect(chooseServeMode({ ...queue, RUNLET_MODE: "lb" })).toBe("lb");
    expect(chooseServeMode({ PORT: "1", RUNLET_MODE: "queue" })).toBe("queue");
    expect(chooseServeMode({ RUNLET_MODE: "lb", MODE_TO_RUN: "pod" })).toBe("lb");
    expect(chooseServeMode({ MODE_TO_RUN: "pod", ...queue })).toBe("pod");
    expect(chooseServeMode({ RUNLET_MODE: "lb" }, "pod")).toBe("pod");
  });

  it("refuses an unknown mode, naming the allowed ones and where it came from", () => {
    expect(() => chooseServeMode({ RUNLET_MODE: "sideways" })).toThrow(
      'RUNLET_MODE must be one of queue, lb, pod, got "sideways"',
    );
    expect(() => chooseServeMode({}, "x")).toThrow(/--mode must be one of/);
  });
});

describe("readLbSettings", () => {
  it("defaults to the platform's port 80, health on the same port at /ping, every interface", () => {
    expect(readLbSettings({})).toEqual({ port: 80, healthPort: 80, healthPath: "/ping", host: "0.0.0.0" });
    expect(readLbSettings({ PORT: "8080", PORT_HEALTH: "8081", HEALTH_CHECK_PATH: "/health" })).toMatchObject(
      {
        port: 8080,
        healthPort: 8081,
        healthPath: "/health",
      },
    );
  });

  it("names a bad port or path", () => {
    expect(() => readLbSettings({ PORT: "eighty" })).toThrow(
      /PORT must be a port number from 0 to 65535, got "eighty"/,
    );
    expect(() => readLbSettings({ PORT_HEALTH: "70000" })).toThrow(/PORT_HEALTH/);
    expect(() => readLbSettings({ HEALTH_CHECK_PATH: "ping" })).toThrow(/HEALTH_CHECK_PATH must be a path/);
  });
});

describe("defineHandler's paths", () => {
  it("takes distinct paths and refuses reserved, malformed and repeated ones by index", async () => {
    const { defineHandler } = await import("../../src/handler/index.js");
    const handler = () => "ok";
    expect(defineHandler({ handler, paths: ["/generate", "/embed"] }).paths).toEqual(["/generate", "/embed"]);
    expect(defineHandler({ handler }).paths).toEqual([]);
    expect(() => defineHandler({ handler, paths: ["/runsync"] })).toThrow(
      /paths\[0\]: \/runsync is served by runlet/,
    );
    expect(() => defineHandler({ handler, paths: ["/a", "b"] })).toThrow(
      /paths\[1\] must be a path starting with \//,
    );
    expect(() => defineHandler({ handler, paths: ["/a", "/a"] })).toThrow(/paths\[1\]: \/a is listed twice/);
  });
});
