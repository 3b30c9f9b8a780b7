/**
 * A sidecar's command as the worker logs it (`starting sidecar "llm"`), secrets taken out: model
 * servers take their keys on the command line (`vllm serve … --api-key sk-…`, `--hf-token`), and
 * the line goes wherever the worker's logs go.
 *
 * - The value of a secret-named flag: the next argument after `--api-key`, `--hf-token`,
 *   `--client-secret`, `--password` (and `-`, `_`, `.` or camelCase spellings), or what follows the
 *   `=` of `--api-key=…`. A flag is secret-named when one of its words is one of
 *   {@link SECRET_WORDS}: `--tokenizer` and `--keyfile` are not.
 * - The same inside one argument that holds several words (a shell script, `sh -c "vllm serve m
 *   --api-key sk-…"`): a secret-named flag's next word, or what follows its `=`.
 * - Every given secret value (the sidecar's secret-named `env` values) wherever it appears.
 */

/** The words that make a flag's value a secret. */
export const SECRET_WORDS: ReadonlySet<string> = new Set([
  "key",
  "apikey",
  "token",
  "secret",
  "password",
  "passwd",
  "pass",
  "credential",
  "credentials",
]);

const REDACTED = "[redacted]";

/** `--api-key=value` or `--api-key`, split into the flag's name and (when there is one) its value. */
const FLAG = /^--?([A-Za-z][A-Za-z0-9_.-]*)(?:=([\s\S]*))?$/;

/**
 * A flag and its value inside a longer argument: the flag at the start or after white space, then
 * `=` or white space, then the value (quoted, or up to the next white space; not another flag).
 */
const EMBEDDED_FLAG = /(^|\s)(--?[A-Za-z][A-Za-z0-9_.-]*)(=|\s+)(?!-)("[^"]*"|'[^']*'|[^\s"']+)/g;

/** True when one of the words of a flag's name is a {@link SECRET_WORDS} word. */
function secretNamed(name: string): boolean {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .toLowerCase()
    .split(/[-_.]+/)
    .some((word) => SECRET_WORDS.has(word));
}

/**
 * The command with secrets replaced by `[redacted]` (see the file's summary). `secrets` are literal
 * values to take out wherever they appear (longest first, so one holding another goes whole).
 *
 * @example
 * redactCommand(["vllm", "serve", "m", "--api-key", "sk-1"], []) // ["vllm", "serve", "m", "--api-key", "[redacted]"]
 */
export function redactCommand(command: readonly string[], secrets: readonly string[]): string[] {
  const values = [...secrets].filter((s) => s !== "").sort((a, b) => b.length - a.length);
  const out: string[] = [];
  let nextIsSecret = false;
  for (const [i, part] of command.entries()) {
    if (nextIsSecret) {
      nextIsSecret = false;
      out.push(REDACTED);
      continue;
    }
    const flag = i === 0 ? null : FLAG.exec(part);
    if (flag !== null && secretNamed(flag[1]!)) {
      if (flag[2] === undefined) {
        // The value is the next argument, unless the next is another long flag (no value given).
        nextIsSecret = command[i + 1] !== undefined && !command[i + 1]!.startsWith("--");
        out.push(part);
      } else {
        out.push(`${part.slice(0, part.length - flag[2].length)}${REDACTED}`);
      }
      continue;
    }
    let text = /\s/.test(part)
      ? part.replace(EMBEDDED_FLAG, (whole, lead: string, name: string, sep: string) =>
          secretNamed(name.replace(/^-+/, "")) ? `${lead}${name}${sep}${REDACTED}` : whole,
        )
      : part;
    for (const value of values) if (text.includes(value)) text = text.replaceAll(value, REDACTED);
    out.push(text);
  }
  return out;
}
