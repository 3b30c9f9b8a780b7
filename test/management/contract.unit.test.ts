import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createManagementRoutes } from "../../src/harness/management-api/index.js";
import {
  type DeploySpec,
  networkVolumeCreateSchema,
  planDeploy,
  registryCreateSchema,
  serverlessCreateSchema,
  serverlessUpdateSchema,
  templateCreateSchema,
  templateUpdateSchema,
} from "../../src/management/index.js";
import { DOCUMENT, type Json, problemsOf, requestExamples } from "./document.js";

/**
 * The contract suite: runlet's management bodies and the harness's answers against the platform's
 * published v2 OpenAPI document (openapi/runpod-v2.json), validated with a JSON Schema 2020-12
 * validator (Ajv's 2020 build, ajv-formats for `uri` and `date-time`). When the copy of the
 * document is refreshed, this suite says what changed.
 */

const KEY = "contract-key";
function harness() {
  const routes = createManagementRoutes({ apiKey: KEY });
  const call = (method: string, path: string, body?: unknown) => {
    const answer = routes.handle({
      method,
      path,
      headers: { authorization: `Bearer ${KEY}`, host: "127.0.0.1:8000" },
      body: body === undefined ? "" : JSON.stringify(body),
    });
    if (answer === undefined) throw new Error(`${path} is not a management path`);
    return {
      status: answer.status,
      type: answer.headers["content-type"],
      body: answer.body === "" ? undefined : JSON.parse(answer.body),
    };
  };
  return { routes, call };
}

const GPU_SPEC: DeploySpec = {
  name: "echo",
  image: "me/echo:1.0.0",
  gpu: { pools: ["ADA_24"], count: 1 },
  executionTimeoutMs: 600_000,
};
/** Every kind of body `runlet deploy` plans, as a new user would ask for it. */
const DEPLOYS: [string, DeploySpec, { templateId?: string; endpointId?: string }][] = [
  ["a GPU pool", GPU_SPEC, {}],
  [
    "a CPU flavour",
    {
      name: "cpu",
      image: "me/cpu:1",
      cpu: [
        { id: "cpu5c", vcpuCount: 4 },
        { id: "cpu5g", vcpuCount: 8 },
      ],
      executionTimeoutMs: 120_000,
    },
    {},
  ],
  [
    "queue-delay scaling",
    {
      ...GPU_SPEC,
      scaling: { type: "QUEUE_DELAY", queueDelay: 2.5 },
      workers: { min: 1, max: 5, idleTimeout: 30 },
    },
    {},
  ],
  [
    "a handler with fixed concurrency",
    { ...GPU_SPEC, scaling: { type: "REQUEST_COUNT", requestCount: 8 } },
    {},
  ],
  [
    "GPU types excluded, CUDA, flashboot, volumes, data centers, a registry",
    {
      ...GPU_SPEC,
      gpu: {
        pools: ["ADA_24"],
        excludedTypes: ["NVIDIA L4"],
        count: 2,
        allowedCudaVersions: ["12.8", "12.6"],
      },
      flashboot: "FLASHBOOT",
      networkVolumes: ["vol1"],
      dataCenterIds: ["US-KS-2"],
      registryId: "reg_1",
      env: { A: "1" },
      diskGb: 30,
    },
    {},
  ],
  [
    "a load-balancing endpoint",
    {
      ...GPU_SPEC,
      type: "LOAD_BALANCER",
      env: { PORT: "8080" },
      ports: ["8080/http"],
      scaling: { type: "REQUEST_COUNT", requestCount: 4 },
    },
    {},
  ],
  [
    "an update by ids",
    { ...GPU_SPEC, gpu: { pools: ["ADA_24", "AMPERE_24"], minCudaVersion: "12.1" } },
    { templateId: "t1", endpointId: "e1" },
  ],
  [
    "an update of a CPU endpoint",
    { name: "cpu", image: "me/cpu:2", cpu: [{ id: "cpu5c", vcpuCount: 2 }] },
    { templateId: "t1", endpointId: "e1" },
  ],
];

