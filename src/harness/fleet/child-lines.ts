import type { Readable } from "node:stream";

/** Longest line kept while waiting for its end, in characters; a longer one is skipped whole. */
export const MAX_LINE_CHARS = 65_536;

/**
 * Hands each complete line `stream` prints to `onLine` (a last unterminated one too). A line
 * longer than {@link MAX_LINE_CHARS} is dropped rather than held: what the harness reads from a
 * worker's output (its start-up lines) is short, and a worker printing without newlines must not
 * grow the harness's memory.
 */
export function readLines(stream: Readable, onLine: (line: string) => void): void {
  let pending = "";
  let skipping = false;
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    const lines = (pending + chunk).split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      if (!skipping) onLine(line);
      skipping = false;
    }
    if (pending.length > MAX_LINE_CHARS) {
      pending = "";
      skipping = true;
    }
  });
  stream.on("end", () => {
    if (pending !== "" && !skipping) onLine(pending);
  });
}
