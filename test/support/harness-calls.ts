import type { Harness } from "../../src/harness/index.js";
import { send } from "./inject.js";

// Each helper goes through send(): in memory for a harness made by inMemoryHarness(), over
// loopback for one that listens (test/support/inject.ts).

/** Calls the client API with `Authorization: Bearer <key>` (docs/protocol.md, "Authentication"). */
export async function api(
  h: Harness,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
  options: { key?: string | null; rawBody?: string } = {},
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const key = options.key === undefined ? h.apiKey : options.key;
  const headers: { "content-type": string; authorization?: string } = { "content-type": "application/json" };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const res = await send(h, path, {
    method,
    headers,
    ...(method === "POST" ? { body: options.rawBody ?? JSON.stringify(body ?? {}) } : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    body: text === "" ? undefined : (JSON.parse(text) as unknown),
    headers: res.headers,
  };
}

/** A worker's job-take, as a plain HTTP request; returns the job or undefined on 204. */
export async function takeJob(
  h: Harness,
  endpointId = "local",
  workerId = "w1",
): Promise<{ id: string; input: unknown } | undefined> {
  const res = await send(h, `/v2/${endpointId}/job-take/${workerId}?job_in_progress=0`, {
    headers: { authorization: h.apiKey },
  });
  if (res.status === 204) return undefined;
  if (res.status !== 200) throw new Error(`job-take answered ${res.status}`);
  return (await res.json()) as { id: string; input: unknown };
}

/** A worker's job-done post. */
export async function postDone(
  h: Harness,
  jobId: string,
  body: unknown,
  options: { endpointId?: string; workerId?: string; isStream?: boolean } = {},
): Promise<number> {
  const ep = options.endpointId ?? "local";
  const res = await send(
    h,
    `/v2/${ep}/job-done/${options.workerId ?? "w1"}/${jobId}?isStream=${options.isStream ?? false}`,
    {
      method: "POST",
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      body: JSON.stringify(body),
    },
  );
  await res.text();
  return res.status;
}

/** A worker's job-stream post. */
export async function postChunk(h: Harness, jobId: string, chunk: unknown, workerId = "w1"): Promise<number> {
  const res = await send(h, `/v2/local/job-stream/${workerId}/${jobId}?isStream=false`, {
    method: "POST",
    headers: { authorization: h.apiKey, "content-type": "application/json" },
    body: JSON.stringify(chunk),
  });
  await res.text();
  return res.status;
}

/** A worker's job-stop poll: the ids, or [] on 204. */
export async function pollStop(h: Harness, workerId = "w1"): Promise<string[]> {
  const res = await send(h, `/v2/local/job-stop/${workerId}`, { headers: { authorization: h.apiKey } });
  if (res.status === 204) return [];
  return ((await res.json()) as { jobsToStop: string[] }).jobsToStop;
}
