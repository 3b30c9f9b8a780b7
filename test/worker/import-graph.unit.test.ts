import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { filesReached, packagesReached, SRC } from "../support/import-walker.js";

// A job that never uses ctx.s3 must not pay for the AWS SDK: the worker and handler modules may
// reach the S3 module only through a dynamic import(). This walks their static, non-type imports.

describe("what the worker loads up front", () => {
  it("never imports the AWS SDK statically from the worker or the handler API", () => {
    for (const entry of [
      "index.ts",
      "worker/index.ts",
      "worker/runner/thread-entry.ts",
      "handler/index.ts",
    ]) {
      const reached = packagesReached(entry);
      const aws = [...reached].filter(([name]) => name.startsWith("@aws-sdk/"));
      expect(aws.map(([, chain]) => chain.join(" → "))).toEqual([]);
      // The walk does see packages (a walk that found nothing could not fail).
      expect(reached.has("zod") || reached.has("pino") || reached.has("undici")).toBe(true);
    }
  });

  it("sees the AWS SDK behind the S3 module (so the check above can fail)", () => {
    expect([...packagesReached("s3/index.ts").keys()]).toContain("@aws-sdk/client-s3");
  });

  it('loads undici and the client API\'s schemas only on demand (docs/benchmarks.md, "Cold start")', () => {
    // undici's public entry was most of runlet's start-up phase: the worker imports it when it is
    // created, while its start-up runs. The client API's and the worker bodies' zod schemas are
    // not the worker's: it reaches the protocol's modules one by one, not through their index.
    for (const entry of ["index.ts", "worker/index.ts", "handler/index.ts"]) {
      const reached = packagesReached(entry);
      expect(reached.get("undici")?.join(" → ")).toBeUndefined();
      expect(reached.has("zod")).toBe(true);
    }
    const protocol = [...filesReached("index.ts")].filter((f) => f.startsWith("protocol/"));
    expect(protocol).not.toContain("protocol/api.ts");
    expect(protocol).not.toContain("protocol/worker-bodies.ts");
    expect(protocol).toContain("protocol/job.ts");
  });
});

describe("optional parts load when used, not with the worker", () => {
  // Under the image's V8 flags Node compiles each of its own modules from source (docs/images.md,
  // "Worker memory"): node:crypto and node:child_process with node:net cost a start ~30 ms of CPU.
  // The built-in fitness checks, the warm cache and an id without RUNPOD_POD_ID load them on use.
  it("reaches no node:crypto, node:child_process, node:net or warm cache statically from the worker", () => {
    for (const entry of [
      "index.ts",
      "worker/index.ts",
      "worker/runner/thread-entry.ts",
      "handler/index.ts",
    ]) {
      const reached = packagesReached(entry);
      for (const name of ["node:crypto", "node:child_process", "node:net"]) {
        expect(reached.get(name)?.join(" → "), `${entry} reaches ${name}`).toBeUndefined();
      }
      expect(reached.has("zod")).toBe(true);
    }
    const reachedFiles = [...filesReached("worker/index.ts")];
    expect(reachedFiles).not.toContain("cache/warm-cache.ts");
    expect(reachedFiles).not.toContain("worker/fitness/system-checks.ts");
    expect(reachedFiles).not.toContain("worker/fitness/gpu-checks.ts");
    expect(reachedFiles).toContain("worker/fitness/run-fitness.ts");
  });

  it("sees node:child_process behind the built-in checks (so the check above can fail)", () => {
    expect([...packagesReached("worker/fitness/built-in-checks.ts").keys()]).toContain("node:child_process");
  });
});

describe("telemetry off costs nothing at start", () => {
  it("never imports OpenTelemetry statically from the worker, the handler API or the client", () => {
    for (const entry of [
      "index.ts",
      "worker/index.ts",
      "worker/runner/thread-entry.ts",
      "handler/index.ts",
      "client/index.ts",
    ]) {
      const otel = [...packagesReached(entry)].filter(([name]) => name.startsWith("@opentelemetry/"));
      expect(otel.map(([, chain]) => chain.join(" → "))).toEqual([]);
    }
  });

  it("sees OpenTelemetry behind the telemetry module (so the check above can fail)", () => {
    expect([...packagesReached("telemetry/otel.ts").keys()]).toContain("@opentelemetry/api");
  });
});

/**
 * Stream plumbing without error handling (docs/reliability.md, "No task's error reaches the
 * process"): a bare `.pipe()` hands an error on its destination to nobody, and an unheard stream
 * error ends the process (issue 41: a tar Pack piped to a read-only volume). Streams are joined
 * with `stream.pipeline`; a `.pipe(` of a stream is allowed only under a `// piped:` comment that
 * says how each end's error is heard. zod's `.pipe(z.…)` is not a stream.
 */
function barePipes(file: string, text: string): string[] {
  const found: string[] = [];
  const lines = text.split("\n");
  for (const [index, line] of lines.entries()) {
    if (!/\.pipe(?:To)?\(/.test(line) || /^\s*(?:\/\/|\*|\/\*)/.test(line)) continue;
    const after = `${line.slice(line.search(/\.pipe(?:To)?\(/))}${lines[index + 1] ?? ""}`;
    if (/^\.pipe\(\s*z\./.test(after)) continue;
    // The justification may run over a few comment lines right above.
    let above = index - 1;
    let justified = false;
    while (above >= 0 && /^\s*\/\//.test(lines[above]!)) {
      if (/\/\/ piped: /.test(lines[above]!)) justified = true;
      above -= 1;
    }
    if (!justified) found.push(`${file}:${index + 1}: ${line.trim()}`);
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join(dir, name));
}

describe("stream plumbing in src/ hears its errors", () => {
  it("joins streams with stream.pipeline, never a bare .pipe()", () => {
    const found = sourceFiles(SRC).flatMap((file) =>
      barePipes(file.slice(SRC.length), readFileSync(file, "utf8")),
    );
    expect(found).toEqual([]);
    // The walk does read src/ (a walk that found nothing could not fail).
    expect(sourceFiles(SRC).length).toBeGreaterThan(100);
  });

  it("finds a bare pipe, and lets zod's pipe and a justified one be (so the check above can fail)", () => {
    const sample = [
      "pack.pipe(out);",
      "const url = z.string().pipe(z.url());",
      "const n = z.string()",
      "  .pipe(",
      "    z.number(),",
      "  );",
      "// piped: both ends' errors are heard (a shared destination).",
      "child.stdout.pipe(output, { end: false });",
      "readable.pipeTo(writable);",
      "// a comment that names .pipe( is no plumbing",
    ].join("\n");
    expect(barePipes("sample.ts", sample)).toEqual([
      "sample.ts:1: pack.pipe(out);",
      "sample.ts:9: readable.pipeTo(writable);",
    ]);
  });
});
