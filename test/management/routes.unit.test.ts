import { describe, expect, it } from "vitest";
import {
  createManagementRoutes,
  type EndpointWorkerView,
  endpointOptionsOf,
  isManagementPath,
  type ManagementRequest,
} from "../../src/harness/management-api/index.js";

const API_KEY = "routes-key-1";
const auth = { authorization: `Bearer ${API_KEY}` };

function req(
  method: string,
  path: string,
  body: unknown = "",
  headers: ManagementRequest["headers"] = auth,
): ManagementRequest {
  return { method, path, headers, body: typeof body === "string" ? body : JSON.stringify(body) };
}

function answer(a: { status: number; headers: Readonly<Record<string, string>>; body: string } | undefined) {
  if (a === undefined) throw new Error("expected an answer");
  return {
    status: a.status,
    type: a.headers["content-type"],
    body: a.body === "" ? undefined : JSON.parse(a.body),
  };
}

describe("harness management routes", () => {
  it("leaves job-API paths to the harness and claims the reserved management ones", () => {
    const routes = createManagementRoutes({ apiKey: API_KEY });
    for (const path of [
      "/v2/abc123/run",
      "/v2/local/status/x",
      "/v2/serverlessx/health",
      "/health",
      "/v3/templates",
    ]) {
      expect(isManagementPath(path)).toBe(false);
      expect(routes.handle(req("GET", path))).toBeUndefined();
    }
    for (const path of [
      "/v1/templates/x",
      "/v2/templates",
      "/v2/serverless/e1",
      "/v2/pods",
      "/v2/network-volumes?x=1",
    ]) {
      expect(isManagementPath(path)).toBe(true);
    }
  });

  it("answers reserved v2 resources it does not emulate with a 501 problem", () => {
    const routes = createManagementRoutes({ apiKey: API_KEY });
    expect(answer(routes.handle(req("GET", "/v2/pods")))).toEqual({
      status: 501,
      type: "application/problem+json",
      body: {
        title: "Not Implemented",
        status: 501,
        detail:
          "the harness does not emulate /v2/pods; it serves /v2/templates, /v2/serverless, /v2/network-volumes, /v2/registries and /v2/catalog",
      },
    });
  });

  it("answers a missing or wrong key with 401 in each version's format", () => {
    const routes = createManagementRoutes({ apiKey: API_KEY, v1: true });
    const message = "missing or incorrect API key: send Authorization: Bearer <API_KEY>";
    expect(answer(routes.handle(req("GET", "/v1/templates/t1", "", {})))).toEqual({
      status: 401,
      type: "application/json",
      body: { message },
    });
    expect(answer(routes.handle(req("GET", "/v2/templates", "", { authorization: API_KEY })))).toEqual({
      status: 401,
      type: "application/problem+json",
      body: { title: "Unauthorized", status: 401, detail: message },
    });
  });

  it("answers v1 lookups with 400 for a bad flag value and 404/405 for what v1 does not serve", () => {
    const routes = createManagementRoutes({
      apiKey: API_KEY,
      v1: true,
      templates: [{ id: "t1", name: "n", imageName: "i" }],
    });
    expect(answer(routes.handle(req("GET", "/v1/templates/t1?includePublicTemplates=yes")))).toEqual({
      status: 400,
      type: "application/json",
      body: { message: 'includePublicTemplates must be true or false, got "yes"' },
    });
    expect(answer(routes.handle(req("GET", "/v1/templates/t1?includePublicTemplates=false")))?.status).toBe(
      200,
    );
    expect(answer(routes.handle(req("POST", "/v1/templates/t1")))).toMatchObject({
      status: 405,
      body: { message: "POST is not allowed on /v1/templates/{templateId}" },
    });
    expect(answer(routes.handle(req("GET", "/v1/pods")))).toMatchObject({
      status: 404,
      body: { message: "the harness serves only GET /v1/templates/{templateId} of the v1 API" },
    });
  });

  it("answers a body that is not a JSON object with a 400 problem", () => {
    const routes = createManagementRoutes({ apiKey: API_KEY });
    expect(answer(routes.handle(req("POST", "/v2/templates", "{nope")))).toMatchObject({
      status: 400,
      body: { title: "Bad Request", status: 400, detail: expect.stringMatching(/^the body is not JSON: /) },
    });
    expect(answer(routes.handle(req("POST", "/v2/serverless", "[1]")))).toMatchObject({
      status: 400,
      body: { detail: "the body must be a JSON object" },
    });
    expect(answer(routes.handle(req("PUT", "/v2/serverless")))).toMatchObject({
      status: 405,
      body: { detail: "PUT is not allowed on /v2/serverless" },
    });
  });

  it("hands a throwing or rejecting hook's error to onHookError and still answers", async () => {
    const errors: string[] = [];
    const routes = createManagementRoutes({
      apiKey: API_KEY,
      onEndpointCreated: () => {
        throw new Error("sync boom");
      },
      onEndpointDeleted: async () => {
        throw new Error("async boom");
      },
      onHookError: (err) => errors.push((err as Error).message),
    });
    const created = answer(
      routes.handle(
        req("POST", "/v2/serverless", {
          name: "e",
          image: "i:1",
          type: "QUEUE",
          scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
          cpu: [{ id: "cpu5c", vcpuCount: 2 }],
        }),
      ),
    );
    expect(created.status).toBe(201);
    expect(answer(routes.handle(req("DELETE", `/v2/serverless/${created.body.id}`))).status).toBe(204);
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual(["sync boom", "async boom"]);
  });

  it("answers workers and releases, the worker logs it does not keep with 501, and unknown sub-resources with 404", () => {
    const routes = createManagementRoutes({ apiKey: API_KEY });
    const { body } = answer(
      routes.handle(
        req("POST", "/v2/serverless", {
          name: "e",
          image: "i:1",
          type: "QUEUE",
          scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
          gpu: { pools: ["ADA_24"] },
        }),
      ),
    );
    expect(answer(routes.handle(req("GET", `/v2/serverless/${body.id}/workers`)))).toMatchObject({
      status: 200,
      body: { workers: [], summary: { total: 0 } },
    });
    expect(answer(routes.handle(req("GET", `/v2/serverless/${body.id}/releases`)))).toMatchObject({
      status: 200,
      body: { rollout: { inProgress: false, workersTotal: 0 }, releases: [{ version: 1 }] },
    });
    expect(answer(routes.handle(req("GET", `/v2/serverless/${body.id}/workers/w1/logs`)))?.status).toBe(501);
    expect(answer(routes.handle(req("GET", `/v2/serverless/${body.id}/nothing`)))?.status).toBe(404);
    expect(answer(routes.handle(req("GET", "/v2/serverless/unknown1")))).toMatchObject({
      status: 404,
      body: { detail: "endpoint unknown1 not found" },
    });
  });

  it("makes a release of each container change; workers running then stay on the old one until replaced", () => {
    let running: EndpointWorkerView[] = [];
    const updated: boolean[] = [];
    const routes = createManagementRoutes({
      apiKey: API_KEY,
      workers: () => running,
      onEndpointUpdated: (event) => updated.push(event.rollout),
    });
    const { body } = answer(
      routes.handle(
        req("POST", "/v2/serverless", {
          name: "e",
          image: "me/e:1",
          type: "QUEUE",
          scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
          gpu: { pools: ["ADA_24"], count: 2 },
        }),
      ),
    );
    running = [{ id: "w1", status: "IDLE", startedAt: Date.now() }];
    const releases = () => answer(routes.handle(req("GET", `/v2/serverless/${body.id}/releases`))).body;
    expect(releases().rollout).toEqual({
      inProgress: false,
      workersOnLatest: 1,
      workersTotal: 1,
      percentOnLatest: 100,
    });

    // A scaling change is no release; an image change is.
    answer(routes.handle(req("PATCH", `/v2/serverless/${body.id}`, { workers: { max: 4 } })));
    answer(routes.handle(req("PATCH", `/v2/serverless/${body.id}`, { image: "me/e:2" })));
    expect(updated).toEqual([false, true]);
    expect(releases()).toMatchObject({
      endpointVersion: 2,
      rollout: { inProgress: true, workersOnLatest: 0, workersTotal: 1, percentOnLatest: 0 },
      releases: [
        { version: 2, workerCount: 0, diff: [{ field: "image", old: "me/e:1", new: "me/e:2" }] },
        { version: 1, workerCount: 1, diff: [] },
      ],
    });
    const workers = answer(routes.handle(req("GET", `/v2/serverless/${body.id}/workers`))).body;
    expect(workers.workers[0]).toMatchObject({ id: "w1", isStale: true, version: 1, gpuCount: 2 });

    // w1 replaced by w2, which starts on the new release.
    running = [{ id: "w2", status: "RUNNING", startedAt: Date.now() }];
    expect(releases().rollout).toEqual({
      inProgress: false,
      workersOnLatest: 1,
      workersTotal: 1,
      percentOnLatest: 100,
    });
  });

  it("gives a created endpoint its timeout as the harness endpoint's execution timeout", () => {
    const routes = createManagementRoutes({ apiKey: API_KEY });
    const create = (extra: Record<string, unknown>) =>
      answer(
        routes.handle(
          req("POST", "/v2/serverless", {
            name: "e",
            image: "i:1",
            type: "QUEUE",
            scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
            cpu: [{ id: "cpu5c", vcpuCount: 2 }],
            ...extra,
          }),
        ),
      ).body;
    const given = create({ timeout: 45_000 });
    expect(endpointOptionsOf({ endpoint: given, rollout: false }, undefined)).toEqual({
      id: given.id,
      executionTimeoutMs: 45_000,
    });
    // Left out, it is the document's default, 300 000 ms.
    const defaulted = create({});
    expect(endpointOptionsOf({ endpoint: defaulted, rollout: false }, undefined)).toEqual({
      id: defaulted.id,
      executionTimeoutMs: 300_000,
    });
  });
});
