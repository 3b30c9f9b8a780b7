import { MessageChannel, type MessagePort, Worker as Thread } from "node:worker_threads";
import { settle } from "../../task-sink.js";
import { FRONT_THREAD_SOURCE } from "./front-source.js";
import type { LbSettings } from "./lb-config.js";
import { LB_MAX_BODY_BYTES } from "./lb-config.js";

/**
 * The main thread's handle on the front thread (front-source.ts): the thread that holds the
 * load-balancing port and answers health, so a handler that blocks the main thread cannot stall
 * health (docs/load-balancing.md, "Ports and health").
 */

/** What health answers: 204 starting, 200 ready, 503 unhealthy or stopping. */
export type FrontState = "starting" | "ready" | "unhealthy" | "stopping";

type FromFront =
  | { readonly type: "listening"; readonly port: number; readonly healthPort: number }
  | { readonly type: "error"; readonly code: string; readonly message: string }
  | { readonly type: "closed" };

/** The ports the front thread bound (the real ones when 0 was asked for). */
export interface FrontPorts {
  readonly port: number;
  readonly healthPort: number;
}

/** The front thread of one worker. */
export class FrontThread {
  readonly #thread: Thread;
  /** The main thread's end of the port requests come over (front-messages.ts). */
  readonly requests: MessagePort;
  readonly #closed: Promise<void>;
  /** Resolves with the bound ports, or rejects with why the port could not be bound. */
  readonly listening: Promise<FrontPorts>;
  /** Resolves with a reason if the thread ends before it was closed. */
  readonly died: Promise<string>;
  #closing = false;

  constructor(settings: LbSettings) {
    const channel = new MessageChannel();
    this.requests = channel.port1;
    this.#thread = new Thread(FRONT_THREAD_SOURCE, {
      eval: true,
      workerData: {
        port: settings.port,
        healthPort: settings.healthPort,
        host: settings.host,
        healthPath: settings.healthPath,
        maxBodyBytes: LB_MAX_BODY_BYTES,
        requests: channel.port2,
      },
      transferList: [channel.port2],
    });
    let onListening!: (ports: FrontPorts) => void;
    let onFailed!: (err: Error) => void;
    this.listening = new Promise((resolve, reject) => {
      onListening = resolve;
      onFailed = reject;
    });
    // The start awaits it; a failure before anyone awaits must not count as unhandled.
    settle(this.listening, () => undefined);
    let onDied!: (reason: string) => void;
    this.died = new Promise((resolve) => {
      onDied = resolve;
    });
    let onClosed!: () => void;
    const closed = new Promise<void>((resolve) => {
      onClosed = resolve;
    });
    this.#thread.on("message", (message: FromFront) => {
      if (message.type === "listening") onListening({ port: message.port, healthPort: message.healthPort });
      else if (message.type === "error") {
        const hint =
          message.code === "EACCES" ? " (a port below 1024 needs root: set PORT to a port above 1023)" : "";
        onFailed(new Error(`cannot bind port ${settings.port}: ${message.message}${hint}`));
      } else onClosed();
    });
    this.#thread.on("error", (err) => {
      onFailed(err);
      onDied(`the front thread failed: ${err.message}`);
    });
    this.#thread.on("exit", (code) => {
      onFailed(new Error(`the front thread ended (exit code ${code}) before it bound the port`));
      onClosed();
      if (!this.#closing) onDied(`the front thread ended (exit code ${code})`);
    });
    this.#closed = closed;
  }

  /** Tells the front thread the request server listens on {@link requests}: requests are passed on from now. */
  serving(): void {
    this.#thread.postMessage({ type: "serving" });
  }

  /** What health answers from now on. */
  state(state: FrontState): void {
    if (!this.#closing) this.#thread.postMessage({ type: "state", state });
  }

  /** Closes the ports (open connections end first, cut after a second) and ends the thread. */
  async close(): Promise<void> {
    if (this.#closing) return this.#closed;
    this.#closing = true;
    this.#thread.postMessage({ type: "close" });
    await this.#closed;
    await this.#thread.terminate();
    this.requests.close();
  }
}
