import { posix } from "node:path";

/**
 * Relative links of Markdown pages, checked against a set of files: the packed tarball's
 * (test/package/shipped-docs.process.test.ts) or the repository's (test/docs/links.unit.test.ts).
 */

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats get `-1`, `-2`. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The link targets of a Markdown text outside code: `[text](target)`, `![alt](target)`, `[id]: target`. */
export function linksOf(markdown: string): { target: string; line: number }[] {
  const out: { target: string; line: number }[] = [];
  let fenced = false;
  markdown.split("\n").forEach((raw, i) => {
    if (/^\s*```/.test(raw)) fenced = !fenced;
    if (fenced) return;
    const line = raw.replace(/`[^`]*`/g, "");
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      out.push({ target: m[1]!, line: i + 1 });
    const ref = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
    if (ref !== null) out.push({ target: ref[1]!, line: i + 1 });
  });
  return out;
}

/**
 * Every relative link of the Markdown files in `files` (path → text) that does not resolve to a
 * file in `files`, a folder holding one, or a heading of the linked page.
 */
export function brokenLinks(
  files: ReadonlyMap<string, string | undefined>,
  pages: readonly string[],
): string[] {
  const problems: string[] = [];
  const isFolder = (path: string) => [...files.keys()].some((f) => f.startsWith(`${path}/`));
  for (const page of pages) {
    const text = files.get(page);
    if (text === undefined) {
      problems.push(`${page}: not in the package`);
      continue;
    }
    for (const { target, line } of linksOf(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [pathPart = "", fragment] = target.split("#", 2);
      const path =
        pathPart === "" ? page : posix.normalize(posix.join(posix.dirname(page), decodeURI(pathPart)));
      const where = `${page}:${line}: ${target}`;
      if (path.startsWith("../") || path === "..") {
        problems.push(`${where} leaves the package`);
        continue;
      }
      const clean = path.replace(/\/$/, "");
      if (!files.has(clean) && !isFolder(clean)) {
        problems.push(`${where} is not in the package`);
        continue;
      }
      if (fragment !== undefined && fragment !== "" && clean.endsWith(".md")) {
        const linked = files.get(clean);
        if (linked !== undefined && !anchorsOf(linked).has(fragment)) {
          problems.push(`${where}: ${clean} has no heading with that anchor`);
        }
      }
    }
  }
  return problems;
}
