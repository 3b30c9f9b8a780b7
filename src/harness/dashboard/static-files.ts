import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";

/**
 * The page's files, shipped as they are (no build step): resolved next to this module, so the
 * same code serves them from `src/` (tests) and from `dist/` (the package build copies `static/`).
 */
const STATIC_DIR = new URL("./static/", import.meta.url);

const FILES: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "schema-form.js": "text/javascript; charset=utf-8",
  "openai-reply.js": "text/javascript; charset=utf-8",
  "style.css": "text/css; charset=utf-8",
};

/**
 * The page may load only its own script and stylesheet and talk only to its own origin: no inline
 * script or style, nothing from elsewhere (it works offline), no framing.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Headers every dashboard answer carries. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

/** True when `name` is one of the page's files. */
export function isStaticFile(name: string): boolean {
  return Object.hasOwn(FILES, name);
}

/** Sends one of the page's files (read on each request: small, and edits show on reload). */
export async function sendStatic(res: ServerResponse, name: string): Promise<void> {
  const type = FILES[name];
  if (type === undefined) throw new Error(`not a dashboard file: ${name}`);
  const body = await readFile(new URL(name, STATIC_DIR));
  res.writeHead(200, { ...SECURITY_HEADERS, "content-type": type, "content-length": String(body.length) });
  res.end(body);
}
