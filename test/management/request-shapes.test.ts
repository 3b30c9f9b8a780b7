import { describe, expect, it } from "vitest";
import { createManagementClient, type ManagementClient } from "../../src/management/index.js";
import { VERSION } from "../../src/version.js";
import { type Reply, startRecorder } from "../support/management-servers.js";

const API_KEY = "shape-key-789";

interface Case {
  readonly name: string;
  readonly call: (m: ManagementClient) => Promise<unknown>;
  readonly method: string;
  readonly path: string;
  readonly query?: Record<string, string[]>;
  readonly body?: unknown;
  /** What the recorder answers. @default 200 `{id: "x1"}` */
  readonly reply?: Reply;
  /** What the method returns for that answer. */
  readonly returns?: unknown;
}

const one = { status: 200, body: { id: "x1", extra: true } };

/** Every method whose path the harness does not serve, with its exact request. */
const CASES: readonly Case[] = [
  {
    name: "pods.list",
    call: (m) => m.pods.list({ query: { computeType: "GPU" } }),
    method: "GET",
    path: "/v2/pods",
    query: { computeType: ["GPU"] },
    reply: { status: 200, body: { pods: [{ id: "p1" }] } },
    returns: [{ id: "p1" }],
  },
  {
    name: "pods.get",
    call: (m) => m.pods.get("p/1"),
    method: "GET",
    path: "/v2/pods/p%2F1",
    reply: one,
    returns: { id: "x1", extra: true },
  },
  {
    name: "pods.create",
    call: (m) =>
      m.pods.create({
        name: "p",
        image: "img:1",
        gpu: { id: "A100", count: 2 },
        mounts: [{ networkVolumeId: "nv1", path: "/data" }],
        vendorField: 7,
      }),
    method: "POST",
    path: "/v2/pods",
    body: {
      name: "p",
      image: "img:1",
      cloud: "SECURE",
      gpu: { id: "A100", count: 2 },
      mounts: [{ networkVolumeId: "nv1", path: "/data" }],
      vendorField: 7,
    },
    reply: one,
  },
  {
    name: "pods.update",
    call: (m) => m.pods.update("p1", { image: "img:2" }),
    method: "PATCH",
    path: "/v2/pods/p1",
    body: { image: "img:2" },
    reply: one,
  },
  {
    name: "pods.delete",
    call: (m) => m.pods.delete("p1"),
    method: "DELETE",
    path: "/v2/pods/p1",
    reply: { status: 204 },
    returns: undefined,
  },
  {
    name: "pods.action",
    call: (m) => m.pods.action("p1", "terminate"),
    method: "POST",
    path: "/v2/pods/p1/action",
    body: { action: "terminate" },
  },
  {
    name: "pods.logs",
    call: (m) => m.pods.logs("p1"),
    method: "GET",
    path: "/v2/pods/p1/logs",
    reply: { status: 200, headers: { "content-type": "text/plain" }, body: "line 1\nline 2" },
    returns: "line 1\nline 2",
  },
  {
    name: "serverless.workers",
    call: (m) => m.serverless.workers("e1"),
    method: "GET",
    path: "/v2/serverless/e1/workers",
    reply: {
      status: 200,
      body: { workers: [{ id: "w1", status: "IDLE" }], summary: { total: 1 }, endpointVersion: 1 },
    },
    returns: { workers: [{ id: "w1", status: "IDLE" }], summary: { total: 1 }, endpointVersion: 1 },
  },
  {
    name: "serverless.workerLogs",
    call: (m) => m.serverless.workerLogs("e1", "w1", { query: { since: 5 } }),
    method: "GET",
    path: "/v2/serverless/e1/workers/w1/logs",
    query: { since: ["5"] },
  },
  {
    name: "serverless.releases",
    call: (m) => m.serverless.releases("e1"),
    method: "GET",
    path: "/v2/serverless/e1/releases",
    reply: {
      status: 200,
      body: {
        endpointVersion: 2,
        rollout: { inProgress: true, workersOnLatest: 1, workersTotal: 2, percentOnLatest: 50 },
        releases: [{ id: "r2", version: 2, workerCount: 1 }],
      },
    },
    returns: {
      endpointVersion: 2,
      rollout: { inProgress: true, workersOnLatest: 1, workersTotal: 2, percentOnLatest: 50 },
      releases: [{ id: "r2", version: 2, workerCount: 1 }],
    },
  },
  {
    name: "networkVolumes.list",
    call: (m) => m.networkVolumes.list(),
    method: "GET",
    path: "/v2/network-volumes",
    reply: { status: 200, body: { networkVolumes: [{ id: "nv1" }] } },
    returns: [{ id: "nv1" }],
  },
  {
    name: "networkVolumes.get",
    call: (m) => m.networkVolumes.get("nv1"),
    method: "GET",
    path: "/v2/network-volumes/nv1",
    reply: one,
  },
  {
    name: "networkVolumes.create",
    call: (m) =>
      m.networkVolumes.create({ name: "data", dataCenter: "EU-RO-1", size: 50, type: "HIGH_PERFORMANCE" }),
    method: "POST",
    path: "/v2/network-volumes",
    body: { name: "data", dataCenter: "EU-RO-1", size: 50, type: "HIGH_PERFORMANCE" },
    reply: one,
  },
  {
    name: "networkVolumes.update",
    call: (m) => m.networkVolumes.update("nv1", { size: 60 }),
    method: "PATCH",
    path: "/v2/network-volumes/nv1",
    body: { size: 60 },
    reply: one,
  },
  {
    name: "networkVolumes.delete",
    call: (m) => m.networkVolumes.delete("nv1"),
    method: "DELETE",
    path: "/v2/network-volumes/nv1",
    reply: { status: 204 },
    returns: undefined,
  },
  {
    name: "registries.list",
    call: (m) => m.registries.list(),
    method: "GET",
    path: "/v2/registries",
    reply: { status: 200, body: { registries: [{ id: "r1" }] } },
    returns: [{ id: "r1" }],
  },
  {
    name: "registries.get",
    call: (m) => m.registries.get("r1"),
    method: "GET",
    path: "/v2/registries/r1",
    reply: one,
  },
  {
    name: "registries.create",
    call: (m) => m.registries.create({ name: "hub", username: "u", password: "p" }),
    method: "POST",
    path: "/v2/registries",
    body: { name: "hub", username: "u", password: "p" },
    reply: one,
  },
  {
    name: "registries.delete",
    call: (m) => m.registries.delete("r1"),
    method: "DELETE",
    path: "/v2/registries/r1",
    reply: { status: 204 },
    returns: undefined,
  },
  {
    name: "registries.listDelegations",
    call: (m) => m.registries.listDelegations(),
    method: "GET",
    path: "/v2/registries/delegations",
  },
  {
    name: "registries.createDelegation",
    call: (m) => m.registries.createDelegation({ registryId: "r1", teamId: "t1" }),
    method: "POST",
    path: "/v2/registries/delegations",
    body: { registryId: "r1", teamId: "t1" },
  },
  {
    name: "registries.deleteDelegation",
    call: (m) => m.registries.deleteDelegation("d1"),
    method: "DELETE",
    path: "/v2/registries/delegations/d1",
    reply: { status: 204 },
    returns: undefined,
  },
  { name: "clusters.list", call: (m) => m.clusters.list(), method: "GET", path: "/v2/clusters" },
  { name: "clusters.get", call: (m) => m.clusters.get("c1"), method: "GET", path: "/v2/clusters/c1" },
  {
    name: "clusters.create",
    call: (m) => m.clusters.create({ name: "c", nodes: 2 }),
    method: "POST",
    path: "/v2/clusters",
    body: { name: "c", nodes: 2 },
  },
  {
    name: "clusters.update",
    call: (m) => m.clusters.update("c1", { name: "d" }),
    method: "PATCH",
    path: "/v2/clusters/c1",
    body: { name: "d" },
  },
  {
    name: "clusters.delete",
    call: (m) => m.clusters.delete("c1"),
    method: "DELETE",
    path: "/v2/clusters/c1",
    reply: { status: 204 },
    returns: undefined,
  },
  {
    name: "catalog.gpus",
    call: (m) => m.catalog.gpus(),
    method: "GET",
    path: "/v2/catalog/gpus",
    reply: {
      status: 200,
      body: { gpus: [{ id: "NVIDIA A100 80GB PCIe", name: "A100", pool: "AMPERE_80" }] },
    },
    returns: [{ id: "NVIDIA A100 80GB PCIe", name: "A100", pool: "AMPERE_80" }],
  },
  {
    name: "catalog.gpu",
    call: (m) => m.catalog.gpu("NVIDIA A100 80GB"),
    method: "GET",
    path: "/v2/catalog/gpus/NVIDIA%20A100%2080GB",
    reply: { status: 200, body: { id: "NVIDIA A100 80GB PCIe", name: "A100", pool: "AMPERE_80" } },
    returns: { id: "NVIDIA A100 80GB PCIe", name: "A100", pool: "AMPERE_80" },
  },
  {
    name: "catalog.cpus",
    call: (m) => m.catalog.cpus(),
    method: "GET",
    path: "/v2/catalog/cpus",
    reply: { status: 200, body: { cpus: [{ id: "cpu3c" }] } },
    returns: [{ id: "cpu3c" }],
  },
  { name: "catalog.cpu", call: (m) => m.catalog.cpu("cpu3c"), method: "GET", path: "/v2/catalog/cpus/cpu3c" },
  {
    name: "catalog.datacenters",
    call: (m) => m.catalog.datacenters(),
    method: "GET",
    path: "/v2/catalog/datacenters",
    reply: { status: 200, body: { dataCenters: [{ id: "EU-RO-1" }] } },
    returns: [{ id: "EU-RO-1" }],
  },
  {
    name: "catalog.datacenter",
    call: (m) => m.catalog.datacenter("EU-RO-1"),
    method: "GET",
    path: "/v2/catalog/datacenters/EU-RO-1",
  },
  {
    name: "billing.aggregated",
    call: (m) => m.billing.aggregated({ query: { bucketSize: "day" } }),
    method: "GET",
    path: "/v2/billing",
    query: { bucketSize: ["day"] },
  },
  { name: "billing.pods", call: (m) => m.billing.pods(), method: "GET", path: "/v2/billing/pods" },
  {
    name: "billing.serverless",
    call: (m) => m.billing.serverless({ query: { endpointId: ["e1", "e2"] } }),
    method: "GET",
    path: "/v2/billing/serverless",
    query: { endpointId: ["e1", "e2"] },
  },
  {
    name: "billing.networkVolumes",
    call: (m) => m.billing.networkVolumes(),
    method: "GET",
    path: "/v2/billing/network-volumes",
  },
  {
    name: "billing.publicEndpoints",
    call: (m) => m.billing.publicEndpoints(),
    method: "GET",
    path: "/v2/billing/endpoints",
  },
  {
    name: "billing.clusters",
    call: (m) => m.billing.clusters(),
    method: "GET",
    path: "/v2/billing/clusters",
  },
];

