/**
 * How deep a JSON text nests objects and arrays, measured on the text before it is parsed: a
 * 10 MiB body can nest five million levels, which JSON.parse builds (hundreds of MB) and
 * JSON.stringify then cannot write back (it recurses: about 4 100 levels on Node's default stack).
 * The scan skips strings with the engine's native search, so a large string item costs little.
 */

/**
 * The default most levels of objects and arrays a body may nest (docs/harness.md, "Limits and rate
 * limits"): below every reader a job meets on its way — the platform's Python SDK reads JSON
 * recursively and stops near 990 levels, a runlet worker's thread hand-over (structured clone)
 * near 1 900, JSON.stringify near 4 100 — with room for the envelopes around an input.
 */
export const MAX_JSON_DEPTH = 512;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;

/**
 * True when `text` nests objects and arrays deeper than `maxDepth` levels (a bare value is level 0,
 * `{}` level 1). Text that is not JSON is never "too deep" by this scan's reckoning unless its
 * brackets are: JSON.parse then says what is wrong with it.
 *
 * @example
 * exceedsJsonDepth('{"a":[1]}', 1) // true: two levels
 */
export function exceedsJsonDepth(text: string, maxDepth: number): boolean {
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      const end = closingQuote(text, i);
      if (end === -1) return false;
      i = end;
    } else if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      depth++;
      if (depth > maxDepth) return true;
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      depth--;
    }
  }
  return false;
}

/** The index of the quote that closes the string opening at `open`, or -1 when none does. */
function closingQuote(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const at = text.indexOf('"', from);
    if (at === -1) return -1;
    // A quote after an odd run of backslashes is escaped; each run is counted once.
    let slashes = 0;
    for (let b = at - 1; b > open && text.charCodeAt(b) === BACKSLASH; b--) slashes++;
    if (slashes % 2 === 0) return at;
    from = at + 1;
  }
}

/**
 * True when `value` (already parsed, or built in code) nests objects and arrays deeper than
 * `maxDepth`; a cycle counts as too deep. Walks with its own stack, so depth cannot overflow it.
 */
export function exceedsValueDepth(value: unknown, maxDepth: number): boolean {
  const stack: Array<{ readonly value: unknown; readonly depth: number }> = [{ value, depth: 0 }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const item = next.value;
    if (typeof item !== "object" || item === null) continue;
    const depth = next.depth + 1;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (typeof child === "object" && child !== null) stack.push({ value: child, depth });
    }
  }
  return false;
}
