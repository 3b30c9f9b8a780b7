import { Writable } from "node:stream";
import { createLogger } from "../../src/log/index.js";

/** A platform-mode logger writing into an array of parsed lines (and the raw text). */
export function capture(secrets: readonly string[] = []) {
  let text = "";
  const destination = new Writable({
    write(chunk: Buffer, _enc, callback) {
      text += chunk.toString("utf8");
      callback();
    },
  });
  const log = createLogger({ platform: true, destination, secrets });
  return {
    log,
    text: () => text,
    lines: () =>
      text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as unknown),
  };
}
