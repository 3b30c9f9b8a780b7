import sharp from "sharp";

/**
 * A PNG of black lines of text on white, rendered from SVG by sharp (librsvg, with the system's
 * fonts: DejaVu Sans or Liberation Sans where installed, else any sans-serif). The tests and the
 * bench make their own pictures with it, so what the model must read is known.
 */
export async function textPicture(
  lines: readonly string[],
  options: { fontSize?: number } = {},
): Promise<Buffer> {
  const size = options.fontSize ?? 36;
  const xml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const width = Math.max(200, Math.ceil(Math.max(...lines.map((l) => l.length)) * size * 0.62) + 60);
  const height = Math.ceil(size * 0.8) + lines.length * Math.ceil(size * 1.7);
  const text = lines
    .map(
      (line, i) =>
        `<text x="30" y="${Math.ceil(size * 1.6) + i * Math.ceil(size * 1.7)}" font-family="DejaVu Sans, Liberation Sans, sans-serif" font-size="${size}" fill="black">${xml(line)}</text>`,
    )
    .join("");
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="white"/>${text}</svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}
