/** Error thrown for a patch or apply request that cannot be applied. */
export type PatchErrorCode = 'KARS_PATCH_INVALID' | 'KARS_PATCH_TEST_FAILED';

export interface PatchErrorOptions {
  cause?: unknown;
  /** The status kube-apiserver answers with: 400 for a malformed body, 422 when a well-formed patch fails to apply. */
  httpStatus?: 400 | 422;
}

export class PatchError extends Error {
  readonly code: PatchErrorCode;
  readonly httpStatus: 400 | 422;

  constructor(message: string, code: PatchErrorCode = 'KARS_PATCH_INVALID', options: PatchErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PatchError';
    this.code = code;
    this.httpStatus = options.httpStatus ?? (code === 'KARS_PATCH_TEST_FAILED' ? 422 : 400);
  }
}
