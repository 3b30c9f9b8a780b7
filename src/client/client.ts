import { createEndpointClient } from "./endpoint.js";
import type { EndpointClientFor } from "./infer.js";
import { type ClientOptions, resolveClientOptions } from "./options.js";
import { createTransport } from "./transport.js";

/** A client of the job API (docs/protocol.md, "Job API"), for the platform and runlet's harness alike. */
export interface Client {
  /**
   * The job API of one endpoint. `endpoint<typeof handler>(id)` types input, output and stream
   * items from the `defineHandler` result; `endpoint<TInput, TOutput, TStreamItem>(id)` names them.
   */
  endpoint<TInput = Record<string, unknown>, TOutput = unknown, TStreamItem = unknown>(
    endpointId: string,
  ): EndpointClientFor<TInput, TOutput, TStreamItem>;
}

/**
 * Creates a job-API client. Options are checked once; bad ones throw RUNLET_CONFIG_INVALID.
 * Error answers become RunletError RUNLET_CLIENT_HTTP with `details.status` and `details.body`.
 *
 * @example
 * const client = createClient({ apiKey: process.env.API_KEY!, baseUrl: "http://127.0.0.1:8000" });
 * const ep = client.endpoint<typeof handler>("my-endpoint"); // or <{ prompt: string }, string, string>
 * const { id } = await ep.run({ input: { prompt: "hi" } });
 * for await (const token of ep.stream(id)) process.stdout.write(token);
 */
export function createClient(options: ClientOptions): Client {
  const transport = createTransport(resolveClientOptions(options));
  return {
    endpoint: <TInput, TOutput, TStreamItem>(endpointId: string) =>
      // The type parameters only describe the answers; at run time every endpoint is the same.
      createEndpointClient(transport, endpointId) as EndpointClientFor<TInput, TOutput, TStreamItem>,
  };
}
