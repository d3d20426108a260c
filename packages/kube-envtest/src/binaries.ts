import { accessSync, constants, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { findKubectl } from '@kars/kube-core/testing';
import { kubeCacheDir, pinFor, readPins } from './versions.js';
import type { KubePins } from './versions.js';

/** Absolute paths of one pinned version's control-plane binaries. */
export interface KubeBinaries {
  /** The k8s.io/kubernetes tag they were built from: `"v1.34.4"`. */
  version: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  etcd: string;
  helm: string;
}

/** What {@link findKubeBinaries} found: the binaries, or null and why not (naming the command that builds them). */
export type KubeBinariesLookup = { binaries: KubeBinaries; reason?: undefined } | { binaries: null; reason: string };

/** The command that fills the cache; every "absent" reason names it. */
export const BUILD_COMMAND = 'npm run kube:build';

/**
 * Whether `dir` holds a finished build of `version`: its stamp.json (written last by
 * scripts/build-kube.mjs, after every binary was renamed into place) names that version, and each
 * binary is there and executable. A reason string when not.
 */
function checkDir(dir: string, version: string, names: readonly string[]): string | undefined {
  let stamp: { version?: unknown };
  try {
    stamp = JSON.parse(readFileSync(join(dir, 'stamp.json'), 'utf8')) as { version?: unknown };
  } catch {
    return `${dir} has no finished build`;
  }
  if (stamp.version !== version) return `${dir} holds ${String(stamp.version)}, not ${version}`;
  for (const n of names) {
    try {
      accessSync(join(dir, n), constants.X_OK);
    } catch {
      return `${join(dir, n)} is missing or not executable`;
    }
  }
  return undefined;
}

/**
 * The control-plane binaries of `version` (default: the newest pinned) in the cache
 * ({@link kubeCacheDir}), or null and a reason to skip with: the version is not pinned, or
 * `npm run kube:build` has not built it. Reads only the file system; never builds.
 */
export function findKubeBinaries(
  version?: string,
  { cacheDir = kubeCacheDir(), pins = readPins() }: { cacheDir?: string; pins?: KubePins } = {},
): KubeBinariesLookup {
  const pin = pinFor(version, pins);
  if (!pin)
    return {
      binaries: null,
      reason: `Kubernetes ${version ?? '?'} is not pinned in kube/versions.json (pinned: ${pins.kubernetes.map((p) => p.minor).join(', ')})`,
    };
  const kubeDir = join(cacheDir, `kubernetes-${pin.version}`);
  const etcdDir = join(cacheDir, `etcd-${pins.etcd.version}`);
  const helmDir = join(cacheDir, `helm-${pins.helm.version}`);
  const why =
    checkDir(kubeDir, pin.version, ['kube-apiserver', 'kube-controller-manager']) ??
    checkDir(etcdDir, pins.etcd.version, ['etcd']) ??
    checkDir(helmDir, pins.helm.version, ['helm']);
  if (why !== undefined)
    return { binaries: null, reason: `Kubernetes ${pin.version} binaries absent (${why}); build them with \`${BUILD_COMMAND}\`` };
  return {
    binaries: {
      version: pin.version,
      kubeApiserver: join(kubeDir, 'kube-apiserver'),
      kubeControllerManager: join(kubeDir, 'kube-controller-manager'),
      etcd: join(etcdDir, 'etcd'),
      helm: join(helmDir, 'helm'),
    },
  };
}

/**
 * The newest versioned kubectl (`kubectl.1.33`, …) beside the `kubectl` on PATH (which may be a
 * dispatcher script), else that `kubectl` itself; undefined when there is none. Newest, because
 * the server is a real kube-apiserver of a recent minor.
 */
export function findKubectlBinary(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return findKubectl('newest', env);
}