describe("management client request shapes", () => {
  it.each(CASES.map((c) => [c.name, c] as const))(
    "%s sends its exact request and returns the answer",
    async (_name, c) => {
      const reply = c.reply ?? { status: 200, body: { id: "x1" } };
      await using server = await startRecorder(() => reply);
      const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
      const result = await c.call(mgmt);

      expect(server.requests).toHaveLength(1);
      const seen = server.requests[0]!;
      expect({ method: seen.method, path: seen.path, query: seen.query }).toEqual({
        method: c.method,
        path: c.path,
        query: c.query ?? {},
      });
      expect(seen.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(seen.headers.accept).toBe("application/json");
      expect(seen.headers["user-agent"]).toMatch(new RegExp(`^runlet/${VERSION.replaceAll(".", "\\.")} `));
      if (c.body === undefined) {
        expect(seen.body).toBe("");
        expect(seen.headers["content-type"]).toBeUndefined();
      } else {
        expect(JSON.parse(seen.body)).toEqual(c.body);
        expect(seen.headers["content-type"]).toBe("application/json");
      }
      expect(result).toEqual("returns" in c ? c.returns : reply.body);
    },
  );

  it("refuses a v2 list answer without its wrapper as RUNLET_MANAGEMENT_BAD_RESPONSE", async () => {
    await using server = await startRecorder(() => ({ status: 200, body: [{ id: "p1" }] }));
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    await expect(mgmt.pods.list()).rejects.toMatchObject({
      code: "RUNLET_MANAGEMENT_BAD_RESPONSE",
      message: 'GET /v2/pods answer has an unexpected shape: expected {"pods": [...]}, got an array',
    });
  });

  it("refuses a list item without an id, naming the field", async () => {
    await using server = await startRecorder(() => ({
      status: 200,
      body: { endpoints: [{ id: "e1", name: "a" }, { name: "x" }] },
    }));
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    await expect(mgmt.serverless.list()).rejects.toMatchObject({
      code: "RUNLET_MANAGEMENT_BAD_RESPONSE",
      message:
        "GET /v2/serverless answer has an unexpected shape: endpoints[1].id: Invalid input: expected string, received undefined",
    });
  });

  it("sends v1 lookups to v1BaseUrl and only the flags that were given", async () => {
    const template = {
      id: "t1",
      name: "n",
      imageName: "i:1",
      isPublic: false,
      containerRegistryAuthId: null,
    };
    await using v1 = await startRecorder(() => ({ status: 200, body: template }));
    await using v2 = await startRecorder();
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: v2.url, v1BaseUrl: `${v1.url}/v1` });
    expect(
      await mgmt.getTemplate("t1", { includePublicTemplates: true, includeRunpodTemplates: false }),
    ).toEqual(template);
    expect(v2.requests).toEqual([]);
    expect(v1.requests.map((r) => [r.method, r.path, r.query])).toEqual([
      ["GET", "/v1/templates/t1", { includePublicTemplates: ["true"], includeRunpodTemplates: ["false"] }],
    ]);
  });

  it("offers only the template lookup and raw requests with version v1", async () => {
    await using server = await startRecorder(() => ({ status: 200, body: [] }));
    const v1 = createManagementClient({ apiKey: API_KEY, baseUrl: server.url, version: "v1" });
    expect(Object.keys(v1).sort()).toEqual(["describe", "getTemplate", "request", "version"]);
    expect(await v1.request({ method: "GET", path: "/pods" })).toEqual([]);
    expect(server.requests.map((r) => r.path)).toEqual(["/v1/pods"]);
  });

  it("describes a request with the key redacted", () => {
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: "http://127.0.0.1:9/v2/" });
    const described = mgmt.describe({
      method: "PATCH",
      path: "/serverless/e1",
      body: { workers: { max: 2 } },
    });
    expect(described).toEqual({
      method: "PATCH",
      url: "http://127.0.0.1:9/v2/serverless/e1",
      path: "/v2/serverless/e1",
      headers: expect.objectContaining({
        authorization: "Bearer [redacted]",
        "content-type": "application/json",
      }),
      body: '{"workers":{"max":2}}',
    });
    expect(JSON.stringify(described)).not.toContain(API_KEY);
  });
});
