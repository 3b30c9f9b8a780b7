import type { z } from "zod";
import { inputErrorMessage } from "./outcome.js";
import { locateSchemaThrow, schemaThrewMessage } from "./schema-throw.js";

/**
 * Validates one job's `input` against a handler's schema: a single job's run does it before its
 * handler, a batch does it for each job as it is admitted (a bad input fails alone and takes no
 * seat).
 */

/** The validated input, or the message its job fails with (RUNLET_INPUT_INVALID). */
export type ParsedInput =
  | { readonly ok: true; readonly data: unknown }
  | { readonly ok: false; readonly message: string };

/** Parses `input` with `schema`; never rejects: a schema that throws is a bad input too. */
export async function parseInput(schema: z.ZodType, input: unknown): Promise<ParsedInput> {
  let parsed: Awaited<ReturnType<typeof schema.safeParseAsync>>;
  try {
    parsed = await schema.safeParseAsync(input);
  } catch (err) {
    // zod 4 lets a throw inside .transform()/.refine() escape safeParseAsync: still a bad input.
    return { ok: false, message: schemaThrewMessage(await locateSchemaThrow(schema, input), err) };
  }
  if (!parsed.success) return { ok: false, message: inputErrorMessage(parsed.error) };
  return { ok: true, data: parsed.data };
}
