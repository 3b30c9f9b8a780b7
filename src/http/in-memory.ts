import type { Socket } from "node:net";
import type { Duplex } from "node:stream";

/**
 * Connections in memory for node:http's client (the transport's `connect` option, for tests: a
 * worker talking to `Harness.inMemory` through `Harness.connect`, no socket on either side). A
 * stream pair is not a socket: node:http's client calls a few of a socket's own methods on it,
 * and a timeout it sets must still fire. {@link asSocket} gives the stream those methods, with
 * the idle timeout a TCP socket has: it fires after `ms` without a byte read or written.
 */

/** Opens one connection in memory (a stream pair's end, as `Harness.connect` returns). */
export type Connect = () => Duplex;

/** What {@link asSocket} adds to a stream. */
interface SocketMethods {
  setTimeout(ms: number, onTimeout?: () => void): SocketMethods;
  setNoDelay(): SocketMethods;
  setKeepAlive(): SocketMethods;
  ref(): SocketMethods;
  unref(): SocketMethods;
}

/**
 * `stream` with the socket methods node:http's client calls: `setTimeout` (an idle timer reset by
 * every byte read or written, emitting `timeout` as a socket does; 0 turns it off) and no-op
 * `setNoDelay`, `setKeepAlive`, `ref` and `unref` (there is no handle to keep the loop alive).
 */
export function asSocket(stream: Duplex): Socket {
  let idleMs = 0;
  let timer: NodeJS.Timeout | undefined;
  let watching = false;
  const arm = (): void => {
    clearTimeout(timer);
    timer = idleMs > 0 && !stream.destroyed ? setTimeout(() => stream.emit("timeout"), idleMs) : undefined;
  };
  const touch = (): void => {
    if (timer !== undefined) arm();
  };
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  const methods: SocketMethods = {
    setTimeout(ms, onTimeout) {
      idleMs = ms;
      if (onTimeout !== undefined) {
        if (ms > 0) stream.once("timeout", onTimeout);
        else stream.removeListener("timeout", onTimeout);
      }
      if (!watching) {
        watching = true;
        // Bytes read: node:http's client reads the stream in flowing mode already, so one more
        // `data` listener changes nothing of how it is read. Bytes written: through write().
        stream.on("data", touch);
        stream.write = ((...args: unknown[]) => {
          touch();
          return write(...args);
        }) as Duplex["write"];
        stream.once("close", () => clearTimeout(timer));
      }
      arm();
      return methods;
    },
    setNoDelay: () => methods,
    setKeepAlive: () => methods,
    ref: () => methods,
    unref: () => methods,
  };
  return Object.assign(stream, methods) as unknown as Socket;
}
