import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { ClientOptions } from "../../src/client/options.js";
import { resolveClientOptions } from "../../src/client/options.js";
import { isRunletError } from "../../src/errors.js";

/**
 * The docs name options as the code spells them. docs/client.md once documented
 * `maxRateLimitRetries` and `retryMaxMs`, which no code reads (the options are `maxRetries` and
 * `retryCapMs`): a user who copied them got the defaults without a word.
 */

const ROOT = resolve(import.meta.dirname, "../..");

/** Names the docs quote from other software, not from runlet's code. */
const FOREIGN_NAMES = new Set([
  "runSync", // runpod-sdk's method, named in docs/harness.md
  "getRequestListener", // @hono/node-server's, named in docs/architecture.md
  "bodyLimit", // hono's middleware, named in docs/architecture.md (decision 16)
]);

function filesUnder(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) filesUnder(path, out);
    else out.push(path);
  }
  return out;
}

/** camelCase identifiers written in backticks on their own: `maxRetries`, not `ep.run(body)`. */
function quotedIdentifiers(markdown: string): Set<string> {
  return new Set([...markdown.matchAll(/`([a-z][a-zA-Z0-9]*[A-Z][a-zA-Z0-9]*)`/g)].map((m) => m[1] ?? ""));
}

/** The rows of the first Markdown table after `heading`: cells of each body row. */
function tableAfter(markdown: string, heading: string): string[][] {
  const lines = markdown.split("\n");
  const start = lines.indexOf(heading);
  expect(start, `heading ${heading}`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("#")) break;
    if (!line.startsWith("|")) {
      if (rows.length > 0) break;
      continue;
    }
    rows.push(
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  }
  return rows.slice(2); // the header and its rule
}

describe("option names in docs/", () => {
  it("every camelCase name a shipped page quotes exists in runlet's code, starters or bench", () => {
    const code = [...filesUnder("src"), ...filesUnder("templates"), ...filesUnder("bench")]
      .filter((f) => /\.(ts|mts|mjs|js|json)$/.test(f))
      .map((f) => readFileSync(join(ROOT, f), "utf8"))
      .join("\n");
    const known = new Set(code.match(/[A-Za-z_$][A-Za-z0-9_$]*/g));
    const missing: string[] = [];
    for (const page of readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md"))) {
      for (const name of quotedIdentifiers(readFileSync(join(ROOT, "docs", page), "utf8"))) {
        if (!known.has(name) && !FOREIGN_NAMES.has(name)) missing.push(`docs/${page}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("docs/client.md's createClient table lists exactly ClientOptions, with the code's defaults", () => {
    const rows = tableAfter(readFileSync(join(ROOT, "docs/client.md"), "utf8"), "## `createClient(options)`");
    const documented = rows.map((cells) => (cells[0] ?? "").replaceAll("`", ""));
    // Naming every key here makes typecheck fail when ClientOptions gains or loses one.
    const keys = {
      apiKey: true,
      baseUrl: true,
      dispatcher: true,
      requestTimeoutMs: true,
      maxRetries: true,
      retryBaseMs: true,
      retryCapMs: true,
      userAgent: true,
    } satisfies Record<keyof ClientOptions, true>;
    expect(documented.sort()).toEqual(Object.keys(keys).sort());

    const resolved = resolveClientOptions({ apiKey: "k", baseUrl: "http://127.0.0.1:1" });
    const actual: Record<string, number> = {
      requestTimeoutMs: resolved.requestTimeoutMs,
      maxRetries: resolved.retry.maxRetries,
      retryBaseMs: resolved.retry.baseMs,
      retryCapMs: resolved.retry.capMs,
    };
    for (const cells of rows.filter((c) => (c[1] ?? "").startsWith("integer"))) {
      const name = (cells[0] ?? "").replaceAll("`", "");
      const documentedDefault = Number((cells[2] ?? "").replaceAll(/[`_]/g, ""));
      expect({ name, default: documentedDefault }).toEqual({ name, default: actual[name] });
      // The code reads the option under this name: a bad value is refused, naming it.
      let thrown: unknown;
      try {
        resolveClientOptions({ apiKey: "k", baseUrl: "http://127.0.0.1:1", [name]: -1 });
      } catch (error) {
        thrown = error;
      }
      expect(isRunletError(thrown) && thrown.code === "RUNLET_CONFIG_INVALID").toBe(true);
      expect((thrown as Error).message).toContain(name);
    }
  });
});
