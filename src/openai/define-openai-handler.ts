import { z } from "zod";
import { JobError, RunletError } from "../errors.js";
import {
  defineHandler,
  type HandlerContext,
  type HandlerDefinition,
  type HandlerFunction,
  type HandlerOptions,
} from "../handler/index.js";
import { jobSecrets, redactText } from "../log/redact-text.js";
import { OPENAI_SCHEMA_MARK, openAIJobInputSchema } from "../protocol/openai.js";
import { invalidBodyError, openAIJobError } from "./errors.js";
import {
  aggregateResponse,
  type Generation,
  type GenerationKind,
  type GenerationRequest,
  streamFrames,
} from "./generation.js";
import {
  aggregateResponsesAnswer,
  chatRequestOf,
  type ResponsesWire,
  responsesErrorOf,
  responsesRequestSchema,
  streamResponsesEvents,
} from "./responses.js";
import {
  type ChatCompletionRequest,
  type CompletionRequest,
  chatCompletionRequestSchema,
  completionRequestSchema,
} from "./schemas.js";
import { checkRelay, type OpenAIRelayOptions, relayToSidecar } from "./sidecar-relay.js";

/** What chat and completions functions receive besides the request: the job's usual context. */
export type OpenAIContext<State = undefined> = HandlerContext<unknown, State>;

/** A model the endpoint serves, as `/v1/models` lists it. */
export interface OpenAIModel {
  readonly id: string;
  /** @default "runlet" */
  readonly owned_by?: string;
  /** Unix seconds. @default when the handler was defined */
  readonly created?: number;
}

/** Options of {@link defineOpenAIHandler}: the OpenAI functions, plus any `defineHandler` option. */
export interface OpenAIHandlerOptions<State = undefined>
  extends Omit<HandlerOptions<z.ZodType, unknown, State>, "input" | "handler"> {
  /** The models served: `/v1/models` lists them, and a request naming another model answers 404. */
  readonly models: readonly (string | OpenAIModel)[];
  /** Serves `/v1/chat/completions`: yield text deltas (or chunk objects); return finish_reason/usage if you know them. */
  readonly chat?: (request: ChatCompletionRequest, context: OpenAIContext<State>) => Generation;
  /** Serves `/v1/completions`, as `chat` does. */
  readonly completions?: (request: CompletionRequest, context: OpenAIContext<State>) => Generation;
  /**
   * Relay every chat and completions request to the handler's OpenAI-compatible sidecar (the
   * `sidecar` option) instead of `chat`/`completions`: its answer, or its server-sent events as
   * they come, go back as they are; a job-stop, the deadline or a client that hangs up closes the
   * upstream request (docs/models.md, "Relaying OpenAI requests to a sidecar"). @default off
   */
  readonly relay?: true | OpenAIRelayOptions;
  /** Runs jobs that are not OpenAI requests (no `input.openai_route`), so one endpoint serves both. @default none: such jobs fail */
  readonly handler?: HandlerFunction<unknown, unknown, State>;
}

function invalid(message: string): RunletError {
  return new RunletError("RUNLET_HANDLER_INVALID", `defineOpenAIHandler: ${message}`);
}

function checkModels(models: unknown): OpenAIModel[] {
  if (!Array.isArray(models) || models.length === 0) {
    throw invalid("models must be a non-empty array of model ids or { id } objects");
  }
  const created = Math.floor(Date.now() / 1000);
  return models.map((m, i) => {
    const model = typeof m === "string" ? { id: m } : (m as OpenAIModel);
    if (typeof model?.id !== "string" || model.id === "") {
      throw invalid(`models[${i}] must be a model id or { id: string }, got ${JSON.stringify(m)}`);
    }
    return { id: model.id, owned_by: model.owned_by ?? "runlet", created: model.created ?? created };
  });
}

/**
 * Describes a handler that speaks OpenAI's API on the platform's `/openai/v1/*` routes: `chat` and
 * `completions` get the validated request and yield text; runlet builds the chunks, the stream,
 * the aggregated response, usage and errors (docs/openai.md). Any `defineHandler` option applies
 * (`streamCoalesceMs` batches frames, as OpenAI-compatible servers do).
 *
 * @example
 * export default defineOpenAIHandler({
 *   models: ["echo-1"],
 *   async *chat(request, { signal }) {
 *     for (const word of lastUserText(request).split(" ")) yield `${word} `;
 *   },
 * });
 */