describe("what runlet deploy plans, against the document's request schemas", () => {
  for (const [what, spec, existing] of DEPLOYS) {
    it(`${what}: every body validates, the template is serverless with SSH and Jupyter off, the timeout is the handler's`, () => {
      const [template, endpoint] = planDeploy(spec, existing);
      const templateSchema = template.action === "create" ? "CreateTemplateRequest" : "UpdateTemplateRequest";
      const endpointSchema = endpoint.action === "create" ? "CreateEndpointRequest" : "UpdateEndpointRequest";
      expect(problemsOf(templateSchema, template.body)).toEqual([]);
      expect(problemsOf(endpointSchema, endpoint.body)).toEqual([]);
      expect(template.body).toMatchObject({ serverless: true, startSsh: false, startJupyter: false });
      expect((endpoint.body as Json)["timeout"]).toBe(spec.executionTimeoutMs);
      expect(endpoint.body).not.toHaveProperty("executionTimeoutMs");
      if (endpoint.action === "create") expect((endpoint.body as Json)["type"]).toBe(spec.type ?? "QUEUE");
    });
  }

  it("broken on purpose: an unknown field in a deploy body, and the old field names, are refused by the document", () => {
    const [template, endpoint] = planDeploy(GPU_SPEC, {});
    expect(problemsOf("CreateTemplateRequest", { ...template.body, isServerless: true }).join()).toMatch(
      /unevaluated properties/,
    );
    expect(problemsOf("CreateEndpointRequest", { ...endpoint.body, executionTimeoutMs: 1 })).not.toEqual([]);
    const { type: _type, ...untyped } = endpoint.body as Json;
    expect(problemsOf("CreateEndpointRequest", untyped).join()).toMatch(/required property 'type'/);
    expect(
      problemsOf("CreateEndpointRequest", { ...endpoint.body, gpu: { id: "NVIDIA L4", count: 1 } }),
    ).not.toEqual([]);
    expect(
      problemsOf("CreateEndpointRequest", { ...endpoint.body, scaling: { type: "QUEUE_DELAY", value: 4 } }),
    ).not.toEqual([]);
  });
});

