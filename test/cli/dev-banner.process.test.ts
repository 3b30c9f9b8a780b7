import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli, startCli } from "../support/run-cli.js";
import { waitFor } from "../support/wait-for.js";

const exec = promisify(execFile);
const RUNLET = JSON.stringify(join(REPO_ROOT, "src/index.ts"));
const RUNLET_OPENAI = JSON.stringify(join(REPO_ROOT, "src/openai/index.ts"));

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-banner-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const STREAMING = [
  `import { z } from ${JSON.stringify(import.meta.resolve("zod"))};`,
  `import { defineHandler } from ${RUNLET};`,
  "export default defineHandler({",
  "  input: z.object({ word: z.string().min(2), times: z.number().int().default(2) }),",
  "  async *handler({ input }) {",
  "    for (let i = 0; i < input.times; i++) yield input.word + String(i);",
  "  },",
  "});",
  "",
].join("\n");

const OPENAI = [
  `import { defineOpenAIHandler } from ${RUNLET_OPENAI};`,
  "export default defineOpenAIHandler({",
  '  models: ["echo-1"],',
  "  async *chat(request) {",
  '    yield "you said ";',
  "    yield String(request.messages.at(-1)?.content);",
  "  },",
  "});",
  "",
].join("\n");

const THROWING = [
  `import { defineHandler } from ${RUNLET};`,
  "export default defineHandler({",
  "  handler() {",
  '    throw new RangeError("the dial only goes to 10");',
  "  },",
  "});",
  "",
].join("\n");

/** Runs a printed shell line with sh and returns what it printed. */
async function sh(script: string): Promise<string> {
  return (await exec("sh", ["-c", script], { cwd: tmp })).stdout;
}

describe("runlet dev's banner and terminal", () => {
  it("prints a call that fits the handler (streaming, then OpenAI after a reload) and a thrown error as runlet test does", async () => {
    const handler = join(tmp, "handler.ts");
    await writeFile(handler, STREAMING);
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
    try {
      // A streaming handler: /run, then /stream (a /runsync answer holds none of the streamed items).
      const [, tryRun] = await dev.waitFor(/ {2}try {7}(id=\$\(curl .*)\n/, 60_000);
      const [, thenStream] = await dev.waitFor(/ {2}then {6}(curl .*)\n/);
      expect(tryRun).toMatch(
        /^id=\$\(curl -s -X POST http:\/\/127\.0\.0\.1:\d+\/v2\/local\/run -H 'Authorization: Bearer rl_\S+' -H 'Content-Type: application\/json' -d '\{"input":\{"word":"xx","times":2\}\}' \| sed /,
      );
      expect(thenStream).toMatch(
        /^curl -s http:\/\/127\.0\.0\.1:\d+\/v2\/local\/stream\/\$id -H 'Authorization: Bearer /,
      );
      const id = (await sh(`${tryRun}\necho "$id"`)).trim();
      expect(id).toMatch(/^[\w-]+$/);
      let items: unknown[] = [];
      for (let status = ""; status !== "COMPLETED"; ) {
        const answer = JSON.parse(await sh(`id=${id}\n${thenStream}`)) as {
          status: string;
          stream?: Array<{ output: unknown }>;
        };
        status = answer.status;
        items = [...items, ...(answer.stream ?? []).map((c) => c.output)];
      }
      expect(items).toEqual(["xx0", "xx1"]);

      // Reloaded as an OpenAI handler: the base URL and a chat completions call.
      await writeFile(handler, OPENAI);
      const [, base] = await dev.waitFor(/ {2}openai {4}(http:\/\/\S+\/v2\/local\/openai\/v1) {2}/, 60_000);
      const [, chat] = await dev.waitFor(
        / {2}try {7}(curl -s http:\/\/\S+\/openai\/v1\/chat\/completions .*)\n/,
      );
      expect(chat).toContain(`${base!}/chat/completions`);
      expect(chat).toContain(`-d '{"model":"echo-1","messages":[{"role":"user","content":"Hello"}]}'`);
      // Sent at once, while the old worker may still be stopping: it was retired when the reload
      // was announced, so the call runs on the new code (test/cli/dev-reload.process.test.ts).
      const reply = JSON.parse(await sh(chat!)) as { choices: Array<{ message: { content: string } }> };
      expect(reply.choices[0]?.message.content).toBe("you said Hello");

      // A thrown error reads as runlet test prints it, stack and all, never as escaped JSON.
      const beforeEdit = dev.output().length;
      await writeFile(handler, THROWING);
      // This edit's own reload line (the output holds the last reload's too).
      await waitFor(
        "the reload's line",
        () => dev.output().slice(beforeEdit).includes("handler.ts changed; reloading workers"),
        60_000,
      );
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, key] = await dev.waitFor(/api key {3}(\S+)/);
      const mark = dev.output().length;
      // Sent at once after the reload's line, before a reloaded worker has started: the old one
      // gets no new job from that line on, so the job waits for a reloaded one.
      const res = await fetch(`${endpoint}/runsync`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: '{"input": {}}',
      });
      const { id: failed } = (await res.json()) as { id: string };
      await dev.waitFor(new RegExp(`job ${failed} FAILED`), 60_000);
      await dev.waitFor(new RegExp(`job ${failed} FAILED[^\\n]*\\n[^\\n]*\\n {4}at `));
      const after = dev.output().slice(mark);
      expect(after).toMatch(
        new RegExp(
          `job ${failed} FAILED in \\d+ ms \\(queued \\d+ ms\\): RangeError: the dial only goes to 10 \\(RUNLET_JOB_HANDLER_THREW\\)\\nRangeError: the dial only goes to 10\\n {4}at `,
        ),
      );
      expect(after).not.toContain("error_type");
    } finally {
      expect(await dev.stop(), dev.output()).toBe(0);
    }
  }, 180_000);

  it("keeps the project's key across runs in a git-ignored .runlet/, and refuses a bad --api-key", async () => {
    await writeFile(join(tmp, "handler.ts"), THROWING);
    const keyOf = async () => {
      const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
      try {
        return (await dev.waitFor(/api key {3}(\S+) {2}\(kept in \.runlet\/\)/, 60_000))[1];
      } finally {
        await dev.stop();
      }
    };
    const first = await keyOf();
    expect(await keyOf()).toBe(first);
    const { readFile } = await import("node:fs/promises");
    expect(await readFile(join(tmp, ".runlet", ".gitignore"), "utf8")).toMatch(/^\*$/m);
    const bad = await runCli(["dev", "handler.ts", "--port", "0", "--api-key", "has space"], { cwd: tmp });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      "runlet dev: --api-key must be 1 to 256 printable ASCII characters without spaces (RUNLET_CLI_USAGE)\n",
    );
  }, 120_000);
});
