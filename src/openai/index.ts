/**
 * `runlet/openai`: handlers that speak OpenAI's API on the platform's `/openai/v1/*` routes
 * (docs/openai.md).
 */
export {
  defineOpenAIHandler,
  type OpenAIContext,
  type OpenAIHandlerOptions,
  type OpenAIModel,
} from "./define-openai-handler.js";
export { openAIJobError } from "./errors.js";
export {
  type ChunkObject,
  DONE_EVENT,
  type Generation,
  type GenerationResult,
  type UsageCounts,
} from "./generation.js";
export {
  type ChatCompletionMessageToolCall,
  type ChatCompletionRequest,
  type ChatCompletionTool,
  type ChatCompletionToolCallDelta,
  type ChatCompletionToolChoice,
  type ChatMessage,
  type CompletionRequest,
  chatCompletionRequestSchema,
  chatMessageSchema,
  completionRequestSchema,
  MAX_CHAT_MESSAGES,
  MAX_STOP_CHARS,
  MAX_STOP_SEQUENCES,
  MAX_TOOLS,
  type ResponseFormat,
} from "./schemas.js";
export { MAX_RELAY_BODY_BYTES, type OpenAIRelayOptions } from "./sidecar-relay.js";
