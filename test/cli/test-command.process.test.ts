import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "../support/run-cli.js";

const TOKEN_STREAM = join(REPO_ROOT, "examples/token-stream/handler.ts");
const PROGRESS = join(REPO_ROOT, "examples/progress/handler.ts");
const EMBEDDINGS = join(REPO_ROOT, "examples/batched-embeddings/handler.ts");

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-test-cmd-"));
  // Handlers below are ES modules, as in a project made by runlet init.
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("runlet test", () => {
  it("prints each stream item as it comes, then the final output, and exits 0", async () => {
    const r = await runCli([
      "test",
      TOKEN_STREAM,
      "--input",
      '{"input": {"prompt": "hi there", "tokenDelayMs": 0}}',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('stream "You"\nstream " said:"\nstream " hi"\nstream " there"\n[]\n');
    expect(r.stderr).toMatch(/runlet test: COMPLETED in \d+ ms\n/);
  });

  it("prints progress updates before the output", async () => {
    const r = await runCli(["test", PROGRESS, "-i", '{"input": {"steps": 2, "stepMs": 0}}']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      'progress {"step":1,"of":2,"percent":50}\nprogress {"step":2,"of":2,"percent":100}\n' +
        '{\n  "steps": 2,\n  "done": true\n}\n',
    );
  });

  it("sends a list of jobs as one batch: outputs as a list, each job's end and batch on stderr, exit 1 if any failed", async () => {
    const jobs = [
      { input: { text: "a cat", dims: 2 } },
      { input: { text: "w ".repeat(513) } },
      { input: { text: "a cat", dims: 2 } },
    ];
    const r = await runCli(["test", EMBEDDINGS, "--input", JSON.stringify(jobs)]);
    expect(r.code, r.stderr).toBe(1);
    const outputs = JSON.parse(r.stdout) as Array<{ vector: number[]; words: number } | null>;
    expect(outputs).toHaveLength(3);
    expect(outputs[0]).toEqual(outputs[2]);
    expect(outputs[0]?.vector).toHaveLength(2);
    expect(outputs[1]).toBeNull();
    const ends = r.stderr.split("\n").filter((line) => line.startsWith("runlet test: job "));
    expect(ends).toHaveLength(3);
    const batch = /\(batch (\S+), 3 jobs, waited \d+ ms\)/;
    expect(ends[0]).toMatch(/^runlet test: job 0 COMPLETED in \d+ ms \(batch \S+, 3 jobs, waited \d+ ms\)$/);
    expect(ends[1]).toMatch(
      /^runlet test: job 1 FAILED in \d+ ms \(batch \S+, 3 jobs, waited \d+ ms\): text has 513 words, over the 512-word limit \(RUNLET_JOB_FAILED\)$/,
    );
    expect(new Set(ends.map((line) => batch.exec(line)?.[1])).size).toBe(1);
  });

  it("reads test_input.json from the current folder when --input is not given", async () => {
    const dir = join(tmp, "with-file");
    const { mkdir } = await import("node:fs/promises");
    await mkdir(dir);
    await writeFile(join(dir, "test_input.json"), JSON.stringify({ input: { steps: 1, stepMs: 0 } }));
    const r = await runCli(["test", PROGRESS], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('progress {"step":1,"of":1,"percent":100}\n{\n  "steps": 1,\n  "done": true\n}\n');
  });

  it("exits 1 and lists the bad field when the input fails the handler's schema", async () => {
    const r = await runCli(["test", TOKEN_STREAM, "--input", '{"input": {"prompt": 5}}']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(
      /runlet test: the job FAILED in \d+ ms: input is invalid:\n.*expected string, received number\n.*prompt \(RUNLET_INPUT_INVALID\)\n$/,
    );
  });

  it("exits 1 with the handler's error when it throws", async () => {
    const handler = join(tmp, "throws.ts");
    await writeFile(
      handler,
      `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};\n` +
        'export default defineHandler({ handler: () => { throw new TypeError("disk on fire"); } });\n',
    );
    const r = await runCli(["test", handler, "--input", '{"input": {}}']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /runlet test: the job FAILED in \d+ ms: TypeError: disk on fire \(RUNLET_JOB_HANDLER_THREW\)\nTypeError: disk on fire\n {4}at /,
    );
  });

  it("exits 1 naming the problem when the file is not a handler", async () => {
    const file = join(tmp, "not-a-handler.ts");
    await writeFile(file, "export default 42;\n");
    const r = await runCli(["test", file, "--input", '{"input": {}}']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("must `export default defineHandler({...})`; its default export is a number");
    expect(r.stderr).toContain("(RUNLET_HANDLER_LOAD)");
  });

  for (const [label, input, message] of [
    ["JSON that does not parse", "{input:", "--input is not valid JSON: "],
    ["JSON without an input key", '{"prompt": "hi"}', '--input must be a JSON object with an "input" key'],
    [
      "a JSON array of non-jobs",
      "[1]",
      '--input: a list of jobs must hold 1 to 1024 objects with an "input" key',
    ],
    ["an empty list of jobs", "[]", "--input: a list of jobs must hold 1 to 1024 objects"],
  ] as const) {
    it(`exits 2 for ${label}`, async () => {
      const r = await runCli(["test", TOKEN_STREAM, "--input", input]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr.startsWith(`runlet test: ${message}`)).toBe(true);
      expect(r.stderr.endsWith("(RUNLET_CLI_USAGE)\n")).toBe(true);
    });
  }

  it("exits 2 when there is neither --input nor test_input.json", async () => {
    const r = await runCli(["test", TOKEN_STREAM], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("no --input given and no test_input.json in");
  });
});
