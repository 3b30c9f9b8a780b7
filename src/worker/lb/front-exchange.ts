import type { MessagePort } from "node:worker_threads";
import type { AnswerData, AnswerHeaders, RequestHeaders, ToFrontRequests } from "./front-messages.js";

/**
 * One request the front thread passed on (front-messages.ts) and its answer, as the request server
 * on the main thread sees them: the request parsed once by the front thread, the answer posted
 * back whole or as a stream of chunks. A streamed answer is written under back-pressure: once a
 * window of text is unread by the client, {@link FrontExchange.write} says so and
 * {@link FrontExchange.drained} waits for the front thread's ack.
 */

/** How much text a streamed answer may have on its way before it waits for the client. @default 64 Ki characters */
const WINDOW = 64 * 1024;

/** Text this long or longer goes as bytes, its ArrayBuffer transferred rather than copied. */
const TRANSFER_AT = 64 * 1024;

/** One request and its answer. */
export class FrontExchange {
  readonly method: string;
  readonly url: string;
  readonly headers: RequestHeaders;
  /** The body's bytes (absent when the request had none). */
  readonly body: Uint8Array | undefined;
  /** The answer's status, once its head is sent. */
  statusCode = 0;
  /** The answer's status and headers are sent. */
  headersSent = false;
  /** The answer is complete. */
  finished = false;
  /** The client went away before the answer was complete, or the answer was cut. */
  destroyed = false;
  readonly #port: MessagePort;
  readonly #id: number;
  readonly #extra: Record<string, string> = {};
  readonly #onClose: (() => void)[] = [];
  readonly #onFinish: (() => void)[] = [];
  readonly #forget: () => void;
  #unacked = 0;
  #waiting: Promise<void> | undefined;
  #wake: (() => void) | undefined;

  constructor(
    port: MessagePort,
    request: {
      readonly id: number;
      readonly method: string;
      readonly url: string;
      readonly headers: RequestHeaders;
      readonly body: Uint8Array | undefined;
    },
    forget: () => void,
  ) {
    this.#port = port;
    this.#id = request.id;
    this.method = request.method;
    this.url = request.url;
    this.headers = request.headers;
    this.body = request.body;
    this.#forget = forget;
  }

  /** A header every answer of this request carries. */
  setHeader(name: string, value: string): void {
    this.#extra[name] = value;
  }

  /** Runs `listener` if the client goes away (or the answer is cut) before the answer is complete. */
  onClose(listener: () => void): void {
    this.#onClose.push(listener);
  }

  /** Runs `listener` once the answer is complete. */
  onFinish(listener: () => void): void {
    this.#onFinish.push(listener);
  }

  /** Sends the whole answer at once. */
  sendWhole(status: number, headers: AnswerHeaders, text: string): void {
    if (this.headersSent || this.destroyed) return;
    this.headersSent = true;
    this.statusCode = status;
    const body = payload(text);
    this.#post({ type: "whole", id: this.#id, status, headers: { ...headers, ...this.#extra }, body }, body);
    this.#finish();
  }

  /** Begins a streamed answer. */
  writeHead(status: number, headers: AnswerHeaders): void {
    if (this.headersSent || this.destroyed) return;
    this.headersSent = true;
    this.statusCode = status;
    this.#post({ type: "head", id: this.#id, status, headers: { ...headers, ...this.#extra } }, undefined);
  }

  /** Writes a piece of a streamed answer; false once the window is full: wait for {@link drained}. */
  write(text: string): boolean {
    if (this.finished || this.destroyed) return true;
    this.#unacked += text.length;
    const ack = this.#unacked >= WINDOW && this.#waiting === undefined;
    const data = payload(text);
    this.#post({ type: "chunk", id: this.#id, data, ack }, data);
    if (ack) {
      this.#unacked = 0;
      this.#waiting = new Promise((resolve) => {
        this.#wake = resolve;
      });
    }
    return this.#waiting === undefined;
  }

  /** Resolves once the client took what was written (or went away). */
  drained(): Promise<void> {
    return this.#waiting ?? Promise.resolve();
  }

  /** Ends a streamed answer. */
  end(): void {
    if (this.finished || this.destroyed) return;
    this.#post({ type: "end", id: this.#id }, undefined);
    this.#finish();
  }

  /** Cuts the answer: the client sees it incomplete. */
  destroy(): void {
    if (this.finished || this.destroyed) return;
    this.#post({ type: "cut", id: this.#id }, undefined);
    this.#gone();
  }

  /** The front thread: the client went away. */
  aborted(): void {
    if (this.finished || this.destroyed) return;
    this.#gone();
  }

  /** The front thread: the chunk asked for an ack was taken. */
  acked(): void {
    this.#unblock();
  }

  #post(message: ToFrontRequests, data: AnswerData | undefined): void {
    if (data instanceof Uint8Array) this.#port.postMessage(message, [data.buffer as ArrayBuffer]);
    else this.#port.postMessage(message);
  }

  #finish(): void {
    this.finished = true;
    this.#forget();
    this.#unblock();
    for (const listener of this.#onFinish) listener();
  }

  #gone(): void {
    this.destroyed = true;
    this.#forget();
    this.#unblock();
    for (const listener of this.#onClose) listener();
  }

  #unblock(): void {
    const wake = this.#wake;
    this.#waiting = undefined;
    this.#wake = undefined;
    wake?.();
  }
}

/** Short text as it is; long text as bytes in an ArrayBuffer of their own, to be transferred. */
function payload(text: string): AnswerData {
  if (text.length < TRANSFER_AT) return text;
  const bytes = Buffer.from(text, "utf8");
  // Only bytes that own their whole ArrayBuffer can be transferred (never a pooled slice).
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : text;
}
