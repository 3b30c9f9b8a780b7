import { mkdir, rm, symlink } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cacheFixture, linesMatching, put } from "../support/cache-fixture.js";

// WarmCache.sync(): one sync at a time, and a call made during one runs once more after it. A
// sync runs in the background, at shutdown and on demand (docs/worker.md shows
// `void worker.syncWarmCache()`), so it never rejects, `strict` or not: `strict` makes a failed
// hydrate unfit (docs/fitness.md); a rejected sync there would be an unhandled rejection.

let fx: Awaited<ReturnType<typeof cacheFixture>>;
beforeAll(async () => {
  fx = await cacheFixture();
});
afterAll(async () => {
  await fx.close();
});

describe("WarmCache.sync's outcome and queue", () => {
  it("under strict, a failed sync resolves as failed (one line), and the sync queued behind it still runs", async () => {
    const { base, root, container } = await fx.setup({ strict: true });
    const a = container("a");
    await put(a.dir, "small.txt", "s");
    // The mirror's folder as a link: a real fault that fails the sync at its start.
    await mkdir(join(base, "elsewhere"), { recursive: true });
    await mkdir(join(root, ".."), { recursive: true });
    await symlink(join(base, "elsewhere"), root);
    const first = a.cache.sync();
    const queued = a.cache.sync();
    expect(await first).toMatchObject({ status: "failed" });
    expect(await queued).toMatchObject({ status: "failed" });
    expect(linesMatching(a.sink, /^warm cache sync failed/)).toHaveLength(2);
    // The volume is fixed: the next sync and the one queued behind it both run against it.
    await rm(root);
    const next = a.cache.sync();
    const after = a.cache.sync();
    expect(await next).toMatchObject({ status: "synced", files: 1 });
    expect(await after).toMatchObject({ status: "unchanged" });
  });
});
