import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DASHBOARD_API_ROUTES } from "../../src/harness/dashboard/dashboard.js";
import { type RouteSpec, routeOf, routesOf, tableOf } from "../../src/harness/http/route-table.js";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { MANAGEMENT_V2_ROUTES } from "../../src/harness/management-api/routes.js";
import { OPENAI_ROUTE_TABLE } from "../../src/harness/openai/routes.js";
import { CLIENT_ROUTE_TABLE } from "../../src/harness/routes/client-routes.js";
import { WORKER_ROUTE_TABLE } from "../../src/harness/routes/worker-routes.js";
import { RATE_LIMITS } from "../../src/protocol/limits.js";
import { inMemoryHarness } from "../support/inject.js";
import { type RawAnswer, send } from "../support/raw-http.js";

/**
 * One case table run against every route family of the harness — client, worker, OpenAI,
 * management, dashboard — as hono runs every router through one shared case file. Each family
 * says only how its requests look (its key header, a route with a body, its limits); the cases
 * and what they expect are shared. Real HTTP in memory: each request is node:http's client writing
 * raw bytes to a connection the harness hands out (`connect()` for the API listener,
 * `connectDashboard()` for the page's), which node:http's server parses as it would a socket's;
 * no port is bound.
 */

/** How a family's requests look. */
interface Family {
  readonly name: string;
  /** The listener it is served on: its base URL, and a connection to it in memory. */
  readonly base: (h: Harness) => string;
  readonly connect: (h: Harness) => Duplex;
  /** Its declared routes, each of which must refuse a request without the key. */
  readonly routes: readonly RouteSpec<never, string>[];
  /** The headers that carry a key. */
  readonly auth: (key: string) => Record<string, string>;
  /** A route that takes a body, and the bytes over its limit. */
  readonly post: { readonly path: string; readonly overBytes: number; readonly tooLarge: 400 | 413 };
  /** A cheap request to count against the rate limit, and whether its route has a row. */
  readonly cheap: {
    readonly method: string;
    readonly path: string;
    readonly bodyBytes?: number;
    readonly limited: boolean;
  };
  /** A path under the family that no route takes, and a known path with a method it does not take. */
  readonly unknownPath: string;
  readonly wrongMethod: { readonly method: string; readonly path: string; readonly status: 404 | 405 };
}

const LIMIT = 1_000;
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

const FAMILIES: readonly Family[] = [
  {
    name: "client",
    base: (h) => h.url,
    connect: (h) => h.connect(),
    routes: routesOf(CLIENT_ROUTE_TABLE),
    auth: bearer,
    post: { path: "/v2/local/run", overBytes: LIMIT + 1, tooLarge: 413 },
    cheap: { method: "GET", path: "/v2/local/status/nope", limited: true },
    unknownPath: "/v2/local/status/a/b",
    wrongMethod: { method: "PATCH", path: "/v2/local/run", status: 405 },
  },
  {
    name: "worker",
    base: (h) => h.url,
    connect: (h) => h.connect(),
    routes: routesOf(WORKER_ROUTE_TABLE),
    auth: (key) => ({ authorization: key }),
    // The platform answers 400, not 413, to a result over its limit.
    post: { path: "/v2/local/job-done/w1/j1", overBytes: LIMIT + 1, tooLarge: 400 },
    cheap: { method: "GET", path: "/v2/local/ping/w1", limited: false },
    unknownPath: "/v2/local/job-bogus/w1",
    wrongMethod: { method: "POST", path: "/v2/local/ping/w1", status: 405 },
  },
  {
    name: "openai",
    base: (h) => h.url,
    connect: (h) => h.connect(),
    routes: routesOf(OPENAI_ROUTE_TABLE),
    auth: bearer,
    post: { path: "/v2/local/openai/v1/chat/completions", overBytes: 2 * LIMIT + 1, tooLarge: 413 },
    // A body that is not JSON is refused once admitted: counted, and answered at once.
    cheap: { method: "POST", path: "/v2/local/openai/v1/chat/completions", bodyBytes: 1, limited: true },
    unknownPath: "/v2/local/openai/v2/models",
    wrongMethod: { method: "GET", path: "/v2/local/openai/v1/chat/completions", status: 405 },
  },
  {
    name: "management",
    base: (h) => h.url,
    connect: (h) => h.connect(),
    routes: MANAGEMENT_V2_ROUTES,
    auth: bearer,
    post: { path: "/v2/templates", overBytes: 1_048_577, tooLarge: 413 },
    cheap: { method: "GET", path: "/v2/templates", limited: false },
    unknownPath: "/v2/templates/t1/nothing",
    wrongMethod: { method: "PUT", path: "/v2/templates", status: 405 },
  },
  {
    name: "dashboard",
    base: (h) => h.dashboardUrl!,
    connect: (h) => h.connectDashboard(),
    routes: routesOf(DASHBOARD_API_ROUTES),
    auth: bearer,
    post: { path: "api/jobs", overBytes: 2 * LIMIT + 4_096 + 1, tooLarge: 413 },
    cheap: { method: "GET", path: "api/state", limited: false },
    unknownPath: "api/nothing",
    // The page's data routes answer every other refusal 404 (docs/harness.md, "The dashboard").
    wrongMethod: { method: "DELETE", path: "api/state", status: 404 },
  },
];

