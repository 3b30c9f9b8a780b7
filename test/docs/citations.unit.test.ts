import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Comments and docs cite only what a contributor can open: a doc of this repository and a heading
 * of it, such as `docs/protocol.md, "Taking jobs"`. A citation of the platform's spec by section
 * number (the spec is not in the repository), of a style guide or design note by item number, or
 * of a heading that the cited doc does not have fails here, with the file and line.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const SELF = relative(ROOT, import.meta.filename);
const FOLDERS = ["src", "docs", "bench", "test", "templates", "scripts", "examples", "bin"];
const TEXT =
  /\.(?:ts|mts|cts|js|mjs|cjs|md|json|txt|ya?ml|html|css)$|(?:^|\/)(?:Dockerfile[^/]*|\.dockerignore)$/;
const SKIP = new Set(["node_modules", "dist", ".tmp", "fixtures-out"]);

/** Citations of documents the repository does not have (built from pieces so this file passes). */
const FOREIGN: readonly { readonly name: string; readonly pattern: RegExp }[] = [
  { name: "the worker protocol spec", pattern: new RegExp(["worker", "protocol"].join("-"), "i") },
  { name: "the platform API spec", pattern: new RegExp(["platform", "api"].join("-"), "i") },
  { name: "the style guide", pattern: new RegExp(`\\b${"STYLE"}\\s+\\d`) },
  { name: "the design note", pattern: new RegExp(`\\b${"ARCHITECTURE"} decision`) },
  // A section sign, unless it follows an RFC number (RFC 9110 §10.2.3 is a public document).
  { name: "a section number", pattern: /(?<!RFC \d{3,5} )\u00a7\s*\d/ },
];

/**
 * `docs/x.md` or the root `README.md` (not in a string literal or a Markdown link, which the link
 * check covers), then optionally a quoted heading and more joined by `,`, `and`, `or`, `to`.
 */
