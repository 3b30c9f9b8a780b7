import { describe, expect, it } from "vitest";
import { createManagementClient, waitForRollout } from "../../src/management/index.js";
import { startRecorder } from "../support/management-servers.js";

const API_KEY = "rollout-key-1";

function releases(inProgress: boolean, workersOnLatest: number, workersTotal: number) {
  return {
    status: 200,
    body: {
      endpointVersion: 2,
      rollout: { inProgress, workersOnLatest, workersTotal, percentOnLatest: 0 },
      releases: [{ id: "r2", version: 2, workerCount: workersOnLatest }],
    },
  };
}

describe("waitForRollout", () => {
  it("polls GET /v2/serverless/{id}/releases until the rollout is done, telling each answer", async () => {
    await using server = await startRecorder((_r, i) => releases(i < 2, i, 2));
    const client = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    const seen: number[] = [];
    const done = await waitForRollout(client, "e1", {
      intervalMs: 10,
      onProgress: (r) => seen.push(r.rollout.workersOnLatest),
    });
    expect(done.rollout).toMatchObject({ inProgress: false, workersOnLatest: 2, workersTotal: 2 });
    expect(seen).toEqual([0, 1, 2]);
    expect(server.requests.map((r) => `${r.method} ${r.path}`)).toEqual(
      Array(3).fill("GET /v2/serverless/e1/releases"),
    );
  });

  it("fails with RUNLET_MANAGEMENT_ROLLOUT_TIMEOUT naming how far the rollout got", async () => {
    await using server = await startRecorder(() => releases(true, 1, 3));
    const client = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    await expect(waitForRollout(client, "e1", { timeoutMs: 100, intervalMs: 20 })).rejects.toMatchObject({
      code: "RUNLET_MANAGEMENT_ROLLOUT_TIMEOUT",
      message: "the rollout of endpoint e1 was not done after 100 ms: 1 of 3 workers run the newest release",
      details: { endpointId: "e1", workersOnLatest: 1, workersTotal: 3 },
    });
  });

  it("stops at once when its signal aborts", async () => {
    await using server = await startRecorder(() => releases(true, 0, 1));
    const client = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    const controller = new AbortController();
    const waiting = waitForRollout(client, "e1", { intervalMs: 60_000, signal: controller.signal });
    setTimeout(() => controller.abort(new Error("user stop")), 50);
    await expect(waiting).rejects.toThrow("user stop");
  });
});
