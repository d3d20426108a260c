/**
 * The shape of a policy kind's descriptor: everything the controller, the compiler, the router and
 * the CLI must agree on about one kind, declared once in that kind's file under `kinds/` (ADR 0051).
 *
 * A descriptor answers:
 * - which API resource it is, its finalizer and its server-side-apply field managers;
 * - which ConfigMap it compiles to (name, keys, labels) and how (`compile`);
 * - how a router reads that ConfigMap back and decides whether it can enforce it (`load`);
 * - which echo kinds a router reports for it, and what digests the controller must see in them;
 * - which sandboxes refer to it.
 *
 * Consumers take these from the descriptor and never restate them.
 */
import type { EchoKind, KarsSandbox, ValidationCause } from '@kars/policy-api';
import type { CompileResult } from '../result.js';
import type { CompiledConfigMap } from '../configmaps.js';
import type { LoadOutcome, RouterCapabilities } from '../router-view.js';

/** One echo a router must report before a compiled policy is Ready: this digest under this kind. */
export interface EchoExpectation {
  kind: EchoKind;
  digest: string;
}

/** The API resource of a kind, as `@kars/policy-api` declares it. */
export interface KindResource {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

/** How a policy kind that compiles to a ConfigMap of its own is named: `<prefix><policy>-profile`. */
export interface ProfileConfigMap {
  /** The ConfigMap compiled from the policy `policyName`, in the policy's namespace. */
  name(policyName: string): string;
  /** The policy a ConfigMap name belongs to, or undefined when the name is not of this kind. */
  policyOf(configMapName: string): string | undefined;
  /** The label whose value names the policy (the controller's trigger from ConfigMap to policy). */
  readonly policyLabel: string;
  /** The value of the artifact label. */
  readonly artifact: string;
  /** The key whose body holds the compiled spec, including `enforcement` and `appliesTo`. */
  readonly bodyKey: string;
}

/** What the controller writes into a policy's status from a compile, and what it then waits for. */
export interface CompiledStatus {
  /** The compiled ConfigMap, ready for server-side apply. */
  configMap: CompiledConfigMap;
  /** `status.compiledDigest` (undefined: none). */
  digest: string | undefined;
  /** The echoes every referring router must report before the policy is Ready. */
  expect: EchoExpectation[];
  /** Further status fields this kind records. */
  extra: Record<string, unknown>;
}

/**
 * What a policy kind that compiles to one ConfigMap per policy, referred to by sandboxes
 * (InferencePolicy, ToolPolicy), declares about itself: everything but its functions of a policy.
 */
export interface ProfileKindIdentity {
  readonly kind: 'InferencePolicy' | 'ToolPolicy';
  readonly resource: KindResource;
  readonly finalizer: string;
  /** Field manager of the compiled ConfigMap. */
  readonly fieldManager: string;
  /** Field manager of the policy's status. */
  readonly statusManager: string;
  readonly configMap: ProfileConfigMap;
  /** Every echo kind a router may report for this kind (a subset of them for one policy). */
  readonly echoKinds: readonly EchoKind[];
  /** The echo kind whose digest `status.compiledDigest` records (the contract's one echoed artifact). */
  readonly statusDigestKind: EchoKind;
  /** The policy of this kind `sandbox`'s spec refers to (what its routers enforce), or undefined. */
  referencedBy(sandbox: Pick<KarsSandbox, 'spec'>): string | undefined;
}

/**
 * A profile kind's descriptor: its identity, and how a policy of it is validated, compiled, awaited
 * and read back by a router. `Compiled` is what `compile` yields; `Load` is what a router makes of
 * the ConfigMap.
 */
export interface ProfileKind<
  Policy extends { metadata: { name?: string; namespace?: string }; spec?: unknown },
  Compiled,
  Load,
> extends ProfileKindIdentity {
  /** Semantic validation of a spec, beyond the CRD schema. */
  validate(spec: NonNullable<Policy['spec']>): ValidationCause[];
  /** Compile one policy. Pure; never throws. */
  compile(policy: Policy): CompileResult<Compiled>;
  /** The status fields and expected echoes of a compile. */
  status(compiled: Compiled): CompiledStatus;
  /**
   * How a router reads the compiled ConfigMap of the policy `name` (its `data`, undefined when it is
   * absent) and decides whether it can enforce it. `source` names where it came from.
   */
  load(name: string, data: Readonly<Record<string, string>> | undefined, source: string, caps: RouterCapabilities): Load;
  /**
   * What a router echoes of an outcome of {@link load}: one entry per echo kind, the outcome as it
   * is recorded under that kind (a loaded one carries that kind's digest, a refused one the digest
   * that kind refused).
   */
  echoesOf(outcome: Load): Array<{ kind: EchoKind; outcome: LoadOutcome<unknown> }>;
}

/** The naming of a {@link ProfileConfigMap}: `<prefix><policy>-profile`. */
export function profileNaming(prefix: string): Pick<ProfileConfigMap, 'name' | 'policyOf'> {
  const suffix = '-profile';
  return {
    name: (policyName) => `${prefix}${policyName}${suffix}`,
    policyOf: (cm) => {
      if (!cm.startsWith(prefix) || !cm.endsWith(suffix) || cm.length <= prefix.length + suffix.length) return undefined;
      return cm.slice(prefix.length, -suffix.length);
    },
  };
}
