import fc from "fast-check";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../src/harness/index.js";

/**
 * Generated bad requests to the client-facing job API: each must get a 4xx with the JSON error
 * body `{error, status}`, never a 5xx or a dropped connection, and must create no job.
 * No worker is connected, so any job created would sit IN_QUEUE and show in `/health`.
 */
const KEY = "rl_fuzz_key_123";
const RUN_LIMIT_BYTES = 4_096;
const CLIENT_ROUTES = [
  "run",
  "runsync",
  "status",
  "status-sync",
  "stream",
  "cancel",
  "retry",
  "purge-queue",
  "health",
  "requests",
];
const METHOD: Record<string, string> = {
  run: "POST",
  runsync: "POST",
  status: "GET",
  "status-sync": "GET",
  stream: "GET",
  cancel: "POST",
  retry: "POST",
  "purge-queue": "POST",
  health: "GET",
  requests: "GET",
};
const WITH_ID = new Set(["status", "status-sync", "stream", "cancel", "retry"]);
/** Management resources the harness also serves under /v2 (not the job API): never used as endpoint ids here. */
const MANAGEMENT = [
  "pods",
  "serverless",
  "templates",
  "network-volumes",
  "registries",
  "clusters",
  "billing",
  "catalog",
];
const ZERO_JOBS = { completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 };

interface BadRequest {
  readonly method: string;
  readonly path: string;
  readonly auth: string | undefined;
  readonly body?: Buffer;
  /** The exact status when the case determines it. */
  readonly expect?: number;
}

let h: Harness;
let agent: Agent;
beforeAll(async () => {
  h = await startHarness({
    apiKey: KEY,
    rateLimits: { disabled: true },
    limits: { runBytes: RUN_LIMIT_BYTES, runsyncBytes: RUN_LIMIT_BYTES },
    takeTimeoutMs: 200,
  });
  agent = new Agent({ connections: 8, headersTimeout: 10_000, bodyTimeout: 10_000 });
});
afterAll(async () => {
  await agent?.close();
  await h?.close();
});

/** True when the harness would take `header` as the main key. */
function opensHarness(header: string): boolean {
  const value = header.trim();
  return value === KEY || /^Bearer\s+(.+)$/i.exec(value)?.[1] === KEY;
}

const goodAuth = fc.constantFrom(`Bearer ${KEY}`, KEY);
const badAuth = fc.oneof(
  fc.constant(undefined),
  fc.constantFrom(
    "",
    "Bearer",
    "Bearer ",
    `Bearer ${KEY}x`,
    `Bearer x${KEY}`,
    `Token ${KEY}`,
    KEY.toUpperCase(),
  ),
  fc.stringMatching(/^[!-~][ -~]{0,60}$/).filter((s) => !opensHarness(s)),
);
const idSegment = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/);
/** A valid client route path (with a job id where the route takes one). */
const routePath = fc
  .tuple(fc.constantFrom(...CLIENT_ROUTES), idSegment)
  .map(([route, id]) => ({ route, path: `/v2/local/${route}${WITH_ID.has(route) ? `/${id}` : ""}` }));
const text = (s: string) => Buffer.from(s, "utf8");
const isObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);

/** Text of a number the policy bounds refuse: huge, negative, fractional, out of range. */
const badNumberText = fc.oneof(
  fc.constantFrom(
    "1e400",
    "-1e400",
    "123456789012345678901234567890",
    "4999",
    "604800001",
    "1.5",
    "-0.5",
    "1e-400",
  ),
  fc.integer({ max: 4_999 }).map(String),
  fc.integer({ min: 604_800_001 }).map(String),
  fc
    .double({ noNaN: true, noDefaultInfinity: true })
    .filter((d) => !Number.isInteger(d))
    .map(String),
);
const GOOD_BODY = '{"input":{"a":[1,2,{"b":"c"}],"d":"e"}}';
const deep = (depth: number, open: string, close: string) => open.repeat(depth) + close.repeat(depth);

