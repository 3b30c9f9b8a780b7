import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * Type-checks every ```ts block of README.md and docs/*.md against the current sources, so the
 * examples stay true to the API. A block fenced ```ts illustrative (a shape, not code) is skipped.
 * Placeholders the examples assume (a model, a key) are declared in PRELUDE; `runlet` and its
 * subpaths resolve to src/, a handler an example imports is examples/echo's, and a model loader
 * (./model.js) is the prelude's loadModel.
 */

/**
 * Names the examples use without defining them: "your code goes here" placeholders (a model, a
 * renderer) and values a reader already has (a key, a job id, vitest's it/expect). Written next to
 * the blocks at run time rather than kept as a .d.ts under test/, where its globals would leak
 * into every test file's type-check.
 */
const PRELUDE = `import type { Client, EndpointClient } from "../../src/client/index.js";
import type { WorkerSpawner } from "../../src/harness/index.js";

declare global {
  const defineHandler: typeof import("../../src/index.js").defineHandler;
  const WorkerUnfitError: typeof import("../../src/index.js").WorkerUnfitError;
  const z: typeof import("zod").z;
  const it: typeof import("vitest").it;
  const expect: typeof import("vitest").expect;
  const client: Client;
  const spawn: WorkerSpawner;
  function render(input: unknown, options?: { signal?: AbortSignal }): Promise<Buffer>;
  function generate(input: unknown, options?: { signal?: AbortSignal }): AsyncIterable<string>;
  function gpuOk(): Promise<boolean>;
  function gpuNeedsReset(): Promise<boolean>;
  function myModel(messages: unknown, signal: AbortSignal): AsyncIterable<string>;
  const messages: { role: "user"; content: string }[];
  const base: string;
  const endpointId: string;
  function gpuResponds(options: { signal: AbortSignal }): Promise<boolean>;
  function loadModel(options: { signal: AbortSignal; onProgress(percent: number): void }): Promise<{
    run(text: string, options: { signal: AbortSignal }): Promise<string>;
    release(): Promise<void>;
  }>;
  const apiKey: string;
  const baseUrl: string;
  const ep: EndpointClient;
  const id: string;
  const officialEndpoint: { stream(id: string): AsyncIterable<import("../../src/client/index.js").StreamChunk> };
  const allChunks: import("../../src/client/index.js").StreamChunk[];
}
`;

const ROOT = resolve(import.meta.dirname, "../..");
const OUT = join(ROOT, ".tmp", "docblocks");

interface Block {
  readonly name: string;
  readonly file: string;
  readonly line: number;
}

function writeBlocks(): Block[] {
  rmSync(join(ROOT, ".tmp", "docblocks"), { recursive: true, force: true });
  rmSync(join(ROOT, ".tmp", "src"), { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  // What the examples import relatively: the user's handler, and (docs/management.md) runlet's own parts.
  const echo = 'export { default } from "../../examples/echo/handler.js";\n';
  writeFileSync(join(OUT, "handler.ts"), echo);
  writeFileSync(join(OUT, "prelude.d.ts"), PRELUDE);
  // docs/models.md imports the user's model loader: the prelude's placeholder, as a module.
  writeFileSync(join(OUT, "model.d.ts"), "export declare const loadModel: typeof globalThis.loadModel;\n");
  mkdirSync(join(ROOT, ".tmp", "src", "harness", "management-api"), { recursive: true });
  writeFileSync(
    join(ROOT, ".tmp", "src", "handler.ts"),
    'export { default } from "../../examples/echo/handler.js";\n',
  );
  writeFileSync(
    join(ROOT, ".tmp", "src", "harness", "management-api", "index.ts"),
    'export * from "../../../../src/harness/management-api/index.js";\n',
  );
  const docs = [
    "README.md",
    "package-readme.md",
    ...readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `docs/${f}`),
  ];
  const blocks: Block[] = [];
  for (const doc of docs) {
    const text = readFileSync(join(ROOT, doc), "utf8");
    for (const match of text.matchAll(/^```ts\n([\s\S]*?)^```/gm)) {
      const line = text.slice(0, match.index).split("\n").length;
      const name = `${doc.replace(/[/.]/g, "_")}_L${line}.ts`;
      writeFileSync(join(OUT, name), match[1] ?? "");
      blocks.push({ name, file: doc, line });
    }
  }
  return blocks;
}

describe("README and docs code", () => {
  it("type-checks every TypeScript example against the current API", () => {
    const blocks = writeBlocks();
    try {
      const parsed = ts.getParsedCommandLineOfConfigFile(
        join(ROOT, "tsconfig.json"),
        {},
        {
          ...ts.sys,
          onUnRecoverableConfigFileDiagnostic: (d) => {
            throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
          },
        },
      );
      const options: ts.CompilerOptions = {
        ...parsed?.options,
        // A user's ordinary strict setup: process.env.API_KEY reads fine there.
        noPropertyAccessFromIndexSignature: false,
        baseUrl: ROOT,
        paths: { runlet: ["src/index.ts"], "runlet/*": ["src/*/index.ts"] },
      };
      const roots = [...blocks.map((b) => join(OUT, b.name)), join(OUT, "prelude.d.ts")];
      const program = ts.createProgram(roots, options);
      // Only the blocks' own files are checked (what getPreEmitDiagnostics would report for them):
      // checking every source file they reach would find nothing kept below, at several times the cost.
      const checked = blocks.map((b) => program.getSourceFile(join(OUT, b.name))!);
      const problems = [
        ...program.getOptionsDiagnostics(),
        ...program.getGlobalDiagnostics(),
        ...checked.flatMap((sf) => [
          ...program.getSyntacticDiagnostics(sf),
          ...program.getSemanticDiagnostics(sf),
        ]),
      ]
        .filter((d) => d.file?.fileName.startsWith(OUT) && !d.file.fileName.endsWith("prelude.d.ts"))
        .map((d) => {
          const block = blocks.find((b) => d.file?.fileName.endsWith(b.name));
          const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : 0;
          return `${block?.file}:${(block?.line ?? 0) + 1 + at}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`;
        });
      expect(problems).toEqual([]);
      // The README and docs hold well over a dozen examples; a regex that found none must fail.
      expect(blocks.length).toBeGreaterThan(15);
    } finally {
      rmSync(join(ROOT, ".tmp", "docblocks"), { recursive: true, force: true });
      rmSync(join(ROOT, ".tmp", "src"), { recursive: true, force: true });
    }
  }, 180_000);
});
