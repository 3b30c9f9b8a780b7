/**
 * The messages between the front thread (front-source.ts) and the request server on the main
 * thread, over the MessagePort that carries requests (docs/load-balancing.md, "Ports and health"):
 * the front thread parses each request once and posts it; the main thread posts its answer back,
 * whole or as a stream of chunks. Bodies travel as bytes in ArrayBuffers of their own, transferred
 * rather than copied.
 */

/** A request's headers as node:http parsed them (names in lower case). */
export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** An answer's headers. */
export type AnswerHeaders = Readonly<Record<string, string | number>>;

/** An answer's body: text, or bytes (transferred). */
export type AnswerData = string | Uint8Array;

/** From the front thread. */
export type FromFrontRequests =
  /** A request, its body read whole within the limit (absent when it had none). */
  | {
      readonly type: "request";
      readonly id: number;
      readonly method: string;
      readonly url: string;
      readonly headers: RequestHeaders;
      readonly body: Uint8Array | undefined;
    }
  /** The client went away before its answer was complete. */
  | { readonly type: "abort"; readonly id: number }
  /** The chunk asked for an ack was written and drained (or the client went away). */
  | { readonly type: "ack"; readonly id: number };

/** To the front thread. */
export type ToFrontRequests =
  /** The whole answer at once. */
  | {
      readonly type: "whole";
      readonly id: number;
      readonly status: number;
      readonly headers: AnswerHeaders;
      readonly body: AnswerData;
    }
  /** A streamed answer's status and headers; chunks follow, then `end` or `cut`. */
  | { readonly type: "head"; readonly id: number; readonly status: number; readonly headers: AnswerHeaders }
  /** A piece of a streamed answer; with `ack`, the front thread acks it once the client took it. */
  | { readonly type: "chunk"; readonly id: number; readonly data: AnswerData; readonly ack: boolean }
  /** The streamed answer is complete. */
  | { readonly type: "end"; readonly id: number; readonly data?: AnswerData }
  /** The answer failed after it began: the connection is cut, so the client sees it incomplete. */
  | { readonly type: "cut"; readonly id: number };
