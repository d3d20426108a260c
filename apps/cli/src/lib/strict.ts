/**
 * The client-side half of strict field validation: before anything is written, every kars document
 * is admitted offline with the check `kars compile` and kars apiserver use (policy-compiler's
 * admitKarsObject: kube-schema's admit() plus ObjectMeta), and each unknown field is refused by its
 * full path with the nearest known sibling from the CRD schema (`did you mean spec.tokenBudget?`).
 * The server half is `fieldValidation=Strict` on the write itself (objects.ts).
 */
import { admitKarsObject, isKarsKind, suggestKnownField } from '@kars/policy-compiler';

/** Where a document came from, for the message: the file and its document number, or nothing (built from flags). */
export interface DocSource {
  file?: string;
  doc?: number;
}

/**
 * One line per unknown field of `doc` (a parsed document of any kind; non-kars kinds and
 * non-objects have none): `FILE doc N: Kind ns/name: unknown field "spec.x" (did you mean spec.y?)`.
 * Pure: `doc` is not modified. [] when the document is clean.
 */
export function unknownFieldErrors(doc: unknown, source: DocSource = {}, defaultNamespace = 'default'): string[] {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return [];
  const d = doc as Record<string, unknown>;
  const kind = typeof d['kind'] === 'string' ? d['kind'] : '';
  if (!isKarsKind(kind)) return [];
  const meta = (typeof d['metadata'] === 'object' && d['metadata'] !== null ? d['metadata'] : {}) as Record<string, unknown>;
  const name = typeof meta['name'] === 'string' ? meta['name'] : '(unnamed)';
  const ns = typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : defaultNamespace;
  let copy: Record<string, unknown>;
  try {
    copy = structuredClone(d);
  } catch {
    return [];
  }
  const where =
    source.file === undefined
      ? ''
      : `${source.file === '-' ? '<stdin>' : source.file}${source.doc !== undefined ? ` doc ${source.doc}` : ''}: `;
  return admitKarsObject(kind, copy).unknownFields.map((p) => {
    const near = suggestKnownField(kind, p);
    return `${where}${kind} ${ns}/${name}: unknown field "${p}"${near === undefined ? '' : ` (did you mean ${near}?)`}`;
  });
}
