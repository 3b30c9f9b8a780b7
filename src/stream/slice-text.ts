/**
 * Cutting a string into slices whose JSON-escaped UTF-8 size stays under a budget, in roughly
 * linear time: each slice's length is estimated, measured with the native serialiser, and corrected,
 * instead of re-serialising a growing prefix (quadratic) or walking code points in JavaScript.
 */

/** Code units sampled to estimate the first slice's density. */
const SAMPLE_UNITS = 4_096;
/** Share of the budget the first guess of each slice aims at (the rest is filled in small steps). */
const FIRST_GUESS_SHARE = 0.97;

/**
 * Code units JSON.stringify escapes or writes differently from their UTF-8 form: quote, backslash,
 * control characters, and surrogates (a lone one becomes `\udXXX`; pairs are let through the slow
 * path too, which measures them exactly).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what JSON escapes
const ESCAPED_UNITS = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * UTF-8 bytes of `text` as a JSON string, without the two quotes. Text with nothing to escape (the
 * common case) is measured in place; only other text is serialised, so planning a 100 MB item's
 * slices does not allocate another 100 MB.
 */
export function jsonStringBytes(text: string): number {
  if (text.length >= PLAIN_SCAN_MIN_UNITS && isPlainAscii(text)) return text.length;
  if (!ESCAPED_UNITS.test(text)) return Buffer.byteLength(text);
  return Buffer.byteLength(JSON.stringify(text)) - 2;
}

/** From this length on, {@link isPlainAscii}'s native searches beat one pass of the regex. */
const PLAIN_SCAN_MIN_UNITS = 1_024;
/** What JSON escapes in ASCII text besides `"` and `\`: the control characters U+0000–U+001F. */
const CONTROL_CHARACTERS = Array.from({ length: 0x20 }, (_, code) => String.fromCharCode(code));

/**
 * True when every code unit of `text` is ASCII that JSON writes as is (so its JSON string costs
 * exactly `text.length` bytes plus quotes). Measured with the engine's native searches, a byte
 * count and one search per escaped character, about three times faster on large text than the
 * regex, whose pass dominated the planning of a large string item's slices.
 */
function isPlainAscii(text: string): boolean {
  // Any unit above U+007F (a lone surrogate included) costs more than one UTF-8 byte.
  if (Buffer.byteLength(text) !== text.length) return false;
  if (text.includes('"') || text.includes("\\")) return false;
  for (const control of CONTROL_CHARACTERS) if (text.includes(control)) return false;
  return true;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Moves a cut back by one unit when it would fall between the two halves of a surrogate pair. */
function safeCut(text: string, cut: number): number {
  if (cut > 0 && cut < text.length) {
    if (isHighSurrogate(text.charCodeAt(cut - 1)) && isLowSurrogate(text.charCodeAt(cut))) return cut - 1;
  }
  return cut;
}

/** Length in code units of the code point starting at `at` (2 for a surrogate pair, else 1). */
function codePointUnits(text: string, at: number): number {
  return isHighSurrogate(text.charCodeAt(at)) && isLowSurrogate(text.charCodeAt(at + 1)) ? 2 : 1;
}

/**
 * Splits `text` into consecutive slices, each costing at most `budgetBytes` UTF-8 bytes once
 * JSON-escaped (quotes excluded). No slice ends inside a surrogate pair, and each slice but the
 * last is filled until its next code point would not fit.
 *
 * JSON escaping is per code unit (a surrogate pair left whole is never escaped), so a slice's cost
 * is the sum of its pieces' costs: slices can be grown piece by piece without re-measuring.
 *
 * @returns the end index of each slice, and the total escaped size of the whole text.
 */
export function sliceEnds(text: string, budgetBytes: number): { ends: number[]; bytes: number } {
  const ends: number[] = [];
  let total = 0;
  let start = 0;
  const length = text.length;
  if (length === 0) return { ends: [0], bytes: 0 };
  // Bytes per code unit, from a small sample and then from each finished slice; the first guess of a
  // slice aims a little under the budget at that density so it usually fits in one measurement.
  const sample = safeCut(text, Math.min(length, SAMPLE_UNITS));
  let density = sample === 0 ? 1 : Math.max(1, jsonStringBytes(text.slice(0, sample)) / sample);
  while (start < length) {
    let end = start;
    let used = 0;
    let guess = Math.max(
      1,
      Math.min(length - start, Math.floor((budgetBytes * FIRST_GUESS_SHARE) / density)),
    );
    while (end < length && guess > 0) {
      let cut = safeCut(text, Math.min(length, end + guess));
      if (cut === end) cut = end + codePointUnits(text, end);
      const units = cut - end;
      const cost = jsonStringBytes(text.slice(end, cut));
      const room = budgetBytes - used;
      if (cost <= room) {
        used += cost;
        end = cut;
        // Guess the rest of the room at the density just seen; cost >= units, so this never overshoots ASCII.
        guess = Math.floor(((room - cost) * units) / cost);
        if (guess < 1 && room - cost > 0) guess = 1;
      } else if (units === codePointUnits(text, end)) {
        break; // not even the next code point fits: this slice is full
      } else {
        guess = Math.max(1, Math.min(units - 1, Math.floor((room * units) / cost)));
      }
    }
    if (end === start) {
      throw new RangeError(`a ${budgetBytes}-byte budget cannot hold one escaped code point`);
    }
    ends.push(end);
    density = used / (end - start);
    total += used;
    start = end;
  }
  return { ends, bytes: total };
}