describe("the client's hand-kept zod schemas, against the document", () => {
  const cuda = fc.constantFrom("12.8", "12.6", "12.1", "11.8", "12", "");
  const gpu = fc.record(
    {
      pools: fc.array(fc.constantFrom("ADA_24", "AMPERE_80"), { maxLength: 2 }),
      count: fc.integer({ min: 0, max: 8 }),
      excludedTypes: fc.array(fc.constantFrom("NVIDIA L4", "NVIDIA L40", "-x"), { maxLength: 2 }),
      allowedCudaVersions: fc.array(cuda, { maxLength: 2 }),
      minCudaVersion: cuda,
    },
    { requiredKeys: [] },
  );
  const container = {
    image: fc.string(),
    args: fc.string(),
    disk: fc.integer({ min: 0, max: 500 }),
    env: fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
    ports: fc.array(fc.constantFrom("8080/http", "22/tcp", "8888/http"), { maxLength: 2 }),
    registry: fc.option(fc.string(), { nil: null }),
  };
  const endpointFields = {
    ...container,
    name: fc.string({ minLength: 1 }),
    templateId: fc.string({ minLength: 1 }),
    gpu,
    cpu: fc.uniqueArray(
      fc.record({ id: fc.constantFrom("cpu5c", "cpu3g"), vcpuCount: fc.constantFrom(1, 2, 4, 8) }),
      { minLength: 1, maxLength: 3, selector: (c) => `${c.id}:${c.vcpuCount}` },
    ),
    scaling: fc.oneof(
      fc.record({
        type: fc.constant("QUEUE_DELAY"),
        queueDelay: fc.double({ min: 0, max: 60, noNaN: true }),
      }),
      fc.record({ type: fc.constant("REQUEST_COUNT"), requestCount: fc.integer({ min: 0, max: 100 }) }),
    ),
    workers: fc.record(
      {
        min: fc.integer({ min: -1, max: 5 }),
        max: fc.integer({ min: 0, max: 10 }),
        idleTimeout: fc.integer({ min: 0, max: 4000 }),
      },
      { requiredKeys: [] },
    ),
    timeout: fc.integer({ min: 1, max: 3_600_000 }),
    flashboot: fc.constantFrom("OFF", "FLASHBOOT", "PRIORITY_FLASHBOOT"),
    networkVolumes: fc.array(fc.string(), { maxLength: 2 }),
    dataCenterIds: fc.array(fc.string(), { maxLength: 2 }),
  };
  const PROPERTY_CASES = [
    [
      "CreateEndpointRequest",
      serverlessCreateSchema,
      fc.record(
        { ...endpointFields, type: fc.constantFrom("QUEUE", "LOAD_BALANCER") },
        { requiredKeys: ["name", "type", "scaling"] },
      ),
    ],
    ["UpdateEndpointRequest", serverlessUpdateSchema, fc.record(endpointFields, { requiredKeys: [] })],
    [
      "CreateTemplateRequest",
      templateCreateSchema,
      fc.record(
        {
          ...container,
          name: fc.string({ minLength: 1 }),
          image: fc.string({ minLength: 1 }),
          serverless: fc.boolean(),
          startSsh: fc.boolean(),
          startJupyter: fc.boolean(),
          public: fc.boolean(),
          category: fc.constantFrom("CPU", "NVIDIA", "AMD"),
          allowedCudaVersions: fc.array(cuda, { maxLength: 2 }),
          mounts: fc.record(
            { persistent: fc.record({ size: fc.integer({ min: 5, max: 100 }), path: fc.string() }) },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: ["name", "image"] },
      ),
    ],
  ] as const;

  for (const [name, zod, bodies] of PROPERTY_CASES) {
    it(`${name}: every body the zod schema lets the client send, the document accepts (property)`, () => {
      let sent = 0;
      fc.assert(
        fc.property(bodies as fc.Arbitrary<Json>, (body) => {
          const parsed = (zod as { safeParse(v: unknown): { success: boolean; data?: unknown } }).safeParse(
            body,
          );
          if (!parsed.success) return;
          sent++;
          expect(problemsOf(name, parsed.data)).toEqual([]);
        }),
        { numRuns: 2000 },
      );
      // Bodies on both sides of each limit are generated: enough pass the client's checks that the
      // property is not vacuous.
      expect(sent).toBeGreaterThan(20);
    });
  }

  const SCHEMAS = [
    ["CreateEndpointRequest", serverlessCreateSchema, "/v2/serverless", "post"],
    ["UpdateEndpointRequest", serverlessUpdateSchema, "/v2/serverless/{id}", "patch"],
    ["CreateTemplateRequest", templateCreateSchema, "/v2/templates", "post"],
    ["UpdateTemplateRequest", templateUpdateSchema, "/v2/templates/{id}", "patch"],
    ["CreateNetworkVolumeRequest", networkVolumeCreateSchema, "/v2/network-volumes", "post"],
    ["CreateRegistryRequest", registryCreateSchema, "/v2/registries", "post"],
  ] as const;

  /** Every property name a schema allows at its top level, through `allOf` and `$ref`s. */
  function propertyNames(schema: Json): string[] {
    const ref = schema["$ref"];
    if (typeof ref === "string") return propertyNames(DOCUMENT.components.schemas[ref.split("/").pop()!]!);
    const own = Object.keys((schema["properties"] as Json | undefined) ?? {});
    const nested = ((schema["allOf"] as Json[] | undefined) ?? []).flatMap(propertyNames);
    return [...new Set([...own, ...nested])].sort();
  }

  for (const [name, zod, path, method] of SCHEMAS) {
    it(`${name}: the same field names, and the document's examples accepted`, () => {
      const shape = (zod as unknown as { def: { in?: { shape: Json }; shape?: Json } }).def;
      const fields = Object.keys(shape.shape ?? shape.in?.shape ?? {}).sort();
      expect(fields).toEqual(propertyNames(DOCUMENT.components.schemas[name]!));
      for (const [example, value] of requestExamples(path, method)) {
        expect(problemsOf(name, value), example).toEqual([]);
        expect(zod.safeParse(value).success, example).toBe(true);
      }
    });
  }

  it("refuses what the document refuses: unknown fields, old shapes, a load balancer on queue delay", () => {
    const body = requestExamples("/v2/serverless", "post")[0]![1] as Json;
    const refused: Json[] = [
      { ...body, bogus: 1 },
      { ...body, gpu: { id: "NVIDIA L4" } },
      { ...body, scaling: { type: "QUEUE_DELAY", value: 4 } },
      { ...body, type: "LOAD_BALANCER" },
      { ...body, workers: { min: 0, max: 3, idleTimeout: 0 } },
      { ...body, cpu: [{ id: "cpu5c" }] },
    ];
    for (const value of refused) {
      expect(problemsOf("CreateEndpointRequest", value), JSON.stringify(value)).not.toEqual([]);
      expect(serverlessCreateSchema.safeParse(value).success, JSON.stringify(value)).toBe(false);
    }
  });
});

describe("the harness's copy, against the document", () => {
  it("(the validator as set up here accepts the document's own answer examples)", () => {
    const created = DOCUMENT.paths["/v2/serverless"]!["post"]!["responses"] as Record<
      string,
      { content: { "application/json": { examples: Record<string, { value: unknown }> } } }
    >;
    const examples = Object.values(created["201"]!.content["application/json"].examples);
    expect(examples.length).toBeGreaterThan(0);
    for (const example of examples) expect(problemsOf("Endpoint", example.value)).toEqual([]);
  });

  it("accepts the document's own request examples and answers them per its response schemas", () => {
    const { call } = harness();
    for (const [example, value] of requestExamples("/v2/templates", "post")) {
      const res = call("POST", "/v2/templates", value);
      expect(res.status, example).toBe(201);
      expect(problemsOf("Template", res.body), example).toEqual([]);
      for (const [rename, patch] of requestExamples("/v2/templates/{id}", "patch")) {
        const updated = call("PATCH", `/v2/templates/${res.body.id}`, patch);
        expect(updated.status, rename).toBe(200);
        expect(problemsOf("Template", updated.body), rename).toEqual([]);
      }
    }
    for (const [example, value] of requestExamples("/v2/serverless", "post")) {
      const res = call("POST", "/v2/serverless", value);
      expect(res.status, example).toBe(201);
      expect(problemsOf("Endpoint", res.body), example).toEqual([]);
      expect(res.body).toMatchObject({ flashboot: "OFF", timeout: 300_000, type: "QUEUE" });
      expect(res.body.requestUrls.runSync).toBe(`http://127.0.0.1:8000/v2/${res.body.id}/runsync`);
      for (const [scale, patch] of requestExamples("/v2/serverless/{id}", "patch")) {
        const updated = call("PATCH", `/v2/serverless/${res.body.id}`, patch);
        expect(updated.status, scale).toBe(200);
        expect(problemsOf("Endpoint", updated.body), scale).toEqual([]);
      }
      const workers = call("GET", `/v2/serverless/${res.body.id}/workers`);
      expect(workers.status).toBe(200);
      expect(problemsOf("ListEndpointWorkersResponse", workers.body)).toEqual([]);
      const releases = call("GET", `/v2/serverless/${res.body.id}/releases`);
      expect(releases.status).toBe(200);
      expect(problemsOf("ListEndpointReleasesResponse", releases.body)).toEqual([]);
    }
    expect(problemsOf("ListEndpointsResponse", call("GET", "/v2/serverless").body)).toEqual([]);
    expect(problemsOf("ListTemplatesResponse", call("GET", "/v2/templates").body)).toEqual([]);
  });

  it("accepts the network-volume and registry examples and answers them per the document, credentials left out", () => {
    const { call } = harness();
    for (const [example, value] of requestExamples("/v2/network-volumes", "post")) {
      const res = call("POST", "/v2/network-volumes", value);
      expect(res.status, example).toBe(201);
      expect(problemsOf("NetworkVolume", res.body)).toEqual([]);
      for (const [resize, patch] of requestExamples("/v2/network-volumes/{id}", "patch")) {
        const updated = call("PATCH", `/v2/network-volumes/${res.body.id}`, patch);
        expect(updated.status, resize).toBe(200);
        expect(problemsOf("NetworkVolume", updated.body)).toEqual([]);
      }
      const shrink = call("PATCH", `/v2/network-volumes/${res.body.id}`, { size: 10 });
      expect(shrink.status).toBe(400);
    }
    expect(problemsOf("ListNetworkVolumesResponse", call("GET", "/v2/network-volumes").body)).toEqual([]);
    for (const [example, value] of requestExamples("/v2/registries", "post")) {
      const res = call("POST", "/v2/registries", value);
      expect(res.status, example).toBe(201);
      expect(problemsOf("Registry", res.body)).toEqual([]);
      expect(JSON.stringify(res.body)).not.toContain((value as Json)["password"] as string);
      expect(call("GET", `/v2/registries/${res.body.id}`).body).toEqual(res.body);
    }
    expect(problemsOf("ListRegistriesResponse", call("GET", "/v2/registries").body)).toEqual([]);
    const unknown = call("POST", "/v2/network-volumes", { name: "v", dataCenter: "EU-RO-1", size: 5 });
    expect(unknown.status).toBe(422);
    expect(problemsOf("ErrorResponse", unknown.body)).toEqual([]);
  });

  it("answers the catalog from its table, per the document's schemas", () => {
    const { call } = harness();
    expect(problemsOf("ListGpuTypesResponse", call("GET", "/v2/catalog/gpus").body)).toEqual([]);
    expect(
      problemsOf("GpuType", call("GET", `/v2/catalog/gpus/${encodeURIComponent("NVIDIA L4")}`).body),
    ).toEqual([]);
    expect(problemsOf("ListCpuTypesResponse", call("GET", "/v2/catalog/cpus").body)).toEqual([]);
    expect(problemsOf("ListDataCentersResponse", call("GET", "/v2/catalog/datacenters").body)).toEqual([]);
    const missing = call("GET", "/v2/catalog/gpus/nope");
    expect(missing.status).toBe(404);
    expect(problemsOf("ErrorResponse", missing.body)).toEqual([]);
  });

  it("creates what runlet deploy plans (template, then endpoint) and answers per the document", () => {
    const { call } = harness();
    for (const [what, spec] of DEPLOYS.filter(([, , e]) => e.endpointId === undefined)) {
      const [template, endpoint] = planDeploy({ ...spec, name: `${spec.name}-${what}` }, {});
      const t = call("POST", "/v2/templates", template.body);
      expect(t.status, what).toBe(201);
      expect(problemsOf("Template", t.body)).toEqual([]);
      const e = call("POST", "/v2/serverless", { ...endpoint.body, templateId: t.body.id });
      expect(e.status, `${what}: ${JSON.stringify(e.body)}`).toBe(201);
      expect(problemsOf("Endpoint", e.body)).toEqual([]);
      expect(e.body.timeout).toBe(spec.executionTimeoutMs);
    }
  });

  it("refuses what the document refuses, with RFC 9457 problems", () => {
    const { call } = harness();
    const body = requestExamples("/v2/serverless", "post")[0]![1] as Json;
    const cases: [Json, number, RegExp][] = [
      [{ ...body, bogus: 1 }, 422, /additional properties 'bogus' not allowed/],
      [{ ...body, type: undefined }, 422, /type/],
      [{ ...body, gpu: { id: "NVIDIA L4", count: 1 } }, 422, /pools|id/],
      [{ ...body, scaling: { type: "QUEUE_DELAY", value: 4 } }, 422, /queueDelay|value/],
      [{ ...body, type: "LOAD_BALANCER" }, 422, /requestCount|REQUEST_COUNT/],
      [{ ...body, executionTimeoutMs: 600000 }, 422, /executionTimeoutMs/],
      [{ ...body, cpu: [{ id: "cpu5c", vcpuCount: 4 }] }, 400, /gpu or cpu/],
      [{ ...body, scaling: { type: "REQUEST_COUNT", requestCount: 2 } }, 400, /idleTimeout/],
      [
        { ...body, gpu: { pools: ["ADA_24"], allowedCudaVersions: ["12.8"], minCudaVersion: "12.1" } },
        400,
        /mutually exclusive/,
      ],
    ];
    for (const [value, status, message] of cases) {
      const res = call("POST", "/v2/serverless", JSON.parse(JSON.stringify(value)));
      expect(res.status, JSON.stringify(value)).toBe(status);
      expect(res.type).toBe("application/problem+json");
      expect(problemsOf("ErrorResponse", res.body)).toEqual([]);
      expect(JSON.stringify(res.body.errors), JSON.stringify(value)).toMatch(message);
    }
    const template = call("POST", "/v2/templates", { name: "t", image: "me/t:1", isServerless: true });
    expect(template.status).toBe(422);
    expect(template.body.errors).toContain("$: additional properties 'isServerless' not allowed");
  });

  it("broken on purpose: a harness answer with a required field dropped fails the response schema", () => {
    const { call } = harness();
    const created = call("POST", "/v2/serverless", requestExamples("/v2/serverless", "post")[0]![1]);
    expect(problemsOf("Endpoint", created.body)).toEqual([]);
    for (const field of ["timeout", "flashboot", "networkVolumes", "dataCenterIds", "workers"]) {
      const { [field]: _dropped, ...broken } = created.body as Json;
      expect(problemsOf("Endpoint", broken).join(), field).toMatch(
        new RegExp(`required property '${field}'`),
      );
    }
    const template = call("POST", "/v2/templates", { name: "t", image: "me/t:1" }).body as Json;
    for (const field of ["args", "registry", "startSsh", "startJupyter", "serverless"]) {
      const { [field]: _dropped, ...broken } = template;
      expect(problemsOf("Template", broken).join(), field).toMatch(
        new RegExp(`required property '${field}'`),
      );
    }
  });
});