/** Bodies `/run` must refuse. */
const badRunBody = fc.oneof(
  fc.constant(Buffer.alloc(0)),
  fc
    .uint8Array({ maxLength: 512 })
    .map((b) => Buffer.from(b))
    .filter((b) => {
      try {
        const v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(b)) as Record<string, unknown>;
        return !(isObject(v) && isObject(v["input"]));
      } catch {
        return true;
      }
    }),
  fc
    .jsonValue({ maxDepth: 4 })
    .filter((v) => !(isObject(v) && isObject((v as Record<string, unknown>)["input"])))
    .map((v) => text(JSON.stringify(v) ?? "null")),
  fc
    .oneof(
      fc.integer(),
      fc.string(),
      fc.array(fc.jsonValue({ maxDepth: 2 })),
      fc.constant(null),
      fc.boolean(),
      fc.double(),
    )
    .map((input) => text(JSON.stringify({ input }))),
  fc
    .tuple(fc.constantFrom("executionTimeout", "ttl", "lowPriority"), badNumberText)
    .map(([field, n]) =>
      text(`{"input":{},"policy":{"${field}":${field === "lowPriority" ? `"${n}"` : n}}}`),
    ),
  fc
    .oneof(fc.integer(), fc.boolean(), fc.array(fc.string()), fc.constant({}))
    .map((webhook) => text(JSON.stringify({ input: {}, webhook }))),
  fc
    .oneof(fc.integer(), fc.string(), fc.record({ accessId: fc.integer() }))
    .map((s3Config) => text(JSON.stringify({ input: {}, s3Config }))),
  fc.integer({ min: 1_000, max: 20_000 }).map((d) => text(deep(d, "[", "]"))),
  fc.integer({ min: 1_000, max: 20_000 }).map((d) => text(`{"input":${deep(d, "[", "]")}}`)),
  fc.integer({ min: 200, max: 5_000 }).map((d) => text(`{"input":{},"policy":${deep(d, '{"a":', "}")}}`)),
  // Every proper prefix of a valid body is cut-off JSON.
  fc.integer({ min: 1, max: GOOD_BODY.length - 1 }).map((cut) => text(GOOD_BODY.slice(0, cut))),
  fc
    .integer({ min: RUN_LIMIT_BYTES + 1, max: RUN_LIMIT_BYTES * 4 })
    .map((n) => text(`{"input":{"pad":"${"p".repeat(n)}"}}`)),
);

