import { createRequire, syncBuiltinESMExports } from "node:module";

/**
 * The unit lane's setup (vitest.config.ts, `setupFiles` of that project only): a unit test opens
 * no socket and starts no process, and this makes the attempt fail at once, naming what was
 * called. `listen` on any server (node:http's and node:https's too), every way of connecting
 * (`net.connect`/`createConnection`, `Socket.prototype.connect`: node:http's agent, node:tls and
 * fetch all end there) and every way of starting a child process throw. The harness's routes in
 * memory (test/support/inject.ts) use none of them: a listener fed a stream pair, no socket.
 * The lane runs in threads of its own, so the guard reaches no other lane; it is installed once
 * per thread.
 */

export const UNIT_LANE_REFUSAL =
  "the unit lane opens no sockets and starts no processes: move this test to the integration or process lane";

const require = createRequire(import.meta.url);
const net = require("node:net") as typeof import("node:net");
const childProcess = require("node:child_process") as typeof import("node:child_process");

const INSTALLED = Symbol.for("runlet.test.unitGuard");

function refuse(what: string): () => never {
  return () => {
    throw new Error(`${what}: ${UNIT_LANE_REFUSAL}`);
  };
}

function replace(target: object, name: string, what: string): void {
  Object.defineProperty(target, name, { value: refuse(what), writable: true, configurable: true });
}

const holder = globalThis as { [INSTALLED]?: true };
if (holder[INSTALLED] !== true) {
  holder[INSTALLED] = true;
  replace(net.Server.prototype, "listen", "net.Server.prototype.listen");
  replace(net.Socket.prototype, "connect", "net.Socket.prototype.connect");
  replace(net, "connect", "net.connect");
  replace(net, "createConnection", "net.createConnection");
  for (const name of ["spawn", "exec", "execFile", "fork", "spawnSync", "execSync", "execFileSync"]) {
    replace(childProcess, name, `child_process.${name}`);
  }
  // `import { spawn } from "node:child_process"` reads the module's ESM bindings: bring them in line.
  syncBuiltinESMExports();
}
