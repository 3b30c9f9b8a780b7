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

/** HTTP status for an error `type` when its `code` is not itself a status. */
const STATUS_OF_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  rate_limit_error: 429,
};

/** HTTP status for an error `code` OpenAI answers with a status its `type` does not give. */
const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  // OpenAI: 404 with type invalid_request_error.
  model_not_found: 404,
};

/**
 * The status for an OpenAI error: its `code` when that is an HTTP client-error status
 * (OpenAI-compatible servers such as vLLM put the status there), else by its `code` for the few
 * OpenAI answers with their own status (`model_not_found` 404), else by its `type`, else 500.
 */
export function statusOf(body: OpenAIErrorBody): number {
  const { code, type } = body.error;
  if (typeof code === "number" && Number.isInteger(code) && code >= 400 && code <= 499) return code;
  if (typeof code === "string" && Object.hasOwn(STATUS_OF_CODE, code)) return STATUS_OF_CODE[code]!;
  // Own keys only: a `type` such as "constructor" must not find Object.prototype's members.
  return Object.hasOwn(STATUS_OF_TYPE, type) ? STATUS_OF_TYPE[type]! : 500;
}
