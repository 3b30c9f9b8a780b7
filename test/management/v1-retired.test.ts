import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { logSink } from "../support/workers.js";

/** Issue 17, item 4: v1 was retired on 2026-11-15 (docs/protocol.md, "Management API"); the harness and the client say so. */
const API_KEY = "mgmt-v1-key-123";
const RETIRED =
  "the v1 management API was retired on 2026-11-15; use the v2 API (a template: GET /v2/templates/{templateId})";
const WARNING =
  "the v1 management API was retired on 2026-11-15; use the v2 client: templates.get(id) instead of getTemplate(id)";

async function get(
  url: string,
  key?: string,
): Promise<{ status: number; type: string | null; body: unknown }> {
  const res = await fetch(url, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, type: res.headers.get("content-type"), body: await res.json() };
}

describe("the retired v1 management API", () => {
  it("answers every v1 path 410 with a v1 {message}, with or without a key, while v2 goes on", async () => {
    await using h = await startHarness({ apiKey: API_KEY });
    const gone = { status: 410, type: "application/json", body: { message: RETIRED } };
    expect(await get(`${h.url}/v1/templates/abc123`, API_KEY)).toEqual(gone);
    expect(await get(`${h.url}/v1/templates/abc123`)).toEqual(gone);
    expect(await get(`${h.url}/v1/pods`, "wrong")).toEqual(gone);
    expect((await get(`${h.url}/v2/templates`, API_KEY)).status).toBe(200);
  });

  it("serves the v1 template lookup when managementV1 keeps it on", async () => {
    await using h = await startHarness({ apiKey: API_KEY, managementV1: true });
    const mgmt = createManagementClient({
      apiKey: API_KEY,
      baseUrl: h.url,
      logger: pino({ level: "silent" }),
    });
    const created = await mgmt.templates.create({ name: "old", image: "me/old:1" });
    expect(await mgmt.getTemplate(created.id)).toMatchObject({ id: created.id, imageName: "me/old:1" });
  });

  it("logs one warning on the client's first v1 call, none for v2 calls, and reports the 410", async () => {
    await using h = await startHarness({ apiKey: API_KEY });
    const sink = logSink();
    const mgmt = createManagementClient({
      apiKey: API_KEY,
      baseUrl: h.url,
      logger: pino({ level: "warn" }, sink.stream),
    });
    await mgmt.templates.list();
    expect(sink.lines).toEqual([]);
    await expect(mgmt.getTemplate("abc123")).rejects.toMatchObject({
      code: "RUNLET_MANAGEMENT_HTTP",
      details: { status: 410, detail: RETIRED, method: "GET", path: "/v1/templates/abc123" },
    });
    await expect(mgmt.request({ method: "GET", path: "/pods", version: "v1" })).rejects.toMatchObject({
      details: { status: 410 },
    });
    expect(sink.lines.map(({ level, msg, code }) => [level, msg, code])).toEqual([
      [40, WARNING, "RUNLET_MANAGEMENT_V1_RETIRED"],
    ]);
  });

  it("emits a DeprecationWarning instead when the client has no logger", async () => {
    await using h = await startHarness({ apiKey: API_KEY, managementV1: true });
    const seen: Error[] = [];
    const listen = (w: Error) => seen.push(w);
    process.on("warning", listen);
    try {
      const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: h.url, version: "v1" });
      await mgmt.request({ method: "GET", path: "/templates/none1" }).catch(() => undefined);
      await mgmt.request({ method: "GET", path: "/templates/none2" }).catch(() => undefined);
      // Node emits 'warning' on the next tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", listen);
    }
    expect(seen.map((w) => [w.name, w.message, (w as Error & { code?: string }).code])).toEqual([
      ["DeprecationWarning", WARNING, "RUNLET_MANAGEMENT_V1_RETIRED"],
    ]);
  });
});
