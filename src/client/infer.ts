/**
 * Types that flow from a handler to its client, as hono's `hc<typeof app>` does:
 * `client.endpoint<typeof handler>("id")` reads the input, output and stream-item types off the
 * `defineHandler(...)` result. Type-only: nothing here exists at run time.
 */
import type { z } from "zod";
import type { HandlerDefinition } from "../handler/define-handler.js";
import type { EndpointClient } from "./types.js";

// biome-ignore lint/suspicious/noExplicitAny: stands for "whatever it is" in the patterns below
type Any = any;
type AnyDefinition = HandlerDefinition<Any, Any>;

/** What a client sends as `input`: the schema's input type (before defaults and transforms). */
export type HandlerInput<D> = D extends HandlerDefinition<infer S, Any> ? z.input<S> : never;

type Yielded<R> = R extends Generator<infer Y, Any, Any> | AsyncGenerator<infer Y, Any, Any> ? Y : never;

/**
 * The job's output: what the handler returns (awaited); for a generator, the list of yielded
 * items (`[]` unless `returnAggregateStream`).
 */
export type HandlerOutput<D> =
  D extends HandlerDefinition<Any, infer R>
    ? [Yielded<R>] extends [never]
      ? Awaited<R>
      : Yielded<R>[]
    : never;

/** One item of the job's stream: what the handler yields (`never` when it does not stream). */
export type HandlerStreamItem<D> = D extends HandlerDefinition<Any, infer R> ? Yielded<R> : never;

/** The client of an endpoint that runs `D`. */
export type EndpointClientOf<D extends AnyDefinition> = EndpointClient<
  HandlerInput<D>,
  HandlerOutput<D>,
  HandlerStreamItem<D>
>;

/**
 * `endpoint<T>()`'s client: typed from the handler when `T` is a `defineHandler` result (`typeof
 * handler`), else `T` is the input type and the next two parameters the output and stream item.
 */
export type EndpointClientFor<T, TOutput, TStreamItem> = T extends AnyDefinition
  ? EndpointClientOf<T>
  : EndpointClient<T, TOutput, TStreamItem>;
