/**
 * The guard: a small Node program (run with `node -e`, so a bundle needs no file beside it) that
 * runlet starts in a new process group, and that starts the sidecar's command in that group. It
 * exists for one reason: no orphan may outlive the worker, even one killed with SIGKILL, and
 * Linux's `prctl(PR_SET_PDEATHSIG)` cannot be reached from Node (and covers only a direct child).
 *
 * - Its stdin is a pipe whose only writer is the worker. When the worker closes it (a stop) or
 *   dies (the kernel closes it), the guard reads EOF, sends SIGTERM to its whole process group
 *   (the sidecar and whatever the sidecar started), and SIGKILL after the grace.
 * - It ignores SIGTERM, SIGINT and SIGHUP itself (it must outlive the group's SIGTERM to send the
 *   SIGKILL), and ends with the sidecar's own exit: the same code, or the same signal raised on
 *   itself, so the worker reads the sidecar's exit as the guard's.
 * - A command that cannot be started (not found, not executable) is reported on stderr and the
 *   guard exits 127, as a shell does.
 *
 * argv: `<stopGraceMs> <program> [args...]`. Written as ES5-ish CommonJS (what `node -e` runs).
 */
export const GUARD_SOURCE = `
"use strict";
const { spawn } = require("node:child_process");
const [graceText, file, ...args] = process.argv.slice(1);
const graceMs = Number(graceText);
const ignore = () => {};
for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, ignore);
const group = (signal) => { try { process.kill(-process.pid, signal); } catch {} };
let stopping = false;
const child = spawn(file, args, { stdio: ["ignore", "inherit", "inherit"] });
child.on("error", (err) => {
  process.stderr.write("runlet sidecar guard: cannot start " + JSON.stringify(file) + ": " + err.message + "\\n");
  process.exit(127);
});
child.on("exit", (code, signal) => {
  // After a stop, whatever the sidecar started goes too; the exit status no longer matters.
  if (stopping) group("SIGKILL");
  if (signal === null) process.exit(code === null ? 1 : code);
  for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.off(s, ignore);
  process.kill(process.pid, signal);
});
const stop = () => {
  if (stopping) return;
  stopping = true;
  group("SIGTERM");
  setTimeout(() => group("SIGKILL"), graceMs);
};
process.stdin.on("end", stop);
process.stdin.on("close", stop);
process.stdin.on("error", stop);
process.stdin.resume();
`;