const badRequest: fc.Arbitrary<BadRequest> = fc.oneof(
  // Missing or malformed auth on an otherwise fine request.
  fc.tuple(routePath, badAuth).map(([{ route, path }, auth]) => ({
    method: METHOD[route]!,
    path,
    auth,
    ...(METHOD[route] === "POST" ? { body: text('{"input":{}}') } : {}),
    expect: 401,
  })),
  // The wrong method.
  fc
    .tuple(routePath, goodAuth, fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"))
    .filter(([{ route }, , method]) => method !== METHOD[route])
    .map(([{ path }, auth, method]) => ({ method, path, auth, expect: 405 })),
  // Wrong paths: unknown routes, endpoints, versions, ids, extra segments, bad escapes.
  fc
    .tuple(
      fc.oneof(
        idSegment
          .filter((s) => !CLIENT_ROUTES.includes(s) && !s.startsWith("job-") && s !== "ping")
          .map((s) => `/v2/local/${s}`),
        fc
          .tuple(
            idSegment.filter((s) => s !== "local" && !MANAGEMENT.includes(s)),
            fc.constantFrom(...CLIENT_ROUTES),
          )
          .map(([ep, r]) => `/v2/${ep}/${r}`),
        fc.constantFrom(...CLIENT_ROUTES).map((r) => `/v1/local/${r}`),
        fc
          .tuple(fc.constantFrom("run", "health", "purge-queue", "requests"), idSegment)
          .map(([r, x]) => `/v2/local/${r}/${x}`),
        fc.constantFrom("status", "stream", "cancel", "retry").map((r) => `/v2/local/${r}`),
        fc.tuple(fc.constantFrom("status", "cancel"), idSegment).map(([r, id]) => `/v2/local/${r}/${id}`),
        fc.stringMatching(/^%[0-9A-F]?[G-Z]?$/).map((esc) => `/v2/local/status/${esc}`),
        fc.stringMatching(/^\/[A-Za-z0-9._~-]{0,30}$/).filter((p) => p !== "/v2"),
      ),
      goodAuth,
      fc.constantFrom("GET", "POST"),
    )
    .map(([path, auth, method]) => ({
      method,
      path,
      auth,
      ...(method === "POST" ? { body: text("{}") } : {}),
    })),
  // Bad bodies on /run and /runsync.
  fc
    .tuple(fc.constantFrom("/v2/local/run", "/v2/local/runsync"), goodAuth, badRunBody)
    .map(([path, auth, body]) => ({ method: "POST", path, auth, body })),
);

async function send(req: BadRequest) {
  const res = await request(`${h.url}${req.path}`, {
    method: req.method as "GET",
    dispatcher: agent,
    headers: req.auth === undefined ? {} : { authorization: req.auth },
    ...(req.body === undefined ? {} : { body: req.body }),
  });
  const raw = await res.body.text();
  return { status: res.statusCode, type: String(res.headers["content-type"] ?? ""), raw };
}

describe("reliability: generated bad input to the job API", () => {
  it("answers every generated bad request (auth, method, path, body, size, nesting, numbers) with a 4xx JSON error and creates no job", async () => {
    await fc.assert(
      fc.asyncProperty(badRequest, async (req) => {
        const res = await send(req);
        expect(res.status, `${req.method} ${req.path}: ${res.raw.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${req.method} ${req.path}: ${res.raw.slice(0, 200)}`).toBeLessThan(500);
        if (req.expect !== undefined) expect(res.status, `${req.method} ${req.path}`).toBe(req.expect);
        expect(res.type).toBe("application/json");
        const body = JSON.parse(res.raw) as { error?: unknown; status?: unknown; message?: unknown };
        if (req.path.startsWith("/v1/")) {
          // /v1 is the management API (docs/protocol.md, "Errors"): its error body is `{message}`.
          expect(typeof body.message).toBe("string");
        } else {
          expect(typeof body.error).toBe("string");
          expect(body.status).toBe(res.status);
        }
        expect(h.health("local").jobs).toEqual(ZERO_JOBS);
      }),
      { numRuns: 1_000 },
    );
    // Still serving: a good request after all that is accepted.
    const ok = await send({ method: "GET", path: "/v2/local/health", auth: `Bearer ${KEY}` });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.raw) as { jobs: unknown }).jobs).toEqual(ZERO_JOBS);
  }, 90_000);

  it("refuses a /run body that is not valid UTF-8 with a 400 instead of creating a job from replacement characters", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          [0xff],
          [0xfe, 0xff],
          [0xc3],
          [0xe2, 0x82],
          [0xed, 0xa0, 0x80],
          [0xf8, 0x88, 0x80, 0x80, 0x80],
        ),
        async (bytes) => {
          const body = Buffer.concat([text('{"input":{"s":"'), Buffer.from(bytes), text('"}}')]);
          const res = await send({ method: "POST", path: "/v2/local/run", auth: `Bearer ${KEY}`, body });
          expect(res.status, res.raw).toBe(400);
          expect(typeof (JSON.parse(res.raw) as { error?: unknown }).error).toBe("string");
          expect(h.health("local").jobs).toEqual(ZERO_JOBS);
        },
      ),
      { numRuns: 12 },
    );
  });
});
