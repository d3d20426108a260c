import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** One pinned Kubernetes version of kube/versions.json. */
export interface KubePin {
  /** The minor, as a person types it: `"1.34"`. */
  minor: string;
  /** The k8s.io/kubernetes tag: `"v1.34.4"`. */
  version: string;
  /** Its wrapper module under kube/. */
  dir: string;
}

/** kube/versions.json: the one place the control-plane versions are pinned (ADR 0022). */
export interface KubePins {
  kubernetes: KubePin[];
  etcd: { version: string; dir: string };
  helm: { version: string; dir: string };
}

/** Where kube/versions.json is: the repository's, next to the wrapper modules. */
export const VERSIONS_FILE = fileURLToPath(new URL('../../../kube/versions.json', import.meta.url));

/** The pins, read from {@link VERSIONS_FILE} (the same file `npm run kube:build` reads). */
export function readPins(file = VERSIONS_FILE): KubePins {
  return JSON.parse(readFileSync(file, 'utf8')) as KubePins;
}

/**
 * The pin for `version` (`"1.34"`, `"v1.34"`, `"1.34.4"` or `"v1.34.4"`), or undefined when it is
 * not pinned. No version: the newest pinned.
 */
export function pinFor(version: string | undefined, pins = readPins()): KubePin | undefined {
  if (version === undefined) return pins.kubernetes[pins.kubernetes.length - 1];
  const v = version.replace(/^v/, '');
  return pins.kubernetes.find((p) => p.minor === v || p.version === `v${v}`);
}

/** The binary cache `npm run kube:build` fills: `$KARS_KUBE_CACHE`, else `~/.cache/kars/kube`. */
export function kubeCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const v = env['KARS_KUBE_CACHE'];
  return v !== undefined && v !== '' ? v : join(homedir(), '.cache', 'kars', 'kube');
}
