// The llm starter is the source (templates/llm/src/handler.ts): the example runs it as it ships.
export { configFromEnv, default, type LlmConfig, llmHandler } from "../../templates/llm/src/handler.js";
