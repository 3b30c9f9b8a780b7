import { describe, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { createClient, type JobRecord } from "../../src/client/index.js";
import { defineBatchHandler, defineHandler, JobError } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";

/**
 * Type tests: `npm test` type-checks this file (tsc over test/), and vitest runs it (expectTypeOf
 * is a no-op at run time). A wrong type here fails `npm run typecheck`.
 */

const echo = defineHandler({
  input: z.object({ text: z.string().default("hello"), times: z.number().int() }),
  handler: ({ input }) => ({ echo: input.text.repeat(input.times) }),
});

const tokens = defineHandler({
  input: z.object({ prompt: z.string() }),
  async *handler({ input }) {
    for (const word of input.prompt.split(" ")) yield { token: word };
  },
});

const asyncResult = defineHandler({
  handler: async () => 42,
});

const embed = defineBatchHandler({
  input: z.object({ text: z.string(), dims: z.number().int().default(4) }),
  batch: { maxSize: 32, maxWaitMs: 10 },
  handler: async ({ inputs }) =>
    inputs.map((input) => (input.text === "" ? new JobError("empty text") : { vector: [input.dims] })),
});

const client = createClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1" });

describe("types flow from the handler to the client", () => {
  it("infers input (the schema's input side), output and stream item from defineHandler", () => {
    const ep = client.endpoint<typeof echo>("echo");
    expectTypeOf(ep.run)
      .parameter(0)
      .toHaveProperty("input")
      .toEqualTypeOf<{ text?: string | undefined; times: number }>();
    expectTypeOf(ep.runsync)
      .returns.resolves.toHaveProperty("output")
      .toEqualTypeOf<{ echo: string } | undefined>();
    expectTypeOf(ep.wait)
      .returns.resolves.toHaveProperty("output")
      .toEqualTypeOf<{ echo: string } | undefined>();
    expectTypeOf(ep.stream).returns.toEqualTypeOf<AsyncGenerator<never, void, undefined>>();
  });

  it("types a generator handler's yields as stream items, and its output as their list", () => {
    const ep = client.endpoint<typeof tokens>("tokens");
    expectTypeOf(ep.stream).returns.toEqualTypeOf<AsyncGenerator<{ token: string }, void, undefined>>();
    expectTypeOf(ep.status)
      .returns.resolves.toHaveProperty("output")
      .toEqualTypeOf<{ token: string }[] | undefined>();
    expectTypeOf(ep.run).parameter(0).toHaveProperty("input").toEqualTypeOf<{ prompt: string }>();
  });

  it("types a batch handler's inputs from the schema and each job's output from its places (JobError left out)", () => {
    const ep = client.endpoint<typeof embed>("embed");
    expectTypeOf(ep.run)
      .parameter(0)
      .toHaveProperty("input")
      .toEqualTypeOf<{ text: string; dims?: number | undefined }>();
    expectTypeOf(ep.runsync)
      .returns.resolves.toHaveProperty("output")
      .toEqualTypeOf<{ vector: number[] } | undefined>();
    expectTypeOf(ep.stream).returns.toEqualTypeOf<AsyncGenerator<never, void, undefined>>();
    defineBatchHandler({
      input: z.object({ text: z.string() }),
      handler: ({ inputs }) => {
        expectTypeOf(inputs).toEqualTypeOf<readonly { text: string }[]>();
        return inputs;
      },
    });
  });

  it("awaits an async handler's result, and takes unknown input without a schema", () => {
    const ep = client.endpoint<typeof asyncResult>("n");
    expectTypeOf(ep.runsync).returns.resolves.toHaveProperty("output").toEqualTypeOf<number | undefined>();
    expectTypeOf(ep.run).parameter(0).toHaveProperty("input").toBeUnknown();
  });

  it("keeps the explicit form and the untyped default", () => {
    const named = client.endpoint<{ prompt: string }, string, string>("x");
    expectTypeOf(named.stream).returns.toEqualTypeOf<AsyncGenerator<string, void, undefined>>();
    expectTypeOf(named.runsync).returns.resolves.toHaveProperty("output").toEqualTypeOf<string | undefined>();
    const plain = client.endpoint("x");
    expectTypeOf(plain.run).parameter(0).toHaveProperty("input").toEqualTypeOf<Record<string, unknown>>();
    expectTypeOf(plain.status).returns.resolves.toExtend<JobRecord>();
  });

  it("gives createHarness({ handler }) an endpoint typed the same way", () => {
    // Only the types are checked; the function is never called.
    const typed = () => createHarness({ handler: tokens });
    type Endpoint = Awaited<ReturnType<typeof typed>>["endpoint"];
    expectTypeOf<Endpoint["stream"]>().returns.toEqualTypeOf<
      AsyncGenerator<{ token: string }, void, undefined>
    >();
    expectTypeOf<Endpoint["run"]>().parameter(0).toHaveProperty("input").toEqualTypeOf<{ prompt: string }>();
    const echoHarness = () => createHarness({ handler: echo });
    type EchoEndpoint = Awaited<ReturnType<typeof echoHarness>>["endpoint"];
    expectTypeOf<EchoEndpoint["runsync"]>()
      .returns.resolves.toHaveProperty("output")
      .toEqualTypeOf<{ echo: string } | undefined>();
  });
});
