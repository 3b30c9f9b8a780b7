/** Longest rendering of one extra field's value, in characters. */
const FIELD_CHARS = 200;

/** One line a worker printed in the platform's JSON-lines mode (docs/protocol.md, "Logs"): `{requestId, message, level, ...}`. */
export type LogRecord = Readonly<Record<string, unknown>>;

function renderValue(value: unknown): string {
  const text = typeof value === "string" && !/[\s"=]/.test(value) ? value : JSON.stringify(value);
  if (text === undefined) return String(value);
  return text.length > FIELD_CHARS ? `${text.slice(0, FIELD_CHARS - 1)}…` : text;
}

/** The JSON object a worker line holds, or undefined for any other line (a handler's own print). */
export function parseLogLine(line: string): LogRecord | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
    return parsed as LogRecord;
  } catch {
    return undefined; // Not JSON after all: shown as it is.
  }
}

/**
 * Renders one line a worker printed in JSON-lines mode as one readable line: `INFO  Started.
 * job=<id> key=value`. Lines that are not such JSON come back unchanged. `record` is the line
 * already parsed, when the caller has it.
 */
export function formatLogLine(line: string, record: LogRecord | undefined = parseLogLine(line)): string {
  if (record === undefined) return line;
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
