/**
 * Reads the text Python's `str()` gives a dict of plain values, such as
 * `{'message': 'The model `x` does not exist.', 'type': 'NotFoundError', 'param': None, 'code': 404}`:
 * the platform's Python worker SDK fails a job with that text when a handler yields
 * `{"error": {...}}` (docs/openai.md, "Errors"). Only that literal subset is read — dicts with
 * string keys, lists, tuples (as arrays), quoted strings with Python's escapes, ints, floats,
 * `None`, `True`, `False` — by a parser, never by evaluating anything.
 */

/** Deeper nesting than this is not an error body: the reader gives up rather than recurse on. */
const MAX_DEPTH = 32;

/** Python's one-character escapes, as `repr()` writes them. */
const ESCAPES: Readonly<Record<string, string>> = {
  "\\": "\\",
  "'": "'",
  '"': '"',
  n: "\n",
  r: "\r",
  t: "\t",
  a: "\x07",
  b: "\b",
  f: "\f",
  v: "\v",
  "\n": "",
};

/** Hex digits after `\x`, `\u`, `\U`. */
const HEX_DIGITS: Readonly<Record<string, number>> = { x: 2, u: 4, U: 8 };

/** Where a quoted string's plain run ends: its quote, a backslash, or a newline (not allowed). */
const STRING_STOPS: Readonly<Record<string, RegExp>> = { "'": /['\\\n]/g, '"': /["\\\n]/g };
const NUMBER = /-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/y;
const WORDS: Readonly<Record<string, unknown>> = { None: null, True: true, False: false };

/** Thrown inside the parser when the text is not in the subset; caught at the top. */
class NotALiteral extends Error {}

/** The value of a Python literal in the subset above, or undefined when `text` is anything else. */
export function parsePythonLiteral(text: string): unknown {
  const parser = new Parser(text);
  try {
    const value = parser.value(0);
    parser.space();
    return parser.atEnd() ? value : undefined;
  } catch (err) {
    if (err instanceof NotALiteral) return undefined; // Not Python's text of a plain value.
    throw err;
  }
}

class Parser {
  readonly #text: string;
  #at = 0;

  constructor(text: string) {
    this.#text = text;
  }

  atEnd(): boolean {
    return this.#at === this.#text.length;
  }

  space(): void {
    while (/[ \t\r\n]/.test(this.#text[this.#at] ?? "")) this.#at++;
  }

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) throw new NotALiteral();
    this.space();
    const c = this.#text[this.#at];
    if (c === "{") return this.#dict(depth);
    if (c === "[") return this.#sequence("]", depth);
    if (c === "(") return this.#sequence(")", depth);
    if (c === "'" || c === '"') return this.#string(c);
    for (const [word, value] of Object.entries(WORDS)) {
      if (this.#text.startsWith(word, this.#at)) {
        this.#at += word.length;
        return value;
      }
    }
    NUMBER.lastIndex = this.#at;
    const match = NUMBER.exec(this.#text);
    if (match === null) throw new NotALiteral();
    this.#at += match[0].length;
    return Number(match[0]);
  }

  #dict(depth: number): Record<string, unknown> {
    // No prototype, so a key such as `__proto__` is an ordinary key.
    const out = Object.create(null) as Record<string, unknown>;
    this.#items("}", () => {
      const key = this.value(depth + 1);
      if (typeof key !== "string") throw new NotALiteral();
      this.space();
      this.#expect(":");
      out[key] = this.value(depth + 1);
    });
    return out;
  }

  #sequence(close: string, depth: number): unknown[] {
    const out: unknown[] = [];
    this.#items(close, () => out.push(this.value(depth + 1)));
    return out;
  }

  /** `open item, item, ... close`, a trailing comma allowed; the opening character is at `#at`. */
  #items(close: string, item: () => void): void {
    this.#at++;
    for (;;) {
      this.space();
      if (this.#text[this.#at] === close) break;
      item();
      this.space();
      if (this.#text[this.#at] === ",") this.#at++;
      else if (this.#text[this.#at] !== close) throw new NotALiteral();
    }
    this.#at++;
  }

  #expect(c: string): void {
    if (this.#text[this.#at] !== c) throw new NotALiteral();
    this.#at++;
  }

  #string(quote: string): string {
    this.#at++;
    let out = "";
    for (;;) {
      const stops = STRING_STOPS[quote]!;
      stops.lastIndex = this.#at;
      const stop = stops.exec(this.#text);
      if (stop === null) throw new NotALiteral();
      out += this.#text.slice(this.#at, stop.index);
      this.#at = stop.index;
      const c = this.#text[this.#at]!;
      if (c === "\n") throw new NotALiteral();
      this.#at++;
      if (c === quote) return out;
      out += this.#escape();
    }
  }

  /** The character(s) of the escape after a backslash. */
  #escape(): string {
    const c = this.#text[this.#at];
    if (c === undefined) throw new NotALiteral();
    this.#at++;
    const simple = ESCAPES[c];
    if (simple !== undefined) return simple;
    const digits = HEX_DIGITS[c];
    if (digits !== undefined) {
      const hex = this.#text.slice(this.#at, this.#at + digits);
      if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== digits) throw new NotALiteral();
      this.#at += digits;
      const code = Number.parseInt(hex, 16);
      if (code > 0x10ffff) throw new NotALiteral();
      return String.fromCodePoint(code);
    }
    const octal = /^[0-7]{1,3}/.exec(this.#text.slice(this.#at - 1, this.#at + 2));
    if (octal !== null) {
      this.#at += octal[0].length - 1;
      return String.fromCodePoint(Number.parseInt(octal[0], 8));
    }
    // Python keeps an unknown escape as it is, backslash included.
    return `\\${c}`;
  }
}
