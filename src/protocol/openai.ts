import { z } from "zod";

/**
 * The platform's OpenAI-compatible routes (docs/openai.md): a request to
 * `/v2/<endpoint>/openai/v1/<path>` reaches the worker as a job with this `input`.
 */
export const openAIJobInputSchema = z.looseObject({
  /** `/v1/<path>`: `/v1/chat/completions`, `/v1/completions`, `/v1/models`, ... */
  openai_route: z.string(),
  /** The request's JSON body; `{}` for a GET. */
  openai_input: z.unknown().optional(),
});
export type OpenAIJobInput = z.infer<typeof openAIJobInputSchema>;

/**
 * The metadata key `defineOpenAIHandler` sets on its (accept-anything) input schema, its value the
 * served model ids, so tools that see only the definition (the dashboard, `runlet dev`'s banner)
 * can tell an OpenAI handler.
 */
export const OPENAI_SCHEMA_MARK = "x-runlet-openai";

/** OpenAI's error body, which its client libraries turn into their typed errors. */
export interface OpenAIErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | number | null;
  };
}

/** Builds an OpenAI error body. */
export function openAIError(
  message: string,
  type: string,
  code: string | number | null = null,
  param: string | null = null,
): OpenAIErrorBody {
  return { error: { message, type, param, code } };
}
