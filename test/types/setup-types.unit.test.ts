import { describe, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { defineBatchHandler, defineHandler, type HandlerContext } from "../../src/index.js";
import { defineOpenAIHandler } from "../../src/openai/index.js";
import { startWorker } from "../../src/worker/index.js";

/**
 * Type tests of `setup`: `ctx.state` is typed from what setup returns, with no cast, on every
 * define function (tsc checks this file in `npm run typecheck`; expectTypeOf is a no-op at run time).
 */

interface Model {
  run(text: string): Promise<string>;
  release(): Promise<void>;
}
declare function loadModel(): Promise<Model>;

describe("ctx.state is setup's return type", () => {
  it("flows from an async setup method to the handler and teardown of defineHandler", () => {
    const definition = defineHandler({
      input: z.object({ text: z.string() }),
      setupTimeoutMs: 600_000,
      async setup({ log, signal, progress, sidecar, sidecars }) {
        expectTypeOf(signal).toEqualTypeOf<AbortSignal>();
        expectTypeOf(progress).toEqualTypeOf<(text: string) => void>();
        // The sidecars' URLs, typed as the handler's ctx.sidecar and ctx.sidecars.
        expectTypeOf(sidecar).toEqualTypeOf<HandlerContext<unknown>["sidecar"]>();
        expectTypeOf(sidecars).toEqualTypeOf<HandlerContext<unknown>["sidecars"]>();
        expectTypeOf(sidecar.url).toEqualTypeOf<string>();
        log.info("loading");
        return { model: await loadModel() };
      },
      async teardown(state) {
        expectTypeOf(state).toEqualTypeOf<{ model: Model }>();
        await state.model.release();
      },
      async handler({ input, state }) {
        expectTypeOf(state).toEqualTypeOf<{ model: Model }>();
        // @ts-expect-error: the state has no such member
        state.tokenizer;
        return state.model.run(input.text);
      },
    });
    // A definition with state still goes wherever a HandlerDefinition goes.
    expectTypeOf(startWorker).toBeCallableWith(definition, { env: {} });
  });

  it("is undefined without a setup, and typed for a sync setup", () => {
    defineHandler({
      handler: ({ state }) => {
        expectTypeOf(state).toEqualTypeOf<undefined>();
      },
    });
    defineHandler({
      setup: () => 42,
      handler: ({ state }) => {
        expectTypeOf(state).toEqualTypeOf<number>();
        return state + 1;
      },
    });
  });

  it("flows to a batch handler's context", () => {
    defineBatchHandler({
      input: z.object({ text: z.string() }),
      setup: async () => ({ model: await loadModel() }),
      handler: async ({ inputs, state }) => {
        expectTypeOf(state).toEqualTypeOf<{ model: Model }>();
        return Promise.all(inputs.map((input) => state.model.run(input.text)));
      },
    });
  });

  it("flows to an OpenAI handler's chat context", () => {
    defineOpenAIHandler({
      models: ["m"],
      setup: async () => ({ model: await loadModel() }),
      async *chat(_request, { state }) {
        expectTypeOf(state).toEqualTypeOf<{ model: Model }>();
        yield await state.model.run("hi");
      },
    });
  });
});
