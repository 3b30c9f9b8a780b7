import type { LbPartsSource } from "./lb-parts.js";
import type { WorkerPart } from "./part-list.js";

/**
 * The load-balancing parts as the part list holds them, their code loaded by the first start:
 * a queue worker never loads the front thread, the request server or node:crypto
 * (docs/benchmarks.md, "Cold start"; test/worker/import-graph.unit.test.ts).
 */
export function lazyLbParts(source: LbPartsSource): {
  readonly port: WorkerPart;
  readonly server: WorkerPart;
} {
  let loaded: Promise<{ port: WorkerPart; server: WorkerPart }> | undefined;
  const load = () => {
    loaded ??= import("./lb-parts.js").then((m) => m.lbParts(source));
    return loaded;
  };
  const part = (
    name: string,
    pick: (parts: { port: WorkerPart; server: WorkerPart }) => WorkerPart,
  ): WorkerPart => {
    let real: WorkerPart | undefined;
    return {
      name,
      start: async (signal) => {
        real = pick(await load());
        return real.start(signal);
      },
      ready: () => real?.ready?.(),
      stop: (deadline) => real?.stop(deadline),
    };
  };
  return {
    port: part("load-balancer port", (p) => p.port),
    server: part("request server", (p) => p.server),
  };
}
