/** Longest rendering of one extra field's value, in characters. */
const FIELD_CHARS = 200;

function renderValue(value: unknown): string {
  const text = typeof value === "string" && !/[\s"=]/.test(value) ? value : JSON.stringify(value);
  if (text === undefined) return String(value);
  return text.length > FIELD_CHARS ? `${text.slice(0, FIELD_CHARS - 1)}…` : text;
}

/**
 * Renders one line a worker printed in the platform's JSON-lines mode (`{requestId, message,
 * level, ...}`, docs/protocol.md, "Logs") as one readable line: `INFO  Started. job=<id> key=value`.
 * Lines that are not such JSON come back unchanged.
 */
export function formatLogLine(line: string): string {
  if (!line.startsWith("{")) return line;
  let record: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return line;
    record = parsed as Record<string, unknown>;
  } catch {
    return line; // Not JSON after all (a handler's own print): show it as it is.
  }
  const { level, message, requestId, ...rest } = record;
  const parts = [typeof level === "string" ? level.padEnd(5) : "LOG  ", String(message ?? "")];
  if (typeof requestId === "string") parts.push(`job=${requestId}`);
  for (const [key, value] of Object.entries(rest)) {
    if (key === "err" && typeof value === "object" && value !== null) {
      const err = value as { message?: unknown; stack?: unknown };
      parts.push(`err=${renderValue(err.message)}`);
      if (typeof err.stack === "string") parts.push(`\n${err.stack}`);
      continue;
    }
    parts.push(`${key}=${renderValue(value)}`);
  }
  return parts.join(" ");
}
