/**
 * The CRDs as YAML, exactly as committed under `deploy/crds/`. Deterministic: the same build always yields the
 * same bytes (key order is the insertion order in `crds.ts`, no line folding), so a test can compare the committed
 * files byte for byte and fail when someone edits a schema without regenerating.
 */
import { stringify } from 'yaml';
import { allCrds, type CustomResourceDefinition } from './crds.js';

/** The first line of every generated file. */
export const GENERATED_HEADER =
  '# Generated from packages/policy-api/src/crds.ts by `node packages/policy-api/dist/generate-crds.js`. Do not edit.\n';

function doc(crd: CustomResourceDefinition): string {
  return stringify(crd, { lineWidth: 0, minContentWidth: 0, indent: 2, sortMapEntries: false, aliasDuplicateObjects: false });
}

/** One CRD as a YAML document (with the generated-file header). */
export function crdDocYaml(crd: CustomResourceDefinition): string {
  return GENERATED_HEADER + doc(crd);
}

/** All four CRDs as one multi-document YAML stream (`deploy/crds/all.yaml`). */
export function crdYaml(): string {
  return GENERATED_HEADER + allCrds().map(doc).join('---\n');
}

/** Every file under `deploy/crds/` that is generated: `<plural>.<group>.yaml` per CRD, plus `all.yaml`. */
export function crdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const crd of allCrds()) files.set(`${crd.metadata.name}.yaml`, crdDocYaml(crd));
  files.set('all.yaml', crdYaml());
  return files;
}
