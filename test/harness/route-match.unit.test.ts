import { describe, expect, it } from "vitest";
import {
  decide,
  matchPattern,
  type RouteFamily,
  type RouteRequest,
  type RouteSpec,
} from "../../src/harness/http/route-table.js";

/**
 * The router matches a request only against the routes its first segment names, plus those whose
 * pattern starts with a param (route-table.ts, `compiled`): what it decides must be what trying
 * every route in declaration order decides.
 */
type Ctx = Record<string, never>;
const spec = (method: RouteSpec<Ctx, "open">["method"], path: string): RouteSpec<Ctx, "open"> => ({
  method,
  path,
  access: "open",
  rate: "unlimited",
  body: "none",
  handle: () => {},
});
const routes = [
  spec("GET", "jobs/:id"),
  spec("POST", ":file"),
  spec(["POST", "PUT"], "jobs/:id"),
  spec("GET", "files/*rest"),
  spec("DELETE", "jobs"),
];
const family: RouteFamily<Ctx, "open"> = {
  name: "test",
  mount: "/",
  claims: "all",
  context: {},
  routes,
  defaultAccess: "open",
  authorize: () => "ok",
  refuse: () => {},
};
const request = (method: string, path: string[]): RouteRequest => ({
  method,
  headers: {},
  url: new URL(`http://h/${path.join("/")}`),
  endpointId: "",
  path,
});

describe("route matching", () => {
  it("chooses the first route, in declaration order, whose pattern and method fit", () => {
    const get = decide(family, request("GET", ["jobs", "7"]), false);
    expect(get).toMatchObject({ ok: true, route: routes[0], params: { id: "7" } });
    const put = decide(family, request("PUT", ["jobs", "7"]), false);
    expect(put).toMatchObject({ ok: true, route: routes[2], params: { id: "7" } });
    // A param-first pattern fits a named segment too, and any other name.
    const postName = decide(family, request("POST", ["jobs"]), false);
    expect(postName).toMatchObject({ ok: true, route: routes[1], params: { file: "jobs" } });
    const postOther = decide(family, request("POST", ["app.js"]), false);
    expect(postOther).toMatchObject({ ok: true, route: routes[1], params: { file: "app.js" } });
    const rest = decide(family, request("GET", ["files", "a", "b"]), false);
    expect(rest).toMatchObject({ ok: true, route: routes[3], params: { rest: "a/b" } });
  });

  it("answers 405 with every fitting route's methods, and 404 where no pattern fits", () => {
    const wrong = decide(family, request("PATCH", ["jobs", "7"]), false);
    expect(wrong).toEqual({
      ok: false,
      refusal: { reason: "method", allow: ["GET", "POST", "PUT"], pattern: "jobs/:id" },
    });
    const named = decide(family, request("GET", ["jobs"]), false);
    expect(named).toEqual({
      ok: false,
      refusal: { reason: "method", allow: ["POST", "DELETE"], pattern: ":file" },
    });
    expect(decide(family, request("GET", ["jobs", "7", "x"]), false)).toEqual({
      ok: false,
      refusal: { reason: "path" },
    });
    expect(decide(family, request("GET", ["files"]), false)).toMatchObject({
      ok: false,
      refusal: { reason: "method" },
    });
  });

  it("matches a pattern's params only on non-empty segments", () => {
    expect(matchPattern("jobs/:id", ["jobs", ""])).toBeUndefined();
    expect(matchPattern("files/*rest", ["files"])).toBeUndefined();
    expect(matchPattern("files/*rest", ["files", "a", ""])).toBeUndefined();
    expect(matchPattern("jobs/:id", ["jobs", "1"])).toEqual({ id: "1" });
    expect(matchPattern("jobs", ["jobs"])).toEqual({});
  });
});
