import { describe, expect, it } from "vitest";
import {
  createManagementClient,
  type ServerlessCreateInput,
  type TemplateV1,
  templateV1ToV2,
  templateV2ToV1,
} from "../../src/management/index.js";
import { rejection, startRecorder } from "../support/management-servers.js";

const API_KEY = "validation-key-1";

const invalid = rejection;

describe("client-side validation", () => {
  it("refuses bad bodies before anything is sent, naming each bad field", async () => {
    await using server = await startRecorder();
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    const cases: Array<[Promise<unknown>, string, string]> = [
      [
        mgmt.pods.create({ name: "p", image: "i:1", gpu: { id: "A" }, cpu: { id: "c" } }),
        "gpu",
        "pod is invalid: gpu: set exactly one of gpu or cpu, not both",
      ],
      [
        mgmt.pods.create({ name: "p", image: "i:1" }),
        "gpu",
        "pod is invalid: gpu: set exactly one of gpu or cpu; neither was given",
      ],
      [
        mgmt.pods.create({ name: "p", image: "i:1", cpu: {}, ports: ["8888/http", "22/udp"] }),
        "ports[1]",
        'pod is invalid: ports[1]: must be "<port>/http" or "<port>/tcp" with a port 1-65535, got "22/udp"',
      ],
      [
        mgmt.templates.create({ name: "t", image: "i:1", ports: ["70000/tcp"] }),
        "ports[0]",
        'template is invalid: ports[0]: must be "<port>/http" or "<port>/tcp" with a port 1-65535, got "70000/tcp"',
      ],
      [
        mgmt.templates.create({ name: "t", image: "i:1", env: { PORT: 8000 as unknown as string } }),
        "env.PORT",
        "template is invalid: env.PORT: env values must be strings, got number",
      ],
      [
        mgmt.serverless.create({
          name: "e",
          type: "QUEUE",
          scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
          gpu: { pools: ["ADA_24"] },
        }),
        "image",
        "serverless endpoint is invalid: image: image is required when no templateId is given",
      ],
      [
        mgmt.templates.create({ name: "t", image: "i:1", isServerless: true } as never),
        "(body)",
        'template is invalid: (body): Unrecognized key: "isServerless"',
      ],
      [
        mgmt.serverless.create({
          name: "e",
          type: "LOAD_BALANCER",
          image: "i:1",
          scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
          cpu: [{ id: "cpu5c", vcpuCount: 2 }],
        }),
        "scaling.type",
        "serverless endpoint is invalid: scaling.type: a LOAD_BALANCER endpoint must scale on REQUEST_COUNT",
      ],
      [
        mgmt.serverless.update("e1", { workers: { min: 3, max: 1 } }),
        "workers.max",
        "serverless endpoint update is invalid: workers.max: workers.min must be ≤ workers.max",
      ],
      [
        mgmt.networkVolumes.create({ name: "v", dataCenter: "EU", size: 10, type: "FAST" as "STANDARD" }),
        "type",
        'network volume is invalid: type: type must be STANDARD or HIGH_PERFORMANCE, got "FAST"',
      ],
      [
        mgmt.pods.action("p1", "reset" as "start"),
        "(body)",
        'pod action is invalid: (body): action must be one of start, stop, restart, terminate, got "reset"',
      ],
      [mgmt.serverless.get(""), "id", 'id must be a non-empty string, got ""'],
    ];
    for (const [promise, field, message] of cases) {
      const err = await invalid(promise);
      expect({ code: err.code, message: err.message, field: err.details["field"] }).toEqual({
        code: "RUNLET_MANAGEMENT_INVALID",
        message,
        field,
      });
    }
    expect(server.requests).toEqual([]);
  });

  it("accepts a serverless endpoint from a template alone, without image", async () => {
    await using server = await startRecorder(() => ({ status: 201, body: { id: "e1", name: "e" } }));
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    const body: ServerlessCreateInput = {
      name: "e",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      templateId: "t1",
      gpu: { pools: ["ADA_24"] },
      workers: { min: 1, max: 1 },
    };
    await mgmt.serverless.create(body);
    expect(JSON.parse(server.requests[0]!.body)).toEqual(body);
  });
});

describe("template mapping between v1 and v2", () => {
  const v1: TemplateV1 = {
    id: "t1",
    name: "echo",
    imageName: "me/echo:1",
    containerDiskInGb: 20,
    isPublic: true,
    containerRegistryAuthId: "auth9",
    env: { A: "1" },
    ports: ["8000/http"],
    isServerless: true,
    readme: "# hi",
  };

  it("renames the fields the v2 document names differently and keeps the rest", () => {
    expect(templateV1ToV2(v1)).toEqual({
      id: "t1",
      name: "echo",
      image: "me/echo:1",
      disk: 20,
      public: true,
      registry: "auth9",
      env: { A: "1" },
      ports: ["8000/http"],
      serverless: true,
      readme: "# hi",
      mounts: {},
    });
  });

  it("maps back to the same v1 template", () => {
    expect(templateV2ToV1(templateV1ToV2(v1))).toEqual(v1);
  });

  it("answers registry null when the v1 template has no registry auth, and a volume as a persistent mount", () => {
    expect(
      templateV1ToV2({
        id: "t",
        name: "n",
        imageName: "i",
        containerRegistryAuthId: null,
        volumeInGb: 20,
        volumeMountPath: "/data",
      }),
    ).toEqual({
      id: "t",
      name: "n",
      image: "i",
      registry: null,
      mounts: { persistent: { size: 20, path: "/data" } },
    });
  });
});
