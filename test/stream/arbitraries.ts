import fc from "fast-check";

/**
 * One UTF-16 "unit of trouble" for the splitter: ASCII, characters JSON must escape (quotes,
 * backslashes, control characters), 2- and 3-byte UTF-8, astral characters (surrogate pairs) and
 * lone surrogates (which JSON.stringify escapes as \uXXXX).
 */
export const trickyChar: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: "binary-ascii", minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom('"', "\\", "\n", "\t", "\u0000", "\u001f", "\u007f", "\u2028") },
  { weight: 2, arbitrary: fc.constantFrom("é", "ß", "€", "語", "\uffff") },
  { weight: 3, arbitrary: fc.constantFrom("😀", "𝄞", "\u{10ffff}", "\u{1f3f3}\u{fe0f}\u200d\u{1f308}") },
  { weight: 1, arbitrary: fc.constantFrom("\ud800", "\udbff", "\udc00", "\udfff") },
  { weight: 2, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
);

/** Strings made of {@link trickyChar}s. */
export function trickyString(maxLength: number): fc.Arbitrary<string> {
  return fc.string({ unit: trickyChar, maxLength });
}

/** A handler's own metrics, sometimes naming runlet's reserved keys (which must lose). */
export const extraMetrics: fc.Arbitrary<Record<string, number | string>> = fc.dictionary(
  fc.oneof(fc.constantFrom("tokens", "part", "parts", "bytes", "label"), fc.string({ maxLength: 8 })),
  fc.oneof(fc.integer(), fc.string({ unit: trickyChar, maxLength: 6 })),
  { maxKeys: 3 },
);
