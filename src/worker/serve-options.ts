/** Options of `serveHandler` (serve.ts); a leaf file, so pod mode, which serve.ts loads, can take them too. */
export interface ServeOptions {
  /** The process environment (the entry point reads it; library code never does). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The handler module (sources and the CLI), loaded by isolation threads. */
  readonly handlerModule?: string;
  /** A bundle's own file (`import.meta.url`): isolation threads start it again as runner threads. */
  readonly threadEntry?: string;
  /** A bundle's heartbeat-thread.mjs (file URL), which `runlet build` writes beside the bundle. */
  readonly heartbeatEntry?: string;
  /** @default 20_000 */
  readonly shutdownGraceMs?: number;
  /**
   * `runlet start --mode`: `"queue"`, `"lb"` or `"pod"`; wins over the env (docs/load-balancing.md,
   * "Choosing the mode"). @default chosen from the env
   */
  readonly mode?: string;
}
