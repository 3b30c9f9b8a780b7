import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configFromEnv } from "../../examples/llm/handler.js";
import { RUNLET_ROOT } from "../../src/cli/paths.js";
import { declaredFileRules, PackagePruner } from "../../src/cli/prune-externals.js";

const read = (file: string) => readFileSync(join(RUNLET_ROOT, file), "utf8");

describe("the llm starter", () => {
  it("is the one source of the example: each example file only re-exports the starter's", () => {
    for (const file of ["handler.ts", "llm.ts", "tiny-model.ts"]) {
      const example = read(`examples/llm/${file}`);
      const from = `"../../templates/llm/src/${file.replace(/\.ts$/, ".js")}"`;
      // Comment lines, then one export statement from the starter's file: no code of its own.
      const code = example.replace(/^\/\/.*$/gm, "").trim();
      expect(code, file).toMatch(/^export \{[^}]*\} from "[^"]+";$/);
      expect(code.endsWith(`from ${from};`), file).toBe(true);
    }
  });

  it("pins node-llama-cpp at the version runlet is tested with, and declares it external", () => {
    const starter = JSON.parse(read("templates/llm/package.json")) as {
      dependencies: Record<string, string>;
      runlet: { externals: string[] };
    };
    const runlet = JSON.parse(read("package.json")) as { devDependencies: Record<string, string> };
    expect(starter.dependencies["node-llama-cpp"]).toBe("3.21.1");
    expect(runlet.devDependencies["node-llama-cpp"]).toBe("3.21.1");
    expect(starter.runlet.externals).toEqual(["node-llama-cpp"]);
  });

  it("leaves node-llama-cpp's llama.cpp sources (for building from source) out of dist/node_modules, and nothing it loads", async () => {
    // The file is there in the version the starter pins (else the rule is stale), and the starter's
    // rules, as runlet build reads them, leave it out; the package's entry points and its binaries'
    // loader stay.
    const dir = join(RUNLET_ROOT, "node_modules", "node-llama-cpp");
    expect(existsSync(join(dir, "llama", "gitRelease.bundle"))).toBe(true);
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as object;
    const pruner = await PackagePruner.create(
      dir,
      manifest,
      await declaredFileRules(join(RUNLET_ROOT, "templates/llm")),
      true,
    );
    expect(pruner.reason("llama/gitRelease.bundle", false)).toBe("excluded in package.json");
    expect(pruner.reason("llama", true)).toBeUndefined();
    expect(pruner.reason("llama/binariesGithubRelease.json", false)).toBeUndefined();
    expect(pruner.reason("dist/index.js", false)).toBeUndefined();
  });

  it("asks, in test_input.json and the hub's test, for the model a worker with no LLM_MODEL serves", () => {
    const id = configFromEnv({}).modelId;
    const input = JSON.parse(read("templates/llm/test_input.json")) as {
      input: { openai_input: { model: string } };
    };
    expect(input.input.openai_input.model).toBe(id);
    const hub = JSON.parse(read("templates/llm/.runpod/tests.json")) as {
      config: { env: { key: string; value: string }[] };
    };
    expect(configFromEnv(Object.fromEntries(hub.config.env.map((e) => [e.key, e.value]))).modelId).toBe(id);
  });
});