/** A concrete path for a route pattern: each param filled in. */
function pathOf(family: Family, pattern: string): string {
  const filled = pattern.replace(/[:*]\w+/g, "x1");
  if (family.name === "dashboard") return `api/${filled}`;
  if (family.name === "management") return `/v2/${filled}`;
  return `/v2/local/${filled}`;
}

function methodOf(route: RouteSpec<never, string>): string {
  return route.method === "*" ? "GET" : typeof route.method === "string" ? route.method : route.method[0]!;
}

let h: Harness;
let clock: ManualClock;
const at = (family: Family, path: string) => new URL(path, family.base(h)).toString();
const call = (
  family: Family,
  options: { method?: string; path: string; headers?: Record<string, string>; bodyBytes?: number },
): Promise<RawAnswer> => {
  const url = new URL(at(family, options.path));
  // Only methods that carry a body send one (a GET's body is no case here).
  const takesBody = options.method === "POST" || options.method === "PATCH" || options.method === "PUT";
  const { bodyBytes, ...rest } = options;
  return send(url.origin, {
    ...rest,
    ...(takesBody && bodyBytes !== undefined ? { bodyBytes } : {}),
    headers: { ...options.headers, connection: "close" },
    path: `${url.pathname}${url.search}`,
    connect: () => family.connect(h),
  }).catch(
    // A server that refuses an upload may cut the socket before the client has read the answer.
    (err: NodeJS.ErrnoException) => ({ status: err.code === "ECONNRESET" ? -1 : 0, headers: {}, text: "" }),
  );
};

beforeAll(() => {
  clock = new ManualClock();
  h = inMemoryHarness({
    clock,
    dashboard: true,
    takeTimeoutMs: 50,
    streamHoldMs: 10,
    limits: { runBytes: LIMIT, runsyncBytes: 2 * LIMIT, jobDoneBytes: LIMIT },
    // Every row allows two requests a window; the clock never moves, so the third is refused.
    rateLimits: {
      rules: Object.fromEntries(
        Object.keys(RATE_LIMITS).map((op) => [op, { perWindow: 2, concurrent: null }]),
      ),
      requestsPerWorker: 0,
      concurrentPerWorker: 0,
    },
  });
});
afterAll(() => h.close());

