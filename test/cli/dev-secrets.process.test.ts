import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, startCli } from "../support/run-cli.js";
import { waitForAsync } from "../support/wait-for.js";

const SECRET = "Zq9xWv7Rk2Lm4Tp8Hs3D";
/** Its first 10 characters: what V8 quotes of a body that fails to parse at the secret. */
const SECRET_PIECE = SECRET.slice(0, 10);

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-secrets-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
  // Streams, reports progress, logs, and fails on demand; it never puts s3Config in its output.
  await writeFile(
    join(tmp, "handler.ts"),
    [
      `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};`,
      "export default defineHandler({",
      "  async *handler({ input, log, progress, s3 }) {",
      "    log.info({ hasS3: s3 !== undefined }, 'working');",
      "    progress({ half: true });",
      "    yield { text: String(input.text) };",
      "    if (input.fail) throw new Error('asked to fail');",
      "  },",
      "});",
      "",
    ].join("\n"),
  );
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("runlet dev never shows secrets", () => {
  it("keeps s3Config.accessSecret and the API key out of its output and out of every job-API answer and webhook", async () => {
    const hookBodies: string[] = [];
    const receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString("utf8");
      });
      req.on("end", () => {
        hookBodies.push(body);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
    const answers: string[] = [];
    try {
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, apiKey] = await dev.waitFor(/api key {3}(\S+) /);
      // A streaming handler's banner ends with a note under its /run and /stream calls.
      await dev.waitFor(/call it again until its status is COMPLETED\)\n/);
      const banner = dev.output();
      await dev.waitFor(/\[w1\] INFO {2}worker started/);
      const call = async (method: "GET" | "POST", path: string, body?: string) => {
        const res = await fetch(`${endpoint}${path}`, {
          method,
          headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body }),
        });
        const text = await res.text();
        answers.push(`${method} ${path} ${res.status} ${text}`);
        return { status: res.status, json: () => JSON.parse(text) as { id: string; status: string } };
      };
      const s3Config = {
        accessId: "AKIDEXAMPLE",
        accessSecret: SECRET,
        bucketName: "bucket",
        endpointUrl: "http://127.0.0.1:9",
      };
      const job = (input: unknown) => JSON.stringify({ input, s3Config, webhook: hook });

      const sync = await call("POST", "/runsync", job({ text: "hello" }));
      expect(sync.json()).toMatchObject({ status: "COMPLETED" });
      const failed = await call("POST", "/runsync", job({ text: "bye", fail: true }));
      expect(failed.json()).toMatchObject({ status: "FAILED" });
      const queued = (await call("POST", "/run", job({ text: "async" }))).json();
      await waitForAsync(
        "the queued job to complete",
        async () => (await call("GET", `/status/${queued.id}`)).json().status === "COMPLETED",
      );
      await call("GET", `/stream/${queued.id}`);
      await call("GET", `/status-sync/${queued.id}?wait=1000`);
      await call("POST", `/cancel/${queued.id}`);
      await call("POST", `/retry/${sync.json().id}`);
      // Bodies the harness refuses: the error must not quote them.
      expect(
        (await call("POST", "/run", `{"input": {}, "s3Config": {"accessSecret": ${SECRET}}}`)).status,
      ).toBe(400);
      expect((await call("POST", "/run", `{"s3Config": {"accessSecret": "${SECRET}"}}`)).status).toBe(400);
      expect(
        (await call("POST", "/run", JSON.stringify({ input: {}, s3Config: { ...s3Config, accessId: 5 } })))
          .status,
      ).toBe(400);
      await call("GET", "/health");
      await new Promise<void>((resolve, reject) => {
        const started = Date.now();
        const check = () => {
          if (hookBodies.length >= 3) resolve();
          else if (Date.now() - started > 10_000) reject(new Error(`webhooks: ${hookBodies.length}`));
          else setTimeout(check, 50);
        };
        check();
      });
      await dev.waitFor(new RegExp(`job ${queued.id} COMPLETED`));
      await dev.waitFor(/FAILED in \d+ ms/);

      for (const text of [...answers, ...hookBodies]) {
        expect(text).not.toContain(SECRET_PIECE);
        expect(text).not.toContain(apiKey!);
      }
      // The banner shows the local key (that is its purpose); nothing after it does.
      expect(banner).toContain(apiKey!);
      const after = dev.output().slice(banner.length);
      expect(after).toContain("Started.");
      expect(after).not.toContain(SECRET_PIECE);
      expect(after).not.toContain(apiKey!);
    } finally {
      const code = await dev.stop();
      await new Promise((resolve) => receiver.close(resolve));
      expect(code, dev.output()).toBe(0);
      expect(dev.output()).not.toContain(SECRET_PIECE);
    }
  }, 60_000);
});
