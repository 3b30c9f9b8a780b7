import { describe, expect, it } from "vitest";
import { realClock } from "../../src/clock.js";
import { createLogger } from "../../src/log/index.js";
import { checkSidecars } from "../../src/sidecar/options.js";
import { redactCommand } from "../../src/sidecar/redact-command.js";
import { MAX_LINE_CHARS, SidecarProcess } from "../../src/sidecar/sidecar-process.js";
import { logSink } from "../support/workers.js";

// Issue 42, item 9: a secret on a sidecar's command line must not reach the log. The sidecar is a
// real process (node, given the arguments and exiting at once); the log is the worker's logger.

const OWN = "own-secret-value-123";
const INHERITED = "hf_inherited_0123456789";

describe("a sidecar's command in the log (issue 42, item 9)", () => {
  it("logs the command with secret flag values and secret env values redacted", async () => {
    const sink = logSink();
    const log = createLogger({ platform: true, destination: sink.stream });
    const [settings] = checkSidecars({
      name: "llm",
      command: [
        process.execPath,
        "-e",
        "0",
        "--",
        "--api-key",
        "sk-live-abcdefghijklmnop",
        "--hf-token=hf_abcdefghijklmnop",
        "--tokenizer",
        "Qwen/Qwen2.5-7B-Instruct",
        `--config=auth:${OWN}`,
        `https://huggingface.co/m?t=${INHERITED}`,
        "--port",
        "8080",
      ],
      env: { MY_SECRET: OWN, NOT_HIDDEN: "plain-value-123" },
      ready: { port: 1 },
    });
    const proc = new SidecarProcess({
      settings: settings!,
      log,
      clock: realClock(),
      baseEnv: { PATH: process.env["PATH"], HF_TOKEN: INHERITED },
    });
    expect((await proc.exited).code).toBe(0);
    const starting = sink.lines.find((l) => l["message"] === 'starting sidecar "llm"')!;
    expect(starting["command"]).toEqual([
      process.execPath,
      "-e",
      "0",
      "--",
      "--api-key",
      "[redacted]",
      "--hf-token=[redacted]",
      "--tokenizer",
      "Qwen/Qwen2.5-7B-Instruct",
      "--config=auth:[redacted]",
      "https://huggingface.co/m?t=[redacted]",
      "--port",
      "8080",
    ]);
    for (const secret of ["sk-live-abcdefghijklmnop", "hf_abcdefghijklmnop", OWN, INHERITED]) {
      expect(sink.text()).not.toContain(secret);
    }
  });

  it("scrubs a secret that a long line's cut into pieces would split", async () => {
    const sink = logSink();
    const log = createLogger({ platform: true, destination: sink.stream });
    // One line over MAX_LINE_CHARS, the secret across the place where its first piece ends; its
    // end comes later, so the worker holds an unterminated line longer than a piece.
    const script = [
      `process.stdout.write("x".repeat(${MAX_LINE_CHARS} - 5) + process.env.MY_TOKEN);`,
      `setTimeout(() => process.stdout.write("y".repeat(100) + "\\n"), 300);`,
    ].join("");
    const [settings] = checkSidecars({
      name: "long",
      command: [process.execPath, "-e", script],
      env: { MY_TOKEN: OWN },
      ready: { port: 1 },
    });
    const proc = new SidecarProcess({ settings: settings!, log, clock: realClock(), baseEnv: {} });
    expect((await proc.exited).code).toBe(0);
    const pieces = sink.lines.filter((l) => l["sidecar"] === "long" && l["stream"] === "stdout");
    const text = pieces.map((l) => String(l["message"])).join("");
    expect(text.startsWith("x".repeat(MAX_LINE_CHARS - 5))).toBe(true);
    expect(text.endsWith("y".repeat(100))).toBe(true);
    expect(text).not.toContain(OWN);
    expect(text).not.toContain(OWN.slice(0, 5));
    expect(text).toContain("[redacted]");
  });

  it("knows secret-named flags by their words, in each spelling", () => {
    expect(
      redactCommand(
        [
          "server",
          "--apiKey",
          "a1",
          "--client_secret",
          "a2",
          "-password",
          "a3",
          "--auth.token=a4",
          "--ACCESS-KEY",
          "a5",
          "--keyfile",
          "/etc/tls/key.pem",
          "--token-budget-name",
          "a6",
          "--api-key",
          "--port",
          "8080",
          "--secret",
        ],
        [],
      ),
    ).toEqual([
      "server",
      "--apiKey",
      "[redacted]",
      "--client_secret",
      "[redacted]",
      "-password",
      "[redacted]",
      "--auth.token=[redacted]",
      "--ACCESS-KEY",
      "[redacted]",
      "--keyfile",
      "/etc/tls/key.pem",
      "--token-budget-name",
      "[redacted]", // a secret word in the flag is enough: more redacted than needed, never less
      "--api-key",
      "--port", // no value after --api-key: the next flag is kept
      "8080",
      "--secret",
    ]);
  });

  it("redacts a secret flag's value inside a shell script argument too", () => {
    expect(
      redactCommand(
        [
          "sh",
          "-c",
          "exec vllm serve m --port 8000 --api-key sk-live-0123 --hf-token='hf_abc def' --tokenizer t --api-key --model x",
        ],
        [],
      ),
    ).toEqual([
      "sh",
      "-c",
      "exec vllm serve m --port 8000 --api-key [redacted] --hf-token=[redacted] --tokenizer t --api-key --model x",
    ]);
  });

  it("takes given values out wherever they appear, the longest first", () => {
    expect(redactCommand(["run", "x=abcd1234efgh", "abcd1234"], ["abcd1234", "abcd1234efgh"])).toEqual([
      "run",
      "x=[redacted]",
      "[redacted]",
    ]);
  });
});