const CITATION =
  /(?<![\w./"'([-])((?:docs\/[\w-]+|README)\.md)(?![\w"'#])(?:,?[ \t]*(?:\r?\n[ \t]*(?:\*|\/\/|#)?[ \t]*)?"([^"\n]+)"((?:[ \t]*(?:,|and|or|to)[ \t]*"[^"\n]+")*))?/g;

interface Problem {
  readonly line: number;
  readonly text: string;
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split("\n").length;
}

/** A heading's text as a citation names it: no `#`, no backticks or emphasis. */
function plain(heading: string): string {
  return heading
    .replace(/^#+\s*/, "")
    .replace(/[`*]/g, "")
    .trim();
}

const headingCache = new Map<string, readonly string[]>();

/** The headings of a Markdown file of the repository, outside fenced code. */
function headingsOf(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced && /^#{1,6}\s/.test(line)) out.push(plain(line));
  }
  return out;
}

function headings(doc: string): readonly string[] | undefined {
  const cached = headingCache.get(doc);
  if (cached !== undefined) return cached;
  const path = join(ROOT, doc);
  if (!existsSync(path)) return undefined;
  const found = headingsOf(readFileSync(path, "utf8"));
  headingCache.set(doc, found);
  return found;
}

/** True when `cited` is a heading of the list, or the start of one before `:`, ` (` or ` —`. */
function namesHeading(list: readonly string[], cited: string): boolean {
  const name = plain(cited);
  return list.some(
    (h) => h === name || h.startsWith(`${name}:`) || h.startsWith(`${name} (`) || h.startsWith(`${name} —`),
  );
}

/**
 * Every problem of one file's text; `docHeadings` looks up a cited doc (undefined: it does not
 * exist). Spec citations are looked for in all of `text`, messages included; doc citations in
 * `citing` (a source file's comments).
 */
function problemsOf(
  text: string,
  docHeadings: (doc: string) => readonly string[] | undefined,
  citing: string = text,
): Problem[] {
  const problems: Problem[] = [];
  for (const { name, pattern } of FOREIGN) {
    const global = new RegExp(pattern.source, `${pattern.flags}g`);
    for (const m of text.matchAll(global)) {
      problems.push({
        line: lineOf(text, m.index),
        text: `cites ${name} ("${m[0]}"), which is not in the repository: cite a doc and a heading, e.g. docs/protocol.md, "Taking jobs"`,
      });
    }
  }
  for (const m of citing.matchAll(CITATION)) {
    const [, doc, first, more] = m as unknown as [string, string, string | undefined, string | undefined];
    const list = docHeadings(doc);
    if (list === undefined) {
      problems.push({ line: lineOf(text, m.index), text: `cites ${doc}, which does not exist` });
      continue;
    }
    const cited =
      first === undefined
        ? []
        : [first, ...[...(more ?? "").matchAll(/"([^"\n]+)"/g)].map((x) => x[1] as string)];
    for (const heading of cited) {
      if (!namesHeading(list, heading)) {
        problems.push({
          line: lineOf(text, m.index),
          text: `cites ${doc}, "${heading}", but ${doc} has no such heading`,
        });
      }
    }
  }
  return problems;
}

/**
 * The comments of a source file, line for line (other lines blank): a doc named in a string is a
 * path the code uses, not a citation. Lines that start a comment or continue a block comment count
 * whole, and a line's trailing `// ...` counts from there.
 */
function commentsOf(source: string): string {
  return source
    .split("\n")
    .map((line) => {
      if (/^\s*(\/\/|\/\*|\*)/.test(line)) return line;
      const at = line.indexOf(" // ");
      return at === -1 ? "" : line.slice(at);
    })
    .join("\n");
}

function walk(dir: string, out: string[]): void {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (SKIP.has(entry.name)) continue;
    if (entry.isDirectory()) walk(path, out);
    else if (TEXT.test(path)) out.push(path);
  }
}

function sources(): string[] {
  const out = ["README.md", "package-readme.md"];
  for (const folder of FOLDERS) if (existsSync(join(ROOT, folder))) walk(folder, out);
  return out.filter((f) => f !== SELF);
}

describe("citations in comments and docs", () => {
  it("name a doc of the repository and a heading it has, never the spec's section numbers", () => {
    const files = sources();
    expect(files).toContain("src/worker/job/take-loop.ts");
    const found: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), "utf8");
      const citing = file.endsWith(".md") ? text : commentsOf(text);
      for (const p of problemsOf(text, headings, citing)) {
        found.push(`${file}:${p.line}: ${p.text}`);
      }
    }
    expect(found).toEqual([]);
  });

  it("docs/protocol.md has the headings other files cite by name", () => {
    const list = headings("docs/protocol.md") ?? [];
    for (const name of [
      "Environment",
      "Taking jobs",
      "Headers",
      "Results",
      "Streaming",
      "Stopping one job",
      "Heartbeat",
      "Logs",
      "Local test conventions",
      "Job API",
      "Limits",
      "Errors",
      "Management API",
    ]) {
      expect(list, name).toContain(name);
    }
  });

  it("the check flags a section citation, a missing doc and a missing heading, and passes a good one", () => {
    const docs = (doc: string) => (doc === "docs/protocol.md" ? ["Taking jobs", "Heartbeat"] : undefined);
    const spec = ["worker", "protocol"].join("-");
    const texts = problemsOf(
      [
        `// (${spec} \u00a72) and (bounds of \u00a78)`,
        '// docs/protocol.md, "Taking jobs" and "Heartbeat"',
        '// docs/protocol.md, "Job take"',
        "// docs/nowhere.md",
        ' * docs/protocol.md,\n * "Heartbeat" or "Nope"',
        "// RFC 9110 \u00a710.2.3",
      ].join("\n"),
      docs,
    ).map((p) => `${p.line}: ${p.text}`);
    expect(texts).toEqual([
      expect.stringMatching(/^1: cites the worker protocol spec/),
      expect.stringMatching(/^1: cites a section number/),
      expect.stringMatching(/^1: cites a section number/),
      '3: cites docs/protocol.md, "Job take", but docs/protocol.md has no such heading',
      "4: cites docs/nowhere.md, which does not exist",
      '5: cites docs/protocol.md, "Nope", but docs/protocol.md has no such heading',
    ]);
  });
});
