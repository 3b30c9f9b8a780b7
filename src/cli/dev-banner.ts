import { exampleOf } from "../harness/dashboard/static/schema-form.js";
import type { HandlerInfo } from "../harness/index.js";

/** Quotes `text` for a POSIX shell. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** Where `runlet dev` serves, and what it knows of the handler. */
export interface BannerFacts {
  /** `http://127.0.0.1:8787/v2/local` */
  readonly endpoint: string;
  readonly apiKey: string;
  /** test_input.json, when the project has one. */
  readonly sample: unknown;
  /**
   * The file `sample` came from, relative to where `runlet dev` runs: a body longer than
   * {@link MAX_INLINE_BODY} characters is read from it (`--data-binary @test_input.json`) rather
   * than printed.
   */
  readonly sampleFile?: string;
  /** What the worker said of its handler; undefined before a worker has started. */
  readonly info: HandlerInfo | undefined;
  /**
   * The endpoint's kind: `lb` (`runlet dev --mode lb`, `endpoint` being its `/lb/<id>` route) gets
   * the load-balancing routes of docs/load-balancing.md. @default "queue"
   */
  readonly mode?: "queue" | "lb";
}

const LABEL = 10;
/** Longest request body printed in the curl, in characters; a longer one is pointed at in its file. */
export const MAX_INLINE_BODY = 200;
const line = (label: string, text: string) => `  ${label.padEnd(LABEL)}${text}`;

/**
 * The banner's lines that show how to call the handler, fitted to it: an OpenAI handler gets its
 * base URL and a chat completions curl; a streaming one `/run` then `/stream` (a `/runsync`
 * answer holds none of the streamed items); any other a `/runsync` curl. The body is
 * test_input.json, else an example of the handler's input schema. On a load-balancing endpoint
 * (`mode: "lb"`) the routes are the worker's own: the OpenAI base URL is `<endpoint>/v1` (no
 * `/openai` prefix), a streaming handler's items come as server-sent events from one
 * `POST /stream`, any other answers `POST /runsync`.
 */
export function tryLines({ endpoint, apiKey, sample, sampleFile, info, mode }: BannerFacts): string[] {
  const lb = mode === "lb";
  const auth = `-H ${shellQuote(`Authorization: Bearer ${apiKey}`)}`;
  const json = "-H 'Content-Type: application/json'";
  if (info?.openai === true) {
    const base = lb ? `${endpoint}/v1` : `${endpoint}/openai/v1`;
    const body = { model: info.models?.[0] ?? "model", messages: [{ role: "user", content: "Hello" }] };
    return [
      line("openai", `${base}  (an OpenAI client's base URL; its API key is the key above)`),
      line("try", `curl -s ${base}/chat/completions ${auth} ${json} -d ${shellQuote(JSON.stringify(body))}`),
    ];
  }
  const body = JSON.stringify(sample ?? { input: info === undefined ? {} : exampleOf(info.inputSchema) });
  // A large test_input.json (an image in base64, say) would make the line unusable: curl reads it.
  const data =
    sample !== undefined && sampleFile !== undefined && body.length > MAX_INLINE_BODY
      ? `--data-binary ${shellQuote(`@${sampleFile}`)}`
      : `-d ${shellQuote(body)}`;
  if (info?.streaming === true && lb) {
    return [
      line("try", `curl -sN -X POST ${endpoint}/stream ${auth} ${json} ${data}`),
      line(
        "",
        "(server-sent events: one per item yielded, then event: done; /runsync answers them as a list)",
      ),
    ];
  }
  if (info?.streaming === true) {
    return [
      line(
        "try",
        `id=$(curl -s -X POST ${endpoint}/run ${auth} ${json} ${data} | sed -E 's/.*"id":"([^"]+)".*/\\1/')`,
      ),
      line("then", `curl -s ${endpoint}/stream/$id ${auth}`),
      line(
        "",
        "(each /stream call answers with the items so far; call it again until its status is COMPLETED)",
      ),
    ];
  }
  return [line("try", `curl -s -X POST ${endpoint}/runsync ${auth} ${json} ${data}`)];
}
