import { describe, expect, it } from "vitest";
import { createManagementClient, type ManagementErrorDetails } from "../../src/management/index.js";
import { startManagementServer } from "../support/management-servers.js";

const API_KEY = "mgmt-test-key-123";
const FIXED_MS = Date.UTC(2026, 0, 2, 3, 4, 5);

async function failure(
  promise: Promise<unknown>,
): Promise<{ code: string; message: string; details: ManagementErrorDetails }> {
  try {
    await promise;
  } catch (err) {
    return err as { code: string; message: string; details: ManagementErrorDetails };
  }
  throw new Error("expected the call to fail");
}

describe("management client against the harness copy", () => {
  it("creates, lists, gets, updates and deletes templates in v2 field names", async () => {
    await using server = await startManagementServer({ apiKey: API_KEY, v1: true });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });

    const created = await mgmt.templates.create({
      name: "echo",
      image: "me/echo:1",
      disk: 5,
      env: { MODE: "fast" },
      ports: ["8000/http"],
      registry: "reg1",
    });
    expect(created).toMatchObject({
      name: "echo",
      image: "me/echo:1",
      disk: 5,
      public: false,
      env: { MODE: "fast" },
      ports: ["8000/http"],
      registry: "reg1",
    });
    expect(created).not.toHaveProperty("imageName");
    expect(created.id).toMatch(/^[a-z0-9]{10}$/);

    expect((await mgmt.templates.list()).map((t) => t.id)).toEqual([created.id]);
    expect(await mgmt.templates.get(created.id)).toEqual(created);

    const updated = await mgmt.templates.update(created.id, { image: "me/echo:2", public: true });
    expect(updated).toEqual({ ...created, image: "me/echo:2", public: true });

    // The v1 lookup sees the same template under v1 names.
    const v1 = await mgmt.getTemplate(created.id);
    expect(v1).toMatchObject({
      imageName: "me/echo:2",
      containerDiskInGb: 5,
      isPublic: true,
      containerRegistryAuthId: "reg1",
    });

    await mgmt.templates.delete(created.id);
    expect(await mgmt.templates.list()).toEqual([]);
    const gone = await failure(mgmt.templates.get(created.id));
    expect(gone.code).toBe("RUNLET_MANAGEMENT_HTTP");
    expect(gone.details).toMatchObject({
      status: 404,
      title: "Not Found",
      detail: `template ${created.id} not found`,
    });
  });

  it("creates, lists, gets, patches and deletes serverless endpoints and reports each to the hooks", async () => {
    const events: string[] = [];
    await using server = await startManagementServer({
      apiKey: API_KEY,
      v1: true,
      clock: () => FIXED_MS,
      onEndpointCreated: ({ endpoint }) => events.push(`created ${endpoint.id} ${endpoint["image"]}`),
      onEndpointUpdated: ({ endpoint }) => events.push(`updated ${endpoint.id} ${endpoint.workers?.max}`),
      onEndpointDeleted: (id) => events.push(`deleted ${id}`),
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: `${server.url}/v2` });
    const template = await mgmt.templates.create({ name: "tpl", image: "me/w:1", serverless: true });

    const endpoint = await mgmt.serverless.create({
      templateId: template.id,
      name: "ep",
      type: "QUEUE",
      gpu: { pools: ["AMPERE_16"], count: 1 },
      workers: { min: 0, max: 2 },
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      timeout: 60_000,
    });
    expect(endpoint).toMatchObject({
      id: endpoint.id,
      name: "ep",
      type: "QUEUE",
      image: "me/w:1",
      gpu: { pools: ["AMPERE_16"], count: 1, allowedCudaVersions: [], minCudaVersion: null },
      workers: { min: 0, max: 2, idleTimeout: 10 },
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      timeout: 60_000,
      flashboot: "OFF",
      createdAt: "2026-01-02T03:04:05.000Z",
    });
    expect(endpoint.id).toMatch(/^[a-z0-9]{14}$/);
    expect(await mgmt.serverless.list()).toEqual([endpoint]);
    expect(await mgmt.serverless.get(endpoint.id)).toEqual(endpoint);

    const patched = await mgmt.serverless.update(endpoint.id, {
      workers: { max: 5 },
      gpu: { pools: ["ADA_24"], excludedTypes: ["NVIDIA L4"] },
    });
    expect(patched.workers).toEqual({ min: 0, max: 5, idleTimeout: 10 });
    expect(patched).toMatchObject({ gpu: { pools: ["ADA_24"], excludedTypes: ["NVIDIA L4"], count: 1 } });
    // The compute family is fixed at create: a GPU endpoint refuses a cpu.
    const family = await failure(
      mgmt.serverless.update(endpoint.id, { cpu: [{ id: "cpu3c", vcpuCount: 2 }] }),
    );
    expect(family.details).toMatchObject({ status: 400 });

    await mgmt.serverless.delete(endpoint.id);
    expect(await mgmt.serverless.list()).toEqual([]);
    expect(events).toEqual([
      `created ${endpoint.id} me/w:1`,
      `updated ${endpoint.id} 5`,
      `deleted ${endpoint.id}`,
    ]);
  });

  it("looks a v1 template up only when the include flag for its kind is set", async () => {
    await using server = await startManagementServer({
      apiKey: API_KEY,
      v1: true,
      templates: [
        { id: "official1", name: "official", imageName: "op/base:1", owner: "runpod" },
        { id: "community1", name: "shared", imageName: "someone/x:1", owner: "community" },
        { id: "mine1", name: "mine", imageName: "me/y:1", isServerless: true },
      ],
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    await mgmt.serverless.create({
      name: "ep",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      templateId: "mine1",
      gpu: { pools: ["ADA_24"] },
    });

    for (const [id, flag] of [
      ["official1", "includeRunpodTemplates"],
      ["community1", "includePublicTemplates"],
      ["mine1", "includeEndpointBoundTemplates"],
    ] as const) {
      const hidden = await failure(mgmt.getTemplate(id));
      expect(hidden.details).toMatchObject({ status: 404, detail: `template ${id} not found`, errors: [] });
      const found = await mgmt.getTemplate(id, { [flag]: true });
      expect(found.id).toBe(id);
    }
    const official = await mgmt.getTemplate("official1", { includeRunpodTemplates: true });
    expect(official).toEqual({
      id: "official1",
      name: "official",
      imageName: "op/base:1",
      category: "NVIDIA",
      containerDiskInGb: 20,
      volumeInGb: 0,
      volumeMountPath: "/workspace",
      dockerEntrypoint: [],
      dockerStartCmd: [],
      env: {},
      ports: [],
      readme: "",
      isPublic: true,
      isRunpod: true,
      isServerless: false,
      earned: 0,
      runtimeInMin: 0,
    });
  });

  it("turns v1 {message} answers (400 invalid id, 401) into RUNLET_MANAGEMENT_HTTP", async () => {
    await using server = await startManagementServer({ apiKey: API_KEY, v1: true });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    const invalid = await failure(mgmt.getTemplate("not valid!"));
    expect(invalid.details).toEqual({
      status: 400,
      title: "Bad Request",
      detail: 'invalid template id "not valid!"',
      errors: [],
      method: "GET",
      path: "/v1/templates/not%20valid!",
    });
    const wrongKey = createManagementClient({ apiKey: "wrong-key-456", baseUrl: server.url });
    const unauthorized = await failure(wrongKey.getTemplate("abc"));
    expect(unauthorized.details).toMatchObject({ status: 401, title: "Unauthorized" });
    expect(unauthorized.message).toContain("check the API key");
    expect(unauthorized.message).not.toContain("wrong-key-456");
  });

  it("turns v2 problems (422 with errors, 400, 401, 403, 404) into RUNLET_MANAGEMENT_HTTP with every message", async () => {
    await using server = await startManagementServer({
      apiKey: API_KEY,
      v1: true,
      templates: [{ id: "community1", name: "shared", imageName: "someone/x:1", owner: "community" }],
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    // A raw request skips client-side validation, so the server's problem comes back.
    const bad = await failure(
      mgmt.request({ method: "POST", path: "/serverless", body: { name: "x", cpu: {} } }),
    );
    expect(bad.code).toBe("RUNLET_MANAGEMENT_HTTP");
    expect(bad.details).toEqual({
      status: 422,
      title: "Unprocessable Entity",
      detail: "Request validation failed.",
      errors: [
        "$: must have required property 'image'",
        "$: must have required property 'type'",
        "$: must have required property 'scaling'",
        "$.cpu: must be array",
      ],
      method: "POST",
      path: "/v2/serverless",
    });
    const forbidden = await failure(mgmt.templates.update("community1", { name: "mine now" }));
    expect(forbidden.details).toMatchObject({
      status: 403,
      title: "Forbidden",
      detail: "template community1 is not yours to change",
    });
    const unknownTemplate = await failure(
      mgmt.serverless.create({
        name: "ep",
        type: "QUEUE",
        scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
        templateId: "nope1",
        gpu: { pools: ["ADA_24"] },
      }),
    );
    expect(unknownTemplate.details).toMatchObject({ status: 404, detail: "template nope1 not found" });
    const dup = await mgmt.templates.create({ name: "one", image: "a/b:1", serverless: true });
    const clash = await failure(mgmt.templates.create({ name: "one", image: "a/b:2" }));
    expect(clash.details).toMatchObject({
      status: 400,
      errors: ['name: a template named "one" already exists'],
    });
    await mgmt.serverless.create({
      name: "ep",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      templateId: dup.id,
      gpu: { pools: ["ADA_24"] },
    });
    const inUse = await failure(mgmt.templates.delete(dup.id));
    expect(inUse.details).toMatchObject({ status: 400 });
    const wrongKey = createManagementClient({ apiKey: "wrong-key-456", baseUrl: server.url });
    const unauthorized = await failure(wrongKey.serverless.list());
    expect(unauthorized.details).toMatchObject({
      status: 401,
      title: "Unauthorized",
      path: "/v2/serverless",
    });
  });
});
