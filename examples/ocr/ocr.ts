// The ocr starter is the source (templates/ocr/src/ocr.ts): the example runs it as it ships.
export {
  BadImageError,
  type Device,
  type LoadOptions,
  loadOcr,
  type OcrLine,
  type OcrModel,
  type RecogniseOptions,
  recognise,
} from "../../templates/ocr/src/ocr.js";
