import { type FSWatcher, watch } from "node:fs";

/** Path segments whose changes never reload workers (dependencies, build output, VCS, editors). */
const IGNORED_SEGMENTS = new Set(["node_modules", "dist", ".git", ".tmp", "coverage"]);

function ignored(relPath: string): boolean {
  const parts = relPath.split(/[\\/]/);
  return (
    parts.some((p) => IGNORED_SEGMENTS.has(p) || (p.startsWith(".") && p.length > 1)) || relPath.endsWith("~")
  );
}

/**
 * Watches `dir` recursively and calls `onChange` with the changed files once changes have been
 * quiet for `debounceMs` (an editor's save is often several events). Returns a closer.
 */
export function watchFolder(
  dir: string,
  onChange: (files: string[]) => void,
  debounceMs = 200,
): { close(): void } {
  let timer: NodeJS.Timeout | undefined;
  const changed = new Set<string>();
  const watcher: FSWatcher = watch(dir, { recursive: true }, (_event, filename) => {
    const rel = filename === null ? "" : filename.toString();
    if (rel === "" || ignored(rel)) return;
    changed.add(rel);
    clearTimeout(timer);
    timer = setTimeout(() => {
      const files = [...changed].sort();
      changed.clear();
      onChange(files);
    }, debounceMs);
  });
  // A watch error (the folder removed) must not crash dev; the workers keep running as they are.
  watcher.on("error", () => watcher.close());
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
