// In the process lane: its vi.mock of node:fs/promises needs a module graph of its own, which only
// that lane keeps.
import * as fsp from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it, vi } from "vitest";
import { acquireSyncLock, LOCK_NAME, lockTiming, type SyncLock } from "../../src/cache/sync-lock.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

// Two waiters judge the same dead lock stale. The first moves it aside, removes it and makes its
// own; only then does the second's rename run, and it moves aside the first's FRESH lock. The
// interleaving sits between one waiter's lstat and its rename, a window no real schedule can be
// made to hit on demand, so the module's `rename` is wrapped: the wrapper runs the first waiter's
// steps (real files, a real acquireSyncLock) just before the second's real rename. Every file
// operation is the real one on a real folder; only the order is forced.

const hook: { before?: ((from: string) => Promise<void>) | undefined } = {};
vi.mock("node:fs/promises", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs/promises")>();
  const rename = async (from: string, to: string) => {
    const before = hook.before;
    hook.before = undefined;
    if (before !== undefined) await before(from);
    return real.rename(from, to);
  };
  return { ...real, default: { ...real, rename }, rename };
});

const timing = { ...lockTiming };
const folders: string[] = [];
afterEach(async () => {
  Object.assign(lockTiming, timing);
  hook.before = undefined;
  for (const dir of folders.splice(0)) await fsp.rm(dir, { recursive: true, force: true });
});

it("never takes over a fresh lock that another waiter made after this one judged the old one stale", async () => {
  const root = await fsp.mkdtemp(join(tmpdir(), "runlet-lock-"));
  folders.push(root);
  const path = join(root, LOCK_NAME);
  // A dead holder's lock: never touched again. The live holder touches its own every 20 ms.
  await fsp.writeFile(path, JSON.stringify({ owner: "dead" }));
  Object.assign(lockTiming, { staleMs: 300, refreshMs: 20, pollMs: 10, waitMs: 60_000 });

  let first: SyncLock | undefined;
  hook.before = async (from) => {
    expect(from).toBe(path);
    // The first waiter's takeover of the dead lock, whole, then its own fresh lock.
    const aside = `${path}.first-aside`;
    await fsp.rename(path, aside);
    await fsp.rm(aside);
    first = await acquireSyncLock(root, new AbortController().signal);
  };
  const closing = new AbortController();
  const second = acquireSyncLock(root, closing.signal);
  second.catch(() => undefined);
  const holder = await waitFor("the first waiter to hold the lock", () => first);
  // Let the second waiter finish with what it moved aside: only the lock is left in the folder.
  await waitForAsync("one lock file and nothing aside", async () => {
    const names = await fsp.readdir(root);
    return names.length === 1 && names[0] === LOCK_NAME;
  });
  // On main the second removed the first's lock and made its own: the first found it lost.
  await expect(holder.check()).resolves.toBeUndefined();
  await holder.release();
  const next = await second;
  await expect(next.check()).resolves.toBeUndefined();
  await next.release();
  expect(await fsp.readdir(root)).toEqual([]);
}, 20_000);
