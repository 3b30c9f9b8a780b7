import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RUNLET_ROOT, TEMPLATE_NAMES } from "../../src/cli/paths.js";

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
