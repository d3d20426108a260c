export { PatchError, type PatchErrorCode, type PatchErrorOptions } from './errors.js';
export { applyMergePatch } from './merge.js';
export { applyJsonPatch } from './jsonpatch.js';
export { applyStrategicMergePatch, type StrategicInfo } from './strategic.js';
export { builtinStrategicInfo } from './builtin.js';
export { fieldSetOf, type FieldOptions } from './fieldset.js';
export type { FieldsV1 } from './paths.js';
export { serverSideApply, type ApplyRequest, type ApplyConflict, type ApplyResult } from './apply.js';
export { trackUpdate } from './managed.js';
