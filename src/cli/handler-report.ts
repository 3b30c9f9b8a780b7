import type { HandlerDefinition } from "../handler/define-handler.js";
import { describeHandler, type HandlerInfo, handlerInfoSchema } from "../harness/dashboard/handler-info.js";
import type { LogRecord } from "./log-line.js";

/** Set by `runlet dev` on its workers: each prints its handler's description once, as it starts. */
export const DESCRIBE_ENV = "RUNLET_DEV_DESCRIBE";
/** The key of the one JSON line carrying the description. */
const REPORT_KEY = "runletHandler";

/**
 * Prints the handler's description (its input as JSON Schema, streaming, OpenAI) as one JSON
 * line on stdout, when `runlet dev` asked for it: the dashboard's form starts from it and the
 * banner's curl fits the handler. The worker process has the handler loaded; nothing loads it twice.
 */
export function reportHandler(definition: HandlerDefinition, env: NodeJS.ProcessEnv): void {
  if (env[DESCRIBE_ENV] !== "1") return;
  process.stdout.write(`${JSON.stringify({ [REPORT_KEY]: describeHandler(definition) })}\n`);
}

/** The description a worker line carries, or undefined for any other line (or one that does not check out). */
export function handlerReportOf(record: LogRecord | undefined): HandlerInfo | undefined {
  if (record === undefined || !(REPORT_KEY in record)) return undefined;
  const parsed = handlerInfoSchema.safeParse(record[REPORT_KEY]);
  return parsed.success ? (parsed.data as HandlerInfo) : undefined;
}
