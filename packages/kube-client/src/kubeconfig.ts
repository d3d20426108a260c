import type { KubeConfig as ClientNodeKubeConfig } from '@kubernetes/client-node';
import { fileURLToPath } from 'node:url';

/** Where {@link KubeConfig} was loaded from: kube-client's build-time bundle of it, or client-node's package entry. */
export type KubeConfigSource = 'bundle' | 'package';

/** @kubernetes/client-node's KubeConfig class (an instance type, for signatures). */
export type KubeConfig = ClientNodeKubeConfig;

async function loadKubeConfigClass(): Promise<{ KubeConfig: typeof ClientNodeKubeConfig; source: KubeConfigSource }> {
  // The bundle is client-node's own KubeConfig code, built from node_modules by
  // scripts/bundle-kubeconfig.mjs during `npm run build` (ADR 0020). It spares every process the
  // ~960 modules of client-node's generated API that its package entry loads first. A build without
  // it (plain `tsc -b`) uses the package: the same class, only a slower start.
  const bundle = new URL('./vendor/kubeconfig.js', import.meta.url);
  try {
    const m = (await import(bundle.href)) as { KubeConfig: typeof ClientNodeKubeConfig };
    return { KubeConfig: m.KubeConfig, source: 'bundle' };
  } catch (err) {
    // Only the bundle's own absence falls back (its path in the message, decoded); a bundle that fails to load throws.
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND' || !String((err as Error).message).includes(fileURLToPath(bundle)))
      throw err;
    const m = await import('@kubernetes/client-node');
    return { KubeConfig: m.KubeConfig, source: 'package' };
  }
}

const loaded = await loadKubeConfigClass();

/** client-node's KubeConfig class, as {@link kubeConfigSource} says it was loaded. */
export const KubeConfig: typeof ClientNodeKubeConfig = loaded.KubeConfig;

/** Whether this process uses the bundled KubeConfig ('bundle') or client-node's package entry ('package'). */
export const kubeConfigSource: KubeConfigSource = loaded.source;
