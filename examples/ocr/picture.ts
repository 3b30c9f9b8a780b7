// The ocr starter is the source (templates/ocr/test/picture.ts): the example runs it as it ships.
export { textPicture } from "../../templates/ocr/test/picture.js";