/** The shared cases: what every family must do, whatever its error shape. */
const CASES: ReadonlyArray<{ readonly name: string; readonly run: (family: Family) => Promise<void> }> = [
  {
    name: "refuses every declared route without a key (401), before its body",
    run: async (family) => {
      expect(family.routes.length).toBeGreaterThan(0);
      for (const route of family.routes) {
        const path = pathOf(family, route.path);
        const answer = await call(family, { method: methodOf(route), path, bodyBytes: 10 });
        expect([path, answer.status]).toEqual([path, 401]);
      }
    },
  },
  {
    name: "refuses a wrong key (401)",
    run: async (family) => {
      const answer = await call(family, {
        method: "POST",
        path: family.post.path,
        headers: family.auth(`${h.apiKey}x`),
        bodyBytes: 10,
      });
      expect(answer.status).toBe(401);
    },
  },
  {
    name: "refuses a body over the route's limit, by its declared length",
    run: async (family) => {
      const answer = await call(family, {
        method: "POST",
        path: family.post.path,
        headers: { ...family.auth(h.apiKey), "content-type": "application/json" },
        bodyBytes: family.post.overBytes,
      });
      expect(answer.status).toBe(family.post.tooLarge);
      expect(answer.text).toMatch(/limit/);
    },
  },
  {
    name: "applies the route's rate-limit row (429 with Retry-After), or none where it declares none",
    run: async (family) => {
      const statuses: number[] = [];
      let retryAfter: unknown;
      for (let i = 0; i < 4; i++) {
        const answer = await call(family, { ...family.cheap, headers: family.auth(h.apiKey) });
        statuses.push(answer.status);
        if (answer.status === 429) retryAfter = answer.headers["retry-after"];
      }
      if (family.cheap.limited) {
        expect(statuses.slice(2)).toEqual([429, 429]);
        expect(retryAfter).toMatch(/^\d+$/);
      } else {
        expect(statuses).not.toContain(429);
      }
    },
  },
  {
    name: "answers an unknown path 404",
    run: async (family) => {
      const answer = await call(family, { path: family.unknownPath, headers: family.auth(h.apiKey) });
      expect(answer.status).toBe(404);
    },
  },
  {
    name: "answers a method the path does not take",
    run: async (family) => {
      const { method, path, status } = family.wrongMethod;
      const answer = await call(family, { method, path, headers: family.auth(h.apiKey), bodyBytes: 2 });
      expect(answer.status).toBe(status);
      if (status === 405) expect(answer.headers["allow"]).toBeTruthy();
    },
  },
];

describe.each(FAMILIES)("the $name routes", (family) => {
  it.each(CASES)("$name", async ({ run }) => run(family));
});

describe("the route families", () => {
  it("cover every family the API listener serves, and every route name under /v2/<endpoint>/ once", () => {
    expect(FAMILIES.map((f) => f.name)).toEqual(["client", "worker", "openai", "management", "dashboard"]);
    const names = [CLIENT_ROUTE_TABLE, WORKER_ROUTE_TABLE, OPENAI_ROUTE_TABLE].flatMap((t) => Object.keys(t));
    expect(new Set(names).size).toBe(names.length);
  });

  it("reach the page's listener in memory only on a harness with the page", async () => {
    await using bare = inMemoryHarness();
    expect(() => bare.connectDashboard()).toThrow(
      expect.objectContaining({
        code: "RUNLET_HARNESS_CONFIG",
        message: expect.stringMatching(/no dashboard/),
      }),
    );
  });
});

describe("a route spec", () => {
  // What the compiler refuses: `npx tsc --noEmit` fails on an unused @ts-expect-error, so each
  // line below stays an error as long as the spec's types hold. At run time the specs only exist.
  it("cannot be written without a rate-limit row, with an unknown path or param, or another family's access", () => {
    const route = routeOf<null, "client">();
    const handle = () => {};
    const specs = [
      // @ts-expect-error: no rate-limit row
      route({ method: "GET", path: "x", access: "client", body: "none", handle }),
      // @ts-expect-error: a row the platform's table does not have
      route({ method: "GET", path: "x", access: "client", rate: "nope", body: "none", handle }),
      route({
        method: "GET",
        path: "x/:id",
        access: "client",
        rate: "status",
        body: "none",
        // @ts-expect-error: the path declares :id, not :jobId
        handle: (_ctx, call) => call.params.jobId,
      }),
      // @ts-expect-error: an access kind of another family
      route({ method: "GET", path: "x", access: "worker", rate: "unlimited", body: "none", handle }),
    ];
    const table = tableOf<null, "client">()({
      // @ts-expect-error: keyed by a name its path does not start with
      y: route({ method: "GET", path: "x", access: "client", rate: "unlimited", body: "none", handle }),
    });
    expect(specs).toHaveLength(4);
    expect(Object.keys(table)).toEqual(["y"]);
  });
});
