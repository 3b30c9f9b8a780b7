/**
 * Just enough of the BMP format for the example: 24-bit, uncompressed, bottom-up rows padded to 4
 * bytes. Pure JS, so the example needs no native image library.
 */

/** An image as width, height and one RGB triple a pixel, top row first. */
export interface RgbImage {
  readonly width: number;
  readonly height: number;
  /** `width * height * 3` bytes: R, G, B. */
  readonly rgb: Uint8Array;
}

const FILE_HEADER_BYTES = 14;
const INFO_HEADER_BYTES = 40;

function rowBytes(width: number): number {
  return Math.ceil((width * 3) / 4) * 4;
}

/** Encodes an image as a 24-bit BMP file. */
export function encodeBmp(image: RgbImage): Buffer {
  const { width, height, rgb } = image;
  const stride = rowBytes(width);
  const dataOffset = FILE_HEADER_BYTES + INFO_HEADER_BYTES;
  const out = Buffer.alloc(dataOffset + stride * height);
  out.write("BM", 0, "latin1");
  out.writeUInt32LE(out.length, 2);
  out.writeUInt32LE(dataOffset, 10);
  out.writeUInt32LE(INFO_HEADER_BYTES, 14);
  out.writeInt32LE(width, 18);
  out.writeInt32LE(height, 22); // positive: rows stored bottom-up
  out.writeUInt16LE(1, 26); // colour planes
  out.writeUInt16LE(24, 28); // bits a pixel
  out.writeUInt32LE(stride * height, 34);
  out.writeInt32LE(2835, 38); // 72 dpi, in pixels a metre
  out.writeInt32LE(2835, 42);
  for (let y = 0; y < height; y++) {
    const row = dataOffset + (height - 1 - y) * stride;
    for (let x = 0; x < width; x++) {
      const src = (y * width + x) * 3;
      out[row + x * 3] = rgb[src + 2] ?? 0; // BMP stores B, G, R
      out[row + x * 3 + 1] = rgb[src + 1] ?? 0;
      out[row + x * 3 + 2] = rgb[src] ?? 0;
    }
  }
  return out;
}

/** Decodes a 24-bit uncompressed BMP; throws a message saying what is unsupported otherwise. */
export function decodeBmp(file: Uint8Array): RgbImage {
  const buf = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (buf.length < FILE_HEADER_BYTES + INFO_HEADER_BYTES || buf.toString("latin1", 0, 2) !== "BM") {
    throw new Error("not a BMP file (no BM header)");
  }
  const dataOffset = buf.readUInt32LE(10);
  const width = buf.readInt32LE(18);
  const rawHeight = buf.readInt32LE(22);
  const bits = buf.readUInt16LE(28);
  const compression = buf.readUInt32LE(30);
  if (bits !== 24 || compression !== 0) {
    throw new Error(
      `only 24-bit uncompressed BMP is supported, got ${bits}-bit with compression ${compression}`,
    );
  }
  const height = Math.abs(rawHeight);
  if (width <= 0 || height === 0) throw new Error(`bad BMP size ${width}x${rawHeight}`);
  const stride = rowBytes(width);
  if (dataOffset + stride * height > buf.length) throw new Error("BMP pixel data is truncated");
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const row = dataOffset + (rawHeight > 0 ? height - 1 - y : y) * stride;
    for (let x = 0; x < width; x++) {
      const dst = (y * width + x) * 3;
      rgb[dst] = buf[row + x * 3 + 2] ?? 0;
      rgb[dst + 1] = buf[row + x * 3 + 1] ?? 0;
      rgb[dst + 2] = buf[row + x * 3] ?? 0;
    }
  }
  return { width, height, rgb };
}

/** Greyscale by Rec. 601 luma, kept as RGB so the result is still a 24-bit BMP. */
export function greyscale(image: RgbImage): RgbImage {
  const rgb = new Uint8Array(image.rgb.length);
  for (let i = 0; i < rgb.length; i += 3) {
    const luma = Math.round(
      0.299 * (image.rgb[i] ?? 0) + 0.587 * (image.rgb[i + 1] ?? 0) + 0.114 * (image.rgb[i + 2] ?? 0),
    );
    rgb[i] = luma;
    rgb[i + 1] = luma;
    rgb[i + 2] = luma;
  }
  return { width: image.width, height: image.height, rgb };
}

/** A colourful test card: horizontal hue ramp over a vertical brightness ramp. */
export function testCard(width: number, height: number): RgbImage {
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const v = 1 - y / Math.max(1, height - 1);
    for (let x = 0; x < width; x++) {
      const h = (x / Math.max(1, width)) * 6;
      const c = Math.floor(h);
      const f = h - c;
      const ramp = [
        [1, f, 0],
        [1 - f, 1, 0],
        [0, 1, f],
        [0, 1 - f, 1],
        [f, 0, 1],
        [1, 0, 1 - f],
      ][c] ?? [1, 0, 0];
      const i = (y * width + x) * 3;
      rgb[i] = Math.round((ramp[0] ?? 0) * v * 255);
      rgb[i + 1] = Math.round((ramp[1] ?? 0) * v * 255);
      rgb[i + 2] = Math.round((ramp[2] ?? 0) * v * 255);
    }
  }
  return { width, height, rgb };
}
