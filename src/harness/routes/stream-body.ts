import { parseJson } from "../http/http-util.js";

/**
 * Parsing a job-stream body. A large item reaches the harness as ~1 MiB chunks whose body is
 * `{"output":"<slice>","metrics":{...}}` with nothing escaped in the slice (a runlet worker's
 * slices of plain text, docs/streaming.md); JSON.parse scans and copies such a slice at about
 * 1 ns a byte, the harness's largest cost per chunk. Here the slice is checked with the engine's
 * native searches and taken as a view of the body text, and only the small rest goes to
 * JSON.parse. The result is exactly JSON.parse's, and any body this path is not sure of (another
 * shape, an escape, whitespace, a syntax error) goes to JSON.parse whole, so what is refused, and
 * the message saying why, are unchanged.
 */

/** The text a body must begin with for the fast path. */
const HEAD = '{"output":"';
/** Below this many characters JSON.parse is as fast: the fast path is for large slices only. */
const FAST_MIN_CHARS = 65_536;
/** What JSON forbids raw inside a string: the control characters U+0000–U+001F. */
const CONTROL_CHARACTERS = Array.from({ length: 0x20 }, (_, code) => String.fromCharCode(code));

/**
 * `JSON.parse(text)` for a job-stream body, or the parser's message (as {@link parseJson}).
 *
 * @example
 * parseStreamBody('{"output":"abc","metrics":{"part":0}}') // { ok: true, value: { output: "abc", metrics: { part: 0 } } }
 */
export function parseStreamBody(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  if (text.length >= FAST_MIN_CHARS && text.startsWith(HEAD)) {
    const value = plainOutputObject(text);
    if (value !== undefined) return { ok: true, value };
  }
  return parseJson(text);
}

/** The parsed body when its `output` is a string with nothing escaped; undefined when unsure. */
function plainOutputObject(text: string): Record<string, unknown> | undefined {
  const end = text.indexOf('"', HEAD.length);
  if (end === -1 || !unescaped(text, HEAD.length, end)) return undefined;
  // Right after the slice comes `,` and more members, or the closing `}` (whitespace there, and
  // anything else, is left to JSON.parse).
  const next = text.charAt(end + 1);
  if (next !== "," && next !== "}") return undefined;
  let members: unknown;
  try {
    // `,"metrics":{...}}` becomes `{"metrics":{...}}`; `}` becomes `{}`.
    members = JSON.parse(next === "," ? `{${text.slice(end + 2)}` : `{${text.slice(end + 1)}`);
  } catch {
    // A syntax error somewhere in the rest: JSON.parse of the whole body says where and why.
    return undefined;
  }
  // `{"output":"x",}` would become `{}` above: a comma must be followed by a member.
  if (next === "," && Object.keys(members as object).length === 0) return undefined;
  // A view of the body text (no copy). Spread defines each member as JSON.parse does (an own
  // `__proto__` stays data), and a later duplicate `output` replaces the slice but keeps its place.
  return { output: text.slice(HEAD.length, end), ...(members as Record<string, unknown>) };
}

/** True when `text[start, end)` holds no backslash and no control character. */
function unescaped(text: string, start: number, end: number): boolean {
  const found = (search: string): boolean => {
    const at = text.indexOf(search, start);
    return at !== -1 && at < end;
  };
  if (found("\\")) return false;
  for (const control of CONTROL_CHARACTERS) if (found(control)) return false;
  return true;
}
