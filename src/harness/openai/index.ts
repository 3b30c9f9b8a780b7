/** The platform's OpenAI-compatible routes, `/v2/<endpoint>/openai/v1/*` (docs/openai.md). */
export { type OpenAIErrorBody, openAIError } from "./error-body.js";
export { JobFeed } from "./job-feed.js";
export { OPENAI_ROUTE_TABLE, type OpenAIRoutesContext, openAIFamily } from "./routes.js";
