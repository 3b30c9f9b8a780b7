/** The platform's OpenAI-compatible routes, `/v2/<endpoint>/openai/v1/*` (docs/openai.md). */
export { type OpenAIErrorBody, openAIError } from "./error-body.js";
export { JobFeed } from "./job-feed.js";
export { handleOpenAIRoute, OPENAI_ROUTE, type OpenAIRoutesContext } from "./routes.js";
