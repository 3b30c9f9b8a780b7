import { randomUUID } from "node:crypto";
import { link, lstat, open, readFile, rename, rm, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { settle } from "../task-sink.js";
import { tempName } from "./safe-fs.js";

/**
 * One sync at a time per mirror, across workers (docs/fitness.md, "Warm cache", "Two workers at
 * once"): a lock file beside the manifest, made with `O_EXCL`. Its holder touches it every
 * `refreshMs`; a waiter that sees it unchanged (same file, same time) for `staleMs` by its own
 * clock takes it over, so a killed sync blocks others for `staleMs` at most and clocks that
 * disagree between machines do not matter. A waiter gives up after `waitMs`; the holder checks
 * that the lock is still its own just before it renames the manifest.
 */

export const LOCK_NAME = "sync.lock";

/** The lock's timing (changed only by tests, which restore it). */
export const lockTiming = {
  /** How often the holder touches the lock, in ms. */
  refreshMs: 10_000,
  /** How long a lock must stay untouched before a waiter takes it over, in ms. */
  staleMs: 60_000,
  /** How long a sync waits for another worker's, in ms; then it fails and a later sync sends its files. */
  waitMs: 300_000,
  /** The first pause between two tries, in ms; it doubles up to 2 s. */
  pollMs: 50,
};

/** A held lock. */
export interface SyncLock {
  /** Throws when the lock is no longer this holder's (taken over as stale). */
  check(): Promise<void>;
  release(): Promise<void>;
}

interface Seen {
  readonly ino: number;
  readonly mtimeMs: number;
  readonly since: number;
}

/** Takes the mirror's sync lock, waiting for another holder while `signal` allows. */
export async function acquireSyncLock(root: string, signal: AbortSignal): Promise<SyncLock> {
  const path = join(root, LOCK_NAME);
  const owner = randomUUID();
  const started = performance.now();
  let pause = lockTiming.pollMs;
  let seen: Seen | undefined;
  for (;;) {
    if (await tryCreate(path, owner)) return held(path, owner);
    const st = await lstat(path).catch(() => undefined);
    if (st !== undefined && !st.isFile())
      await refuseNonFile(path, st.isDirectory() ? "a directory" : "not a file");
    if (st !== undefined) {
      const now = performance.now();
      if (seen === undefined || seen.ino !== st.ino || seen.mtimeMs !== st.mtimeMs)
        seen = { ino: st.ino, mtimeMs: st.mtimeMs, since: now };
      else if (now - seen.since >= lockTiming.staleMs) {
        // Untouched for staleMs: its holder died. Moved aside (only one waiter's rename succeeds),
        // then removed if it is still the lock judged stale. Another waiter may have taken that one
        // over and made a fresh lock since this waiter last looked; that one is put back.
        const aside = tempName(path);
        if (
          await rename(path, aside).then(
            () => true,
            () => false,
          )
        )
          await dropIfStale(aside, path, seen);
        seen = undefined;
        continue;
      }
      if (now - started >= lockTiming.waitMs)
        throw new Error(
          `another worker has held ${path} for more than ${lockTiming.waitMs} ms; a later sync sends these files`,
        );
    }
    await sleep(pause, undefined, { signal });
    pause = Math.min(pause * 2, 2_000);
  }
}

/**
 * Something at the lock's path that no worker makes (a directory, a link, a device): no holder
 * touches it, so waiting would take `staleMs` and its removal then failed with a raw EISDIR,
 * leaving it behind under another name (issue 51, item 12). It is moved aside (one waiter wins)
 * and removed whole; this sync fails saying so, and the next one takes the lock.
 */
async function refuseNonFile(path: string, what: string): Promise<never> {
  const aside = tempName(path);
  if (
    await rename(path, aside).then(
      () => true,
      () => false,
    )
  ) {
    await rm(aside, { recursive: true, force: true }).catch(() => undefined);
  }
  throw new Error(
    `${path} is ${what}, not a lock file a worker makes; it was removed, and the next sync takes the lock`,
  );
}

/**
 * Removes the lock moved aside to `aside` when it is the one judged stale (same file, same time as
 * `stale`); otherwise it is a fresh lock, made after the look, and goes back to `path`. Put back
 * with a hard link, which never replaces a lock a third waiter made meanwhile; then its holder
 * finds it lost at check(), before it writes the manifest. Where the filesystem has no hard
 * links, it is renamed back.
 */
async function dropIfStale(aside: string, path: string, stale: Seen): Promise<void> {
  const moved = await lstat(aside).catch(() => undefined);
  if (moved === undefined) return;
  if (moved.ino === stale.ino && moved.mtimeMs === stale.mtimeMs) {
    await rm(aside, { recursive: true, force: true });
    return;
  }
  try {
    await link(aside, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
      await rename(aside, path);
      return;
    }
  }
  await rm(aside, { force: true });
}

/** Creates the lock with `O_EXCL`; false when another holds it. */
async function tryCreate(path: string, owner: string): Promise<boolean> {
  let handle: import("node:fs/promises").FileHandle;
  try {
    handle = await open(path, "wx");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    await handle.writeFile(JSON.stringify({ owner, host: hostname(), pid: process.pid, at: Date.now() }));
    await handle.close();
    return true;
  } catch (err) {
    // A full volume: the lock is not written whole, so it is not held.
    await handle.close().catch(() => undefined);
    await rm(path, { force: true }).catch(() => undefined);
    throw err;
  }
}

function held(path: string, owner: string): SyncLock {
  const timer = setInterval(() => {
    const now = new Date();
    // Ignored: a failed touch is caught by check() before the manifest is written, if a waiter took the lock over meanwhile.
    settle(utimes(path, now, now), () => undefined);
  }, lockTiming.refreshMs);
  timer.unref();
  const mine = async () => {
    const text = await readFile(path, "utf8").catch(() => "");
    try {
      return (JSON.parse(text) as { owner?: unknown }).owner === owner;
    } catch {
      // Not the JSON this holder wrote: another's.
      return false;
    }
  };
  return {
    async check() {
      if (!(await mine()))
        throw new Error(
          `${path} was taken over by another worker (this sync left it untouched for ${lockTiming.staleMs / 1000} s)`,
        );
    },
    async release() {
      clearInterval(timer);
      if (await mine()) await rm(path, { force: true });
    },
  };
}