export function defineOpenAIHandler<State = undefined>(
  options: OpenAIHandlerOptions<State>,
): HandlerDefinition {
  if (typeof options !== "object" || options === null) throw invalid("expected an options object");
  const { models: rawModels, chat, completions, handler: plain, relay: rawRelay, ...rest } = options;
  const models = checkModels(rawModels);
  const relay = checkRelay(rawRelay, "defineOpenAIHandler");
  for (const [name, fn] of [
    ["chat", chat],
    ["completions", completions],
    ["handler", plain],
  ] as const) {
    if (fn !== undefined && typeof fn !== "function") throw invalid(`${name} must be a function`);
  }
  if (relay !== undefined) {
    if (chat !== undefined || completions !== undefined) {
      throw invalid("relay serves chat and completions itself: give relay or chat/completions, not both");
    }
    if (rest.sidecar === undefined) throw invalid("relay needs a sidecar option (the server to relay to)");
  } else if (chat === undefined && completions === undefined) {
    throw invalid("give chat, completions or both (or relay with a sidecar)");
  }
  const modelIds = new Set(models.map((m) => m.id));
  const list = {
    object: "list",
    data: models.map((m) => ({ id: m.id, object: "model", created: m.created, owned_by: m.owned_by })),
  };

  const serve = (route: string, body: unknown, context: OpenAIContext<State>): unknown => {
    if (route === "/v1/models") return list;
    if (route.startsWith("/v1/models/")) {
      const id = route.slice("/v1/models/".length);
      const model = list.data.find((m) => m.id === id);
      if (model === undefined) throw modelNotFound(id);
      return model;
    }
    if (route === "/v1/responses" && chat !== undefined) {
      const request = parseBody(responsesRequestSchema, body, modelIds);
      // The chat request it asks for, checked as a chat request is (its fields as the client named them).
      let chatRequest: ChatCompletionRequest;
      try {
        chatRequest = parseBody(chatCompletionRequestSchema, chatRequestOf(request), modelIds);
      } catch (err) {
        // Its errors name the Responses request's parameters (input, text.format), not the chat's.
        throw responsesErrorOf(err, request);
      }
      const wire: ResponsesWire = {
        id: `resp_${context.job.id}`,
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        maxTokens: request.max_output_tokens ?? undefined,
        signal: context.signal,
        request,
        scrub: (text) => redactText(text, context.log, jobSecrets(context.job.raw)),
      };
      const generation = started("chat", () => chat(chatRequest, context));
      return request.stream === true
        ? streamResponsesEvents(wire, generation)
        : aggregateResponsesAnswer(wire, generation);
    }
    if (relay !== undefined && (route === "/v1/chat/completions" || route === "/v1/completions")) {
      const schema = route === "/v1/chat/completions" ? chatCompletionRequestSchema : completionRequestSchema;
      parseBody(schema, body, modelIds);
      // The body as the client sent it (fields this side's schema does not know included).
      return relayToSidecar(relay, route, body as Record<string, unknown>, context);
    }
    if (route === "/v1/chat/completions" && chat !== undefined) {
      const request = parseBody(chatCompletionRequestSchema, body, modelIds);
      const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined;
      return generate("chat", request, maxTokens, context, () => chat(request, context));
    }
    if (route === "/v1/completions" && completions !== undefined) {
      const request = parseBody(completionRequestSchema, body, modelIds);
      if (
        Array.isArray(request.prompt) &&
        request.prompt.length !== 1 &&
        typeof request.prompt[0] !== "number"
      ) {
        throw openAIJobError("this endpoint takes one prompt per request", "invalid_request_error", {
          code: "invalid_value",
          param: "prompt",
        });
      }
      return generate("completion", request, request.max_tokens ?? undefined, context, () =>
        completions(request, context),
      );
    }
    throw openAIJobError(`this endpoint does not serve ${route}`, "not_found_error", {
      code: "unknown_route",
    });
  };

  return defineHandler<z.ZodType, unknown, State>({
    ...rest,
    // Accepts anything (plain jobs go to `handler`); the mark tells the dashboard and `runlet dev` what this is.
    input: z.unknown().meta({ [OPENAI_SCHEMA_MARK]: models.map((m) => m.id) }),
    handler: (context) => {
      const parsed = openAIJobInputSchema.safeParse(context.input);
      if (!parsed.success) {
        if (plain !== undefined) return plain(context);
        throw new JobError(
          "this endpoint serves OpenAI requests only: the job input needs openai_route (send requests to /openai/v1/...)",
        );
      }
      return serve(parsed.data.openai_route, parsed.data.openai_input ?? {}, context);
    },
  });
}

/** OpenAI's answer for a model the endpoint does not serve: 404, type `invalid_request_error`. */
function modelNotFound(model: string): JobError {
  return openAIJobError(`The model \`${model}\` does not exist`, "invalid_request_error", {
    code: "model_not_found",
    param: "model",
  });
}

/** The request body checked against its schema, or the job fails with the `invalid_request_error`. */
function parseBody<
  S extends z.ZodType<{
    model: string;
    n?: number | null | undefined;
    stream?: boolean | null | undefined;
    stream_options?: unknown;
  }>,
>(schema: S, body: unknown, models: ReadonlySet<string>): z.output<S> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalidBodyError(parsed.error);
  const request = parsed.data;
  if ((request.n ?? 1) !== 1) {
    throw openAIJobError("n must be 1: this endpoint makes one choice per request", "invalid_request_error", {
      code: "invalid_value",
      param: "n",
    });
  }
  if (request.stream_options !== undefined && request.stream_options !== null && request.stream !== true) {
    throw openAIJobError(
      "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
      "invalid_request_error",
      { code: "invalid_value", param: "stream_options" },
    );
  }
  if (!models.has(request.model)) throw modelNotFound(request.model);
  return request;
}

/** Runs a chat or completions function: the stream's frames when the request streams, else one response. */
function generate(
  kind: GenerationKind,
  request: ChatCompletionRequest | CompletionRequest,
  maxTokens: number | undefined,
  context: OpenAIContext<unknown>,
  start: () => Generation,
): AsyncGenerator<string> | Promise<Record<string, unknown>> {
  const wire: GenerationRequest = {
    kind,
    id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${context.job.id}`,
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    maxTokens,
    includeUsage: request.stream_options?.include_usage === true,
    signal: context.signal,
  };
  const generation = started(kind, start);
  return request.stream === true ? streamFrames(wire, generation) : aggregateResponse(wire, generation);
}

/** The generator a chat or completions function returned, or a RUNLET_HANDLER_INVALID error saying what it must be. */
function started(kind: GenerationKind, start: () => Generation): Generation {
  const generation = start();
  if (typeof (generation as { next?: unknown })?.next !== "function") {
    throw new RunletError(
      "RUNLET_HANDLER_INVALID",
      `defineOpenAIHandler: ${kind === "chat" ? "chat" : "completions"} must return a generator (write it as function* or async function*)`,
    );
  }
  return generation;
}
