import { Transform } from "node:stream";
import { StringDecoder } from "node:string_decoder";

/**
 * Control characters a terminal acts on, which text from a job (an input a handler logs or
 * throws, an output, an error) must not carry to the screen: C0 controls but tab and line feed,
 * DEL, C1 controls, and the Unicode line separators and bidirectional overrides that reorder
 * what is shown. An ESC sequence can set the window title, move the cursor or forge a
 * "COMPLETED" line; a carriage return overwrites the line it is on.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `text` with every terminal control character written as a `\u` escape (`ESC` → `\u001b`); line feeds and tabs stay. */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * A pass-through that escapes terminal control characters in the text going through it (a child
 * worker's output on its way to the terminal). Decodes UTF-8 across chunk boundaries.
 */
export function escapingStream(): Transform {
  const decoder = new StringDecoder("utf8");
  return new Transform({
    decodeStrings: true,
    transform(chunk: Buffer, _enc, callback) {
      callback(null, escapeControl(decoder.write(chunk)));
    },
    flush(callback) {
      callback(null, escapeControl(decoder.end()));
    },
  });
}
