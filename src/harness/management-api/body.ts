import { parseJson } from "../http-util.js";
import { exceedsJsonDepth, MAX_JSON_DEPTH } from "../json-depth.js";
import { type ManagementAnswer, problem } from "./answers.js";

/** Parses a v2 request body: a JSON object, or a 400 problem saying what came instead. */
export function readJsonBody(
  text: string,
): { value: Record<string, unknown> } | { answer: ManagementAnswer } {
  if (text.trim().length === 0) return { answer: problem(400, "a JSON object body is required") };
  if (exceedsJsonDepth(text, MAX_JSON_DEPTH)) {
    return {
      answer: problem(
        400,
        `the body nests objects and arrays deeper than the limit of ${MAX_JSON_DEPTH} levels`,
      ),
    };
  }
  // parseJson's message never quotes the body, which may carry env values such as keys.
  const parsed = parseJson(text);
  if (!parsed.ok) return { answer: problem(400, `the body is not JSON: ${parsed.message}`) };
  const value = parsed.value;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { answer: problem(400, "the body must be a JSON object") };
  }
  return { value: value as Record<string, unknown> };
}
