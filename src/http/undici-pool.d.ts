// undici's Pool on its own: the transport loads it without undici's public entry (fetch,
// WebSocket, the cache: about 70 ms of CPU more at load; docs/benchmarks.md).
declare module "undici/lib/dispatcher/pool.js" {
  import type { Pool } from "undici";

  const PoolClass: typeof Pool;
  export default PoolClass;
}
