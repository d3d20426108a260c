import { Command } from 'commander';
import { crdYaml } from '@kars/policy-api';

/** Where `kars crds` writes; stdout unless a test passes its own sink. */
export interface TextSink {
  write(chunk: string): unknown;
}

/**
 * `kars crds`: print the four kars CustomResourceDefinitions (InferencePolicy, ToolPolicy, EgressApproval,
 * KarsSandbox) as one multi-document YAML stream, identical to `deploy/crds/all.yaml`.
 *
 *   kars crds | kubectl apply --server-side -f -
 */
export function crdsCommand(out: TextSink = process.stdout): Command {
  return new Command('crds')
    .description('print the kars CustomResourceDefinitions as multi-document YAML (pipe to kubectl apply -f -)')
    .action(() => {
      out.write(crdYaml());
    });
}
