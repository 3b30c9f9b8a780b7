import { z } from "zod";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { OPENAI_SCHEMA_MARK } from "../../protocol/openai.js";

/** Largest JSON Schema the page is given, in bytes of JSON; a bigger one is replaced by `{}` with a note. */
export const MAX_SCHEMA_BYTES = 65_536;

/**
 * What the dashboard knows of the handler an endpoint runs: its input as JSON Schema (the "run a
 * request" form starts from it and checks against it), whether it streams, and whether it speaks
 * OpenAI's API (docs/harness.md, "The dashboard").
 */
export interface HandlerInfo {
  /** The `input` schema as JSON Schema (draft 2020-12, input side: fields with defaults are optional); `{}` accepts anything. */
  readonly inputSchema: Record<string, unknown>;
  /** Why the schema is partial or empty (a part zod cannot express in JSON Schema, or one too large). */
  readonly schemaNote?: string;
  /** The handler is a generator function: its jobs stream. */
  readonly streaming: boolean;
  /** The handler was made with `defineOpenAIHandler`: it serves `/openai/v1/*`. */
  readonly openai: boolean;
  /** The models an OpenAI handler serves (the first goes in examples). */
  readonly models?: readonly string[];
}

/** The zod check of a {@link HandlerInfo} that arrives from a worker process (one line of its output). */
export const handlerInfoSchema = z.object({
  inputSchema: z.record(z.string(), z.unknown()),
  schemaNote: z.string().max(1_000).optional(),
  streaming: z.boolean(),
  openai: z.boolean(),
  models: z.array(z.string().max(200)).max(100).optional(),
});

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The input schema as JSON Schema. A part zod cannot express (a date, a custom check) becomes
 * "anything" with a note; a schema that does not convert at all, or converts to more than
 * {@link MAX_SCHEMA_BYTES}, becomes `{}` with a note. Never throws.
 */
export function inputJsonSchema(schema: z.ZodType): Pick<HandlerInfo, "inputSchema" | "schemaNote"> {
  let converted: Record<string, unknown>;
  let note: string | undefined;
  try {
    converted = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  } catch (strict) {
    try {
      converted = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
      note = `part of the input schema has no JSON Schema form and accepts anything here (${message(strict)}); the handler still checks it`;
    } catch (err) {
      return {
        inputSchema: {},
        schemaNote: `the input schema has no JSON Schema form (${message(err)}); the handler still checks it`,
      };
    }
  }
  const { $schema: _, ...rest } = converted;
  const bytes = Buffer.byteLength(JSON.stringify(rest));
  if (bytes > MAX_SCHEMA_BYTES) {
    return {
      inputSchema: {},
      schemaNote: `the input schema is ${bytes} bytes as JSON Schema, over the page's ${MAX_SCHEMA_BYTES}; the handler still checks it`,
    };
  }
  return note === undefined ? { inputSchema: rest } : { inputSchema: rest, schemaNote: note };
}

/** What the dashboard shows of a handler definition. */
export function describeHandler(definition: HandlerDefinition): HandlerInfo {
  const fn = definition.handler as { constructor?: { name?: string } };
  const kind = fn.constructor?.name;
  const meta = (definition.input as { meta?: () => Record<string, unknown> | undefined }).meta?.();
  const mark = meta?.[OPENAI_SCHEMA_MARK];
  const streaming = kind === "AsyncGeneratorFunction" || kind === "GeneratorFunction";
  if (!Array.isArray(mark)) return { ...inputJsonSchema(definition.input), streaming, openai: false };
  const models = mark.filter((m): m is string => typeof m === "string" && m.length <= 200).slice(0, 100);
  return { inputSchema: {}, streaming, openai: true, models };
}
